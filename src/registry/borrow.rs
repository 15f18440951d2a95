//! Whether a registry entry that names a configured server (`[servers.NAME]`) may be served
//! through that server's stack — its address, headers and credentials.
//!
//! A registry writer is trusted less than the configuration: an entry that names a configured
//! server must not send that server's credentials somewhere else, nor reach a server the
//! registry URL allowlist would refuse. So such an entry is served through the configured
//! stack only when it points where the configuration does (same transport and URL, or same
//! Lambda function and qualifier), or when the server opts in
//! (`servers.NAME.registry_may_use = true`: registry entries may add tools to it whatever
//! address they carry). Any other entry is refused; the gateway counts, logs and remembers
//! the refusal like a refused registry URL (`docs/security-edge-and-registry.md`).

use crate::config::{ServerConfig, TransportKind};

use super::{entry::ServerRef, url_policy::Refusal};

/// The metric label of this refusal (`mcp_gateway_registry_upstreams_refused_total`).
pub const REASON: &str = "configured_server";

/// `Ok` when `origin` (a registry entry's server) may use `configured`, the server
/// configured under the same name; else why not.
pub fn check(name: &str, origin: &ServerRef, configured: &ServerConfig) -> Result<(), Refusal> {
    if configured.registry_may_use || same_address(origin, configured) {
        return Ok(());
    }
    Err(Refusal {
        reason: REASON,
        detail: format!(
            "server {name} is configured; a registry entry naming it must carry its transport and address (or set servers.{name}.registry_may_use = true to let registry entries use it)"
        ),
    })
}

/// The entry points where the configuration does.
fn same_address(origin: &ServerRef, configured: &ServerConfig) -> bool {
    if TransportKind::parse(&origin.transport) != Some(configured.transport) {
        return false;
    }
    match configured.transport {
        TransportKind::Lambda => {
            origin.function.is_some()
                && origin.function == configured.function
                && origin.qualifier == configured.qualifier
        }
        // A registry entry names one of `stdio_commands`, never the configured program.
        TransportKind::Stdio => false,
        // An OpenAPI target is configuration only: registry entries cannot carry a document.
        TransportKind::Openapi => false,
        TransportKind::Http | TransportKind::Websocket | TransportKind::Sse => {
            origin.url.is_some() && origin.url == configured.url
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(transport: &str, url: Option<&str>) -> ServerRef {
        ServerRef {
            name: "checkout".into(),
            transport: transport.into(),
            url: url.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_configured_address_or_an_opt_in_may_use_a_configured_server() {
        let mut configured =
            ServerConfig::new(TransportKind::Http, Some("http://checkout/mcp".into()), None, None);
        assert!(check("checkout", &origin("http", Some("http://checkout/mcp")), &configured).is_ok());
        for other in [
            origin("http", Some("http://elsewhere/mcp")),
            origin("http", None),
            origin("sse", Some("http://checkout/mcp")),
        ] {
            let refusal = check("checkout", &other, &configured).unwrap_err();
            assert_eq!(refusal.reason, REASON);
            assert!(refusal.detail.contains("servers.checkout.registry_may_use"), "{}", refusal.detail);
        }
        configured.registry_may_use = true;
        assert!(check("checkout", &origin("http", Some("http://elsewhere/mcp")), &configured).is_ok());
        assert!(check("checkout", &origin("http", None), &configured).is_ok());
    }

    #[test]
    fn lambda_servers_compare_function_and_qualifier() {
        let configured =
            ServerConfig::new(TransportKind::Lambda, None, Some("orders".into()), Some("live".into()));
        let mut entry = ServerRef {
            name: "orders".into(),
            transport: "lambda".into(),
            function: Some("orders".into()),
            qualifier: Some("live".into()),
            ..Default::default()
        };
        assert!(check("orders", &entry, &configured).is_ok());
        entry.qualifier = None;
        assert!(check("orders", &entry, &configured).is_err());
    }
}
