//! `mcp-gateway healthcheck`: the client side of `/healthz` for container health checks
//! (ECS `healthCheck`, Docker `HEALTHCHECK`). The images have no shell tools (no curl, and
//! dash has no `/dev/tcp`), so the binary probes itself: one GET with a short timeout, exit 0
//! on 2xx, else 1, with one line saying why.
//!
//! The default target is liveness (`/healthz` on the configured listen port), not readiness:
//! a container health check that fails restarts the task, and with `dependsOn: HEALTHY` it
//! gates the orchestrator. Restarting the gateway does not bring an upstream back and throws
//! away its breaker state, so an upstream outage must not fail the health check. Readiness
//! (`--url http://127.0.0.1:8080/readyz`) is for start-up gating.

use std::{net::SocketAddr, time::Duration};

/// How long the probe waits for the whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// `http://127.0.0.1:<port>/healthz` for a listen address (an unspecified address is probed
/// on loopback, a specific one as is).
pub fn default_url(listen: SocketAddr) -> String {
    let ip = match listen.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    };
    format!("http://{ip}:{}/healthz", listen.port())
}

/// Probes `url`: `Ok(line)` on 2xx, `Err(line)` otherwise.
pub async fn probe(url: &str) -> Result<String, String> {
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|e| format!("unhealthy: cannot build an HTTP client: {e}"))?;
    match client.get(url).send().await {
        Ok(response) if response.status().is_success() => {
            Ok(format!("healthy: {url} answered {}", response.status()))
        }
        Ok(response) => {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            let body: String =
                body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(300).collect();
            Err(format!("unhealthy: {url} answered {status}: {body}"))
        }
        Err(e) if e.is_timeout() => Err(format!("unhealthy: {url} did not answer within {TIMEOUT:?}")),
        Err(e) if e.is_connect() => {
            Err(format!("unhealthy: cannot connect to {url} (is the gateway running?)"))
        }
        Err(e) => Err(format!("unhealthy: {url}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_url_probes_loopback_for_wildcard_addresses() {
        assert_eq!(default_url("0.0.0.0:8080".parse().unwrap()), "http://127.0.0.1:8080/healthz");
        assert_eq!(default_url("[::]:9000".parse().unwrap()), "http://[::1]:9000/healthz");
        assert_eq!(default_url("10.0.0.5:81".parse().unwrap()), "http://10.0.0.5:81/healthz");
    }
}
