//! Which endpoints a registry entry may point at (`[registry.upstream_urls]`).
//!
//! Registry entries are data: whoever can write the DynamoDB table or a Redis
//! `mcp:tool:<name>` key could otherwise send every caller's arguments to any URL — the
//! instance metadata service at 169.254.169.254, an internal admin API. So an entry's URL must
//! match an `allow` pattern, and a loopback, link-local, metadata or unspecified address passes
//! only a pattern that names that host literally (a wildcard never reaches them). Host names
//! are resolved (`resolve`, on by default) and refused when they resolve to such an address.
//!
//! The check runs when a registry server's stack is built (once per origin; refusals are
//! remembered per origin too), not per call; a name that changes its address afterwards is
//! not seen until the entry changes (see the docs for this limit).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

use crate::config::UpstreamUrlSettings;

/// Checks every `allow` pattern of the settings (at load: `serve` and `check-config`).
pub fn validate(settings: &UpstreamUrlSettings) -> anyhow::Result<()> {
    for pattern in &settings.allow {
        if let Err(why) = Pattern::parse(pattern) {
            anyhow::bail!("registry.upstream_urls.allow: {pattern:?}: {why}");
        }
    }
    Ok(())
}

/// A host in a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// `*`: any host (never a special address).
    Any,
    /// `*.example.com`: any subdomain of it (stored with its leading dot).
    Subdomains(String),
    /// One IP address.
    Ip(IpAddr),
    /// One host name (lower case, no trailing dot).
    Name(String),
}

/// A port in a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortPattern {
    Any,
    /// No port given: the scheme's default only.
    Default,
    Exact(u16),
}

/// One `allow` entry: `scheme://host[:port][/path-prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    scheme: String,
    host: HostPattern,
    port: PortPattern,
    path_prefix: Option<String>,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (scheme, rest) = text.split_once("://").ok_or("needs scheme://host")?;
        let scheme = scheme.to_ascii_lowercase();
        if !matches!(scheme.as_str(), "http" | "https" | "ws" | "wss") {
            return Err(format!("scheme {scheme:?} is not http, https, ws or wss"));
        }
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], Some(&rest[at..])),
            None => (rest, None),
        };
        if authority.contains('@') || authority.contains('?') {
            return Err("a pattern has no user-info or query".into());
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or("unclosed [")?;
                (host, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = if host.starts_with('*') { host } else { host.trim_end_matches('.').to_string() };
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(parent) = host.strip_prefix("*.") {
            if parent.is_empty() || parent.contains('*') || parent.starts_with('.') || parent.ends_with('.') {
                return Err("a wildcard host is * or *.domain".into());
            }
            HostPattern::Subdomains(format!(".{parent}"))
        } else if host.contains('*') {
            return Err("a wildcard host is * or *.domain".into());
        } else if host.is_empty() {
            return Err("empty host".into());
        } else {
            match host.parse::<IpAddr>() {
                Ok(ip) => HostPattern::Ip(canonical(ip)),
                Err(_) => HostPattern::Name(host),
            }
        };
        let port = match port {
            None => PortPattern::Default,
            Some("*") => PortPattern::Any,
            Some(port) => PortPattern::Exact(port.parse().map_err(|_| format!("port {port:?}"))?),
        };
        let path_prefix =
            path.filter(|p| *p != "/" && !p.is_empty()).map(|p| p.trim_end_matches('/').to_string());
        Ok(Self { scheme, host, port, path_prefix })
    }

    fn matches(&self, url: &Url) -> bool {
        let scheme_ok = self.scheme == url.scheme();
        let host_ok = match (&self.host, host_of(url)) {
            (HostPattern::Any, Some(_)) => true,
            (HostPattern::Subdomains(parent), Some(Host::Domain(name))) => name.ends_with(parent.as_str()),
            _ => self.names(url),
        };
        let port_ok = match self.port {
            PortPattern::Any => true,
            PortPattern::Default => url.port().is_none(),
            PortPattern::Exact(port) => url.port_or_known_default() == Some(port),
        };
        let path_ok = self.path_prefix.as_deref().is_none_or(|prefix| {
            let path = url.path();
            path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
        });
        scheme_ok && host_ok && port_ok && path_ok
    }

    /// The pattern names this URL's host literally (no wildcard).
    fn names(&self, url: &Url) -> bool {
        match (&self.host, host_of(url)) {
            (HostPattern::Ip(ip), Some(Host::Ip(host))) => *ip == host,
            (HostPattern::Name(name), Some(Host::Domain(host))) => host == *name,
            _ => false,
        }
    }
}

/// A URL's host as the parser normalised it (`2130706433` and `0x7f000001` are 127.0.0.1).
enum Host {
    Ip(IpAddr),
    Domain(String),
}

fn host_of(url: &Url) -> Option<Host> {
    let host = url.host_str()?;
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    Some(match bare.parse::<IpAddr>() {
        Ok(ip) => Host::Ip(canonical(ip)),
        Err(_) => Host::Domain(bare.trim_end_matches('.').to_ascii_lowercase()),
    })
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they are.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The EC2 instance metadata service's IPv6 address.
const EC2_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
/// Alibaba Cloud's metadata service.
const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);

/// Loopback, link-local (metadata services live there), other metadata addresses,
/// unspecified ("this host") addresses.
pub fn is_special(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_link_local()
                || v4.octets()[0] == 0
                || v4 == ALIBABA_METADATA
                || v4.is_broadcast()
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == EC2_METADATA_V6
        }
    }
}

/// Why a URL was refused; `reason` is the metric label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub detail: String,
}

impl Refusal {
    fn new(reason: &'static str, detail: impl Into<String>) -> Self {
        Self { reason, detail: detail.into() }
    }
}

/// Allowed, or why not. Resolves the host name when `settings.resolve` asks for it.
pub async fn check(url_text: &str, settings: &UpstreamUrlSettings) -> Result<(), Refusal> {
    let url = Url::parse(url_text).map_err(|e| Refusal::new("invalid_url", format!("not a URL ({e})")))?;
    if !url.username().is_empty() || url.password().is_some() {
        // Credentials belong in configuration (`headers`), not in registry data.
        return Err(Refusal::new("invalid_url", "a registry URL carries no user-info"));
    }
    let patterns: Vec<Pattern> = settings.allow.iter().filter_map(|p| Pattern::parse(p).ok()).collect();
    let matching: Vec<&Pattern> = patterns.iter().filter(|p| p.matches(&url)).collect();
    if matching.is_empty() {
        return Err(Refusal::new(
            "not_allowlisted",
            "the URL matches no registry.upstream_urls.allow pattern",
        ));
    }
    if matching.iter().any(|p| p.names(&url)) {
        return Ok(());
    }
    let special = |what: String| {
        Err(Refusal::new(
            "special_address",
            format!(
                "{what} is a loopback, link-local or metadata address; only an allow pattern naming it literally admits it"
            ),
        ))
    };
    match host_of(&url) {
        Some(Host::Ip(ip)) if is_special(ip) => special(ip.to_string()),
        Some(Host::Domain(name)) => {
            if name == "localhost" || name.ends_with(".localhost") {
                return special(name);
            }
            if settings.resolve {
                let port = url.port_or_known_default().unwrap_or(80);
                // A name that does not resolve now is not refused here: the connection fails.
                if let Ok(addresses) = tokio::net::lookup_host((name.as_str(), port)).await {
                    for address in addresses {
                        if is_special(address.ip()) {
                            return special(format!("{name} (resolves to {})", address.ip()));
                        }
                    }
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(allow: &[&str]) -> UpstreamUrlSettings {
        UpstreamUrlSettings { allow: allow.iter().map(|s| s.to_string()).collect(), resolve: true }
    }

    fn verdict(url: &str, allow: &[&str]) -> Result<(), &'static str> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(check(url, &settings(allow))).map_err(|r| r.reason)
    }

    #[test]
    fn urls_must_match_a_pattern() {
        let allow = ["https://*.tools.example", "http://catalog.internal:8080/mcp", "wss://ws.example:*"];
        assert_eq!(verdict("https://a.tools.example/mcp", &allow), Ok(()));
        assert_eq!(verdict("https://a.b.tools.example/x", &allow), Ok(()));
        assert_eq!(verdict("https://tools.example/x", &allow), Err("not_allowlisted"));
        assert_eq!(
            verdict("https://a.tools.example:8443/x", &allow),
            Err("not_allowlisted"),
            "default port only"
        );
        assert_eq!(verdict("http://a.tools.example/x", &allow), Err("not_allowlisted"), "scheme");
        assert_eq!(verdict("http://catalog.internal:8080/mcp", &allow), Ok(()));
        assert_eq!(verdict("http://catalog.internal:8080/mcp/sub", &allow), Ok(()));
        assert_eq!(verdict("http://catalog.internal:8080/mcpx", &allow), Err("not_allowlisted"));
        assert_eq!(verdict("http://catalog.internal:8081/mcp", &allow), Err("not_allowlisted"));
        assert_eq!(verdict("wss://ws.example:9443/ws", &allow), Ok(()));
        assert_eq!(verdict("https://u:p@a.tools.example/", &allow), Err("invalid_url"));
        assert_eq!(verdict("not a url", &allow), Err("invalid_url"));
        assert_eq!(verdict("http://anything.example/", &[]), Err("not_allowlisted"), "empty list: nothing");
    }

    #[test]
    fn special_addresses_need_a_literal_pattern() {
        let wildcard = ["http://*:*"];
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://127.0.0.1:9/mcp",
            "http://127.1.2.3/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://[::1]:8080/",
            "http://[::ffff:169.254.169.254]/",
            "http://[fd00:ec2::254]/",
            "http://[fe80::1]/",
            "http://100.100.100.200/",
            "http://0.0.0.0:80/",
            "http://localhost:8080/",
            "http://api.localhost/",
        ] {
            assert_eq!(verdict(url, &wildcard), Err("special_address"), "{url}");
        }
        assert_eq!(verdict("http://127.0.0.1:9/mcp", &["http://127.0.0.1:*"]), Ok(()));
        assert_eq!(verdict("http://169.254.169.254/", &["http://169.254.169.254"]), Ok(()));
        assert_eq!(verdict("http://[::1]:8080/", &["http://[::1]:8080"]), Ok(()));
        assert_eq!(verdict("http://localhost:8080/", &["http://localhost:*"]), Ok(()));
        assert_eq!(
            verdict("http://10.1.2.3:8080/", &wildcard),
            Ok(()),
            "private addresses are the allowlist's call"
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["catalog.internal", "ftp://x", "http://a*.b", "http://*.", "http://u@h", "http://h:port"]
        {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }
}
