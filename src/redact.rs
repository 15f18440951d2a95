//! What may be written about a secret-bearing value: one place that decides, used by every
//! log line and by `check-config`.
//!
//! - URLs: the password of the user-info (`user:<redacted>@`, or all of a lone `token@`) and
//!   every query value are replaced by `<redacted>`;
//!   scheme, host, port, path and query keys stay, so a line still says which endpoint it is.
//!   A fragment is dropped.
//! - Command-line arguments (stdio servers): URLs as above, `--token=…`-style values and the
//!   argument after a secret-named flag (`--api-key VALUE`), and values with the prefix of a
//!   well-known token format (`sk-`, `ghp_`, `xoxb-`, `AKIA`, …).
//! - Errors ([`shown`]): their text with every URL in it redacted as above (an HTTP
//!   client names the URL it failed to reach).
//! - Session ids (which authorise answering relayed requests): never written; [`session_tag`]
//!   is a short hash prefix that still lets lines of one session be grouped.
//! - A caller's subject in quota keys and reports: [`hash_subject`].

use sha2::{Digest, Sha256};

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// `scheme://user:pass@host:port/path?k=v#f` → `scheme://user:<redacted>@host:port/path?k=<redacted>`.
/// Text that is not a URL is returned unchanged when it has no `?`, else cut at the `?`.
pub fn url(text: &str) -> String {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, text),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let mut out = String::with_capacity(text.len());
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
        // The authority ends at the first '/'; its user-info at the last '@' inside it.
        let (authority, path) = match before_query.find('/') {
            Some(at) => before_query.split_at(at),
            None => (before_query, ""),
        };
        match authority.rsplit_once('@') {
            Some((user_info, host)) => {
                // `user:secret@` keeps the user name (not a secret, and it tells which
                // account); a lone `token@` is the secret itself.
                if let Some((user, _)) = user_info.split_once(':') {
                    out.push_str(user);
                    out.push(':');
                }
                out.push_str(REDACTED);
                out.push('@');
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        out.push_str(path);
    } else {
        out.push_str(before_query);
    }
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((key, _)) => {
                    out.push_str(key);
                    out.push('=');
                    out.push_str(REDACTED);
                }
                // A bare `?token` is a value too.
                None if pair.is_empty() => {}
                None => out.push_str(REDACTED),
            }
        }
    }
    out
}

/// Free text (an error message) with every URL in it passed through [`url`]; a URL ends at
/// whitespace, a quote, `)` or `>`.
pub fn text(message: &str) -> String {
    if !message.contains("://") {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("://") {
        // Back to the start of the scheme.
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let mut end = url_end(rest, at);
        // Text redacted before: the `>` of a `<redacted>` inside the URL does not end it.
        while rest[..end].ends_with("<redacted") && rest[end..].starts_with('>') {
            end = url_end(rest, end + 1);
        }
        out.push_str(&rest[..scheme_start]);
        out.push_str(&url(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// An error (or any displayable value) as a log line may show it: its `Display` through
/// [`text`]. Every log site that writes an error that may name a URL (an HTTP client's
/// failure, a redirect, a server's message) writes it through this.
pub fn shown(value: &impl std::fmt::Display) -> String {
    text(&value.to_string())
}

/// Where the URL that goes on at `from` ends: whitespace, a quote, `)`, `>` or a backtick.
fn url_end(text: &str, from: usize) -> usize {
    text[from..]
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '>' | '`'))
        .map_or(text.len(), |i| from + i)
}

/// Names of flags and keys whose values are secrets.
const SECRET_WORDS: &[&str] = &[
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "pass",
    "auth",
    "credential",
    "bearer",
    "cookie",
    "session",
];

/// Prefixes of well-known token formats.
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_live_",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "eyJ",
];

fn secret_name(name: &str) -> bool {
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| name.contains(word))
}

fn looks_like_token(value: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|prefix| value.starts_with(prefix) && value.len() > prefix.len() + 8)
}

/// One argument list with its secrets replaced (see the module documentation).
pub fn args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut after_secret_flag = false;
    for arg in args {
        let redacted = if after_secret_flag && !arg.starts_with('-') {
            REDACTED.to_string()
        } else if arg.contains("://") {
            url(arg)
        } else if let Some((name, _)) = arg.split_once('=')
            && secret_name(name)
        {
            format!("{name}={REDACTED}")
        } else if looks_like_token(arg) {
            REDACTED.to_string()
        } else {
            arg.clone()
        };
        after_secret_flag = arg.starts_with('-') && !arg.contains('=') && secret_name(arg);
        out.push(redacted);
    }
    out
}

/// A short, stable tag of a session id for logs: `s-` and 8 hex digits of its SHA-256.
pub fn session_tag(id: &str) -> String {
    let digest = Sha256::digest(id.as_bytes());
    let mut tag = String::from("s-");
    for byte in &digest[..4] {
        tag.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        tag.push(char::from(b"0123456789abcdef"[usize::from(byte & 0xf)]));
    }
    tag
}

/// The first 64 bits of a caller's subject's SHA-256, in hex: quota keys and the recent-calls
/// report name a subject by it, never the subject itself.
pub fn hash_subject(subject: &str) -> String {
    let digest = Sha256::digest(subject.as_bytes());
    let mut hex = String::with_capacity(16);
    for byte in &digest[..8] {
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte & 0xf)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_their_shape_without_user_info_or_query_values() {
        assert_eq!(
            url("https://user:pass@api.example:8443/v1/mcp?api_key=SECRET123&region=eu#frag"),
            "https://user:<redacted>@api.example:8443/v1/mcp?api_key=<redacted>&region=<redacted>"
        );
        assert_eq!(url("http://127.0.0.1:9/mcp"), "http://127.0.0.1:9/mcp");
        assert_eq!(url("wss://TOKEN@ws.example/ws"), "wss://<redacted>@ws.example/ws");
        assert_eq!(url("redis://default:hunter2@cache:6379"), "redis://default:<redacted>@cache:6379");
        assert_eq!(url("http://h/p?flag"), "http://h/p?<redacted>");
        // An '@' in the path is not user-info.
        assert_eq!(url("http://h/users/@me?x=1"), "http://h/users/@me?x=<redacted>");
    }

    #[test]
    fn urls_inside_messages_are_redacted() {
        assert_eq!(
            text("error sending request for url (http://u:pw@h:1/mcp?api_key=SECRET123): refused"),
            "error sending request for url (http://u:<redacted>@h:1/mcp?api_key=<redacted>): refused"
        );
        assert_eq!(text("no url here"), "no url here");
        // Redacting twice changes nothing.
        for once in [
            text("failed (http://u:pw@h:1/mcp?api_key=S&b=T): refused"),
            text("<http://h/p?k=v> and http://x:y@z/"),
        ] {
            assert_eq!(text(&once), once);
        }
    }

    #[test]
    fn secret_looking_arguments_are_replaced() {
        let given: Vec<String> = [
            "server.py",
            "--api-key",
            "hunter2hunter2",
            "--token=abc",
            "--port",
            "8080",
            "sk-live-0123456789abcdef",
            "--endpoint",
            "https://u:p@h/x?key=v",
            "PASSWORD=x",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            args(&given),
            [
                "server.py",
                "--api-key",
                "<redacted>",
                "--token=<redacted>",
                "--port",
                "8080",
                "<redacted>",
                "--endpoint",
                "https://u:<redacted>@h/x?key=<redacted>",
                "PASSWORD=<redacted>"
            ]
        );
    }

    #[test]
    fn session_tags_are_short_stable_and_not_the_id() {
        let tag = session_tag("session-0123456789abcdef");
        assert_eq!(tag.len(), 10);
        assert_eq!(tag, session_tag("session-0123456789abcdef"));
        assert_ne!(tag, session_tag("session-0123456789abcdee"));
        assert!(!tag.contains("0123456789abcdef"));
    }
}
