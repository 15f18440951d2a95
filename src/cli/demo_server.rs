//! `demo-server`: the store's demo MCP server on its own (streamable HTTP, or as a Lambda
//! function behind the Invoke REST API), until SIGTERM or Ctrl-C.

use std::net::SocketAddr;

use mcp_gateway::{demo, telemetry};

use super::signal::shutdown_signal;

pub async fn run(
    listen: SocketAddr,
    lambda_api: bool,
    options: demo::http::DemoOptions,
) -> anyhow::Result<()> {
    let _log_guard = telemetry::logging::init("info", true);
    let shutdown = shutdown_signal();
    let bound = if lambda_api {
        demo::lambda_api::spawn(listen).await?
    } else {
        demo::http::spawn(listen, options).await?
    };
    if lambda_api {
        tracing::info!(listen = %bound, "manga demo MCP server listening as Lambda functions at http://{bound}/2015-03-31/functions/mcp-demo/invocations");
    } else {
        tracing::info!(listen = %bound, "manga demo MCP server listening on http://{bound}/mcp");
    }
    shutdown.await;
    Ok(())
}
