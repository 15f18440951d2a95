//! `registry …`: the DynamoDB tool registry's table and entries, and `registry approve`, which
//! asks a running gateway's admin endpoint to accept pending tool definition changes.

use std::path::PathBuf;

use anyhow::bail;
use mcp_gateway::{config::Config, server};

use super::args::RegistryAction;

pub async fn run(
    config: Option<PathBuf>,
    table: Option<String>,
    action: RegistryAction,
) -> anyhow::Result<()> {
    use mcp_gateway::registry::{admin_cli, entry::ServerRef};
    use std::io::Write;
    let config = Config::load(config.as_deref(), std::env::vars())?;
    if let RegistryAction::Approve { tool, prompt, origin, all, server, url } = action {
        let base = url.unwrap_or_else(|| {
            let listen = config.admin.listen.unwrap_or(config.listen);
            server::probe::default_url(listen).trim_end_matches("/healthz").to_string()
        });
        let token = config.admin.load_token()?;
        let named = admin_cli::Named { tool: tool.as_deref(), prompt: prompt.as_deref(), origin };
        let answer = admin_cli::approve(&base, token.as_deref(), named, server.as_deref(), all).await?;
        let _ = writeln!(std::io::stdout().lock(), "{answer}");
        return Ok(());
    }
    let client = admin_cli::RegistryClient::from_config(&config, table.as_deref()).await?;
    let mut out = std::io::stdout().lock();
    let table = client.dynamo.table().to_string();
    let fail = |e: mcp_gateway::registry::TierError| anyhow::anyhow!("{e}");
    match action {
        RegistryAction::CreateTable => {
            let created = client.dynamo.create_table().await.map_err(fail)?;
            let _ = writeln!(out, "table {table}: {}", if created { "created" } else { "already exists" });
        }
        RegistryAction::Put { file } => {
            let stored = client.put(admin_cli::entry_from_file(&file)?).await?;
            let _ = writeln!(out, "{}", admin_cli::summary(&stored));
        }
        RegistryAction::Get { name } => match client.dynamo.get(&name).await.map_err(fail)? {
            Some(entry) => {
                let _ = writeln!(out, "{}", serde_json::to_string_pretty(&entry)?);
            }
            None => bail!("no tool named {name:?} in {table}"),
        },
        RegistryAction::List => {
            for entry in client.dynamo.scan_active(|_| {}).await.map_err(fail)? {
                let _ = writeln!(out, "{}", admin_cli::summary(&entry));
            }
        }
        RegistryAction::Delete { name } => {
            if !client.delete(&name).await? {
                bail!("no tool named {name:?} in {table}");
            }
            let _ = writeln!(out, "deleted {name}");
        }
        RegistryAction::Approve { .. } => unreachable!("answered above, without DynamoDB"),
        RegistryAction::Import { file, server, transport, url, function, qualifier, command } => {
            let server = ServerRef {
                name: server,
                transport,
                url,
                function,
                qualifier,
                command,
                ..ServerRef::default()
            };
            let count = admin_cli::import(&client, &file, server).await?;
            let _ = writeln!(out, "imported {count} tools into {table}");
        }
    }
    Ok(())
}
