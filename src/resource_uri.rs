//! One canonical form of a resource URI: every decision the gateway makes on a URI — the
//! `[resources] hide` prefixes, an endpoint's `select.resources` / `exclude_resources`,
//! `servers.NAME.resource_prefixes`, the listing and template routing, the Cedar policy's
//! `resource.uri` — compares [`CanonicalUri`]s, and the URI a server is sent is that same form.
//!
//! Why: those decisions compare text, while a server may resolve the URI first (the TypeScript
//! SDK's `McpServer` reads `new URL(uri)`: `file:///public/../private/x`,
//! `file:///public/%2e%2e/private/x`, `FILE:///private/x` and `file:///public\..\private/x`
//! all become `file:///private/x`). A prefix rule on the raw text would pass them and the
//! server would serve what the rule excludes. So a URI is normalised as RFC 3986 §6.2.2 says,
//! and what cannot be normalised without guessing how a server reads it is refused:
//!
//! - **normalised** (§6.2.2.1, §6.2.2.2, §6.2.2.3, and of §6.2.3 what WHATWG parsers do too:
//!   an empty or default port dropped, `file:/x` and `file://localhost/x` as `file:///x`):
//!   the scheme and host in lower case;
//!   percent-escapes of unreserved characters (`%41`, `%7E`, `%2E`) decoded and every other
//!   escape in upper-case hex; dot segments removed (§5.2.4) — after the decoding, so `%2e%2e`
//!   is a `..`; characters a URI cannot hold as they are (non-ASCII, space, `"<>^`{|}`)
//!   percent-encoded from their UTF-8 (RFC 3987 §3.1), so `é` and `%C3%A9` are one URI;
//! - **refused** ([`UriRefusal`]): control characters (a WHATWG parser drops tabs and line
//!   breaks, joining `.\t.` into `..`; encoded ones too in the authority and path: `%00` ends
//!   a path for a server in C), a backslash (a `/` to WHATWG for `file:` and `http:`),
//!   an encoded slash or backslash (`%2F`, `%5C`) in the authority or path (a server that
//!   decodes before splitting would see another path than the prefixes did; in a query it is
//!   an ordinary value and kept), an empty segment inside the path (`//`: many servers
//!   collapse it, and `file:////private` is `/private` to a file system), a dot segment with
//!   parameters (`..;x`, a `..` to some servers), a dot segment in a path without a leading
//!   `/` (removing it would make the path absolute), a bad escape (`%zz`), a malformed scheme,
//!   userinfo (`https://x@internal/` puts text before the host a prefix names), and anything
//!   longer than [`MAX_URI_BYTES`] before or after normalising; for the schemes a WHATWG
//!   parser treats specially (`http`, `https`, `ws`, `wss`, `ftp`, `file`) also what it would
//!   read as another URI: no `//` (`https:internal/x` is `https://internal/x` there), a host
//!   that is not ASCII (IDNA would map it) or keeps an escape, ends in a dot, is an IPv4
//!   address in another form than four decimal numbers (`0x7f.1`), an IP literal, or is empty.
//!
//! Escapes are decoded once: `%252e` stays `%252E` (a server that decodes twice is outside
//! what any prefix can describe). Operator-written prefixes must already be in this form
//! ([`check_prefix`], at load), so a prefix compared with a canonical URI is compared with
//! like.

use std::sync::Arc;

/// Longest resource URI, in bytes (a longer one is refused, and matches no template).
pub const MAX_URI_BYTES: usize = 4096;

/// A resource URI in its one canonical form (see the module doc); only [`CanonicalUri::parse`]
/// makes one, so a raw string cannot reach a decision that takes this type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CanonicalUri(Arc<str>);

/// Why a URI has no canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UriRefusal {
    #[error("the URI is empty")]
    Empty,
    #[error("the URI is longer than {MAX_URI_BYTES} bytes")]
    TooLong,
    #[error("the URI's scheme is malformed")]
    Scheme,
    #[error("the URI holds a control character")]
    ControlCharacter,
    #[error("the URI holds a backslash")]
    Backslash,
    #[error("the URI holds a malformed percent-escape")]
    BadEscape,
    #[error("the URI's authority or path holds an encoded slash or backslash (%2F, %5C)")]
    EncodedSeparator,
    #[error("the URI's host or port is malformed, or may be read as another host")]
    Host,
    #[error("the URI holds userinfo (user@host)")]
    Userinfo,
    #[error("the URI's scheme needs an authority (scheme://host/)")]
    MissingAuthority,
    #[error("the URI's path holds an empty segment (//)")]
    EmptySegment,
    #[error("the URI's path holds a dot segment with parameters (..;)")]
    DotSegmentParameters,
    #[error("the URI's path is relative and holds a dot segment")]
    RelativeDotSegment,
}

impl UriRefusal {
    /// The machine-readable reason (`error.data.reason` of a refused request).
    pub fn reason(self) -> &'static str {
        match self {
            UriRefusal::Empty => "empty",
            UriRefusal::TooLong => "too_long",
            UriRefusal::Scheme => "malformed_scheme",
            UriRefusal::ControlCharacter => "control_character",
            UriRefusal::Backslash => "backslash",
            UriRefusal::BadEscape => "malformed_escape",
            UriRefusal::EncodedSeparator => "encoded_separator",
            UriRefusal::Host => "malformed_host",
            UriRefusal::Userinfo => "userinfo",
            UriRefusal::MissingAuthority => "missing_authority",
            UriRefusal::EmptySegment => "empty_segment",
            UriRefusal::DotSegmentParameters => "dot_segment_parameters",
            UriRefusal::RelativeDotSegment => "relative_dot_segment",
        }
    }
}

impl CanonicalUri {
    /// The canonical form of `raw`, or why it has none.
    pub fn parse(raw: &str) -> Result<Self, UriRefusal> {
        canonical(raw).map(|text| Self(text.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the URI starts with `prefix` (an operator's prefix, canonical: [`check_prefix`]).
    pub fn is_under(&self, prefix: &str) -> bool {
        self.0.starts_with(prefix)
    }
}

impl std::fmt::Display for CanonicalUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks an operator's URI prefix: it must be in canonical form, or it would never match
/// (or match other than meant); the error names the form to write.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    match canonical(prefix) {
        Ok(form) if form == prefix => Ok(()),
        Ok(form) => Err(format!(
            "{prefix:?} is not in the canonical form resource URIs are compared in: write {form:?}"
        )),
        Err(refusal) => Err(format!("{prefix:?} is refused as a resource URI: {refusal}")),
    }
}

/// The canonical text of `raw` (see the module doc).
fn canonical(raw: &str) -> Result<String, UriRefusal> {
    if raw.is_empty() {
        return Err(UriRefusal::Empty);
    }
    if raw.len() > MAX_URI_BYTES {
        return Err(UriRefusal::TooLong);
    }
    // RFC 3986 Appendix B: scheme, authority, path, query, fragment.
    let (scheme, rest) = match raw.find([':', '/', '?', '#']) {
        Some(i) if raw.as_bytes()[i] == b':' => (Some(&raw[..i]), &raw[i + 1..]),
        _ => (None, raw),
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (rest, None),
    };
    let (hierarchy, query) = match before_fragment.split_once('?') {
        Some((hierarchy, query)) => (hierarchy, Some(query)),
        None => (before_fragment, None),
    };
    let (authority, path) = match hierarchy.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, hierarchy),
    };

    let mut out = String::with_capacity(raw.len());
    let scheme = match scheme {
        Some(scheme) => {
            let mut chars = scheme.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !valid {
                return Err(UriRefusal::Scheme);
            }
            let scheme = scheme.to_ascii_lowercase();
            out.push_str(&scheme);
            out.push(':');
            Some(scheme)
        }
        None => None,
    };
    let special = scheme.as_deref().and_then(Special::of);
    // A WHATWG parser reads `http:/x` and `http:x` as `http://x`, and `file:/x` as `file:///x`.
    let authority = match (authority, special) {
        (None, Some(Special::File)) if path.starts_with('/') => Some(""),
        (None, Some(_)) if !(path.is_empty() && query.is_none() && fragment.is_none()) => {
            return Err(UriRefusal::MissingAuthority);
        }
        (authority, _) => authority,
    };
    if let Some(authority) = authority {
        out.push_str("//");
        authority_form(authority, special, &mut out)?;
    }
    let mut normal_path = String::with_capacity(path.len());
    escapes(path, Part::Path, &mut normal_path)?;
    out.push_str(&dot_free(&normal_path)?);
    if let Some(query) = query {
        out.push('?');
        escapes(query, Part::Other, &mut out)?;
    }
    if let Some(fragment) = fragment {
        out.push('#');
        escapes(fragment, Part::Other, &mut out)?;
    }
    if out.len() > MAX_URI_BYTES {
        return Err(UriRefusal::TooLong);
    }
    Ok(out)
}

/// The schemes a WHATWG parser treats specially (their host parsed, `\\` a `/`), and their
/// default ports (RFC 3986 §6.2.3: a default port is dropped).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Special {
    File,
    Network(u16),
}

impl Special {
    fn of(scheme: &str) -> Option<Self> {
        match scheme {
            "file" => Some(Special::File),
            "http" | "ws" => Some(Special::Network(80)),
            "https" | "wss" => Some(Special::Network(443)),
            "ftp" => Some(Special::Network(21)),
            _ => None,
        }
    }
}

/// Appends the canonical authority (`host[:port]`): no userinfo (`user@host/` would put text
/// before the host that a prefix naming the host cannot see), the host as [`escapes`] leaves
/// it, an empty or default port dropped. For a special scheme, what a WHATWG parser would
/// read as another host is refused: an escape left in the host, a trailing dot, an IPv4
/// address in any other form than four decimal numbers (`0x7f.1`, `2130706433`), an IP
/// literal, an empty host (`http:///x`); `file://localhost/` is `file:///`.
fn authority_form(authority: &str, special: Option<Special>, out: &mut String) -> Result<(), UriRefusal> {
    if authority.contains('@') {
        return Err(UriRefusal::Userinfo);
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(_) if special.is_some() => return Err(UriRefusal::Host),
        Some(_) => match authority.find(']') {
            Some(end) => (&authority[..=end], &authority[end + 1..]),
            None => return Err(UriRefusal::Host),
        },
        None => match authority.rfind(':') {
            Some(colon) => (&authority[..colon], &authority[colon..]),
            None => (authority, ""),
        },
    };
    let port = match port.strip_prefix(':') {
        None if port.is_empty() => None,
        Some("") => None,
        Some(digits) if digits.bytes().all(|b| b.is_ascii_digit()) => {
            Some(digits.parse::<u16>().map_err(|_| UriRefusal::Host)?)
        }
        _ => return Err(UriRefusal::Host),
    };
    let mut canonical_host = String::with_capacity(host.len());
    escapes(host, Part::Host, &mut canonical_host)?;
    let port = match special {
        None => port,
        Some(Special::File) => {
            if canonical_host == "localhost" {
                canonical_host.clear();
            }
            if port.is_some() {
                return Err(UriRefusal::Host);
            }
            None
        }
        Some(Special::Network(default)) => {
            if canonical_host.is_empty() {
                return Err(UriRefusal::Host);
            }
            port.filter(|p| *p != default)
        }
    };
    if special.is_some()
        && (canonical_host.contains('%') || canonical_host.ends_with('.') || odd_ipv4(&canonical_host))
    {
        return Err(UriRefusal::Host);
    }
    out.push_str(&canonical_host);
    if let Some(port) = port {
        out.push(':');
        out.push_str(&port.to_string());
    }
    Ok(())
}

/// Whether a WHATWG parser would read `host` as an IPv4 address (its last label a number)
/// written in another form than four decimal numbers without leading zeros.
fn odd_ipv4(host: &str) -> bool {
    let Some(last) = host.rsplit('.').next() else { return false };
    let numeric = |label: &str| {
        !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit())
            || label.strip_prefix("0x").is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if !numeric(last) {
        return false;
    }
    let labels: Vec<&str> = host.split('.').collect();
    let canonical = labels.len() == 4
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_digit())
                && (l.len() == 1 || !l.starts_with('0'))
                && l.parse::<u8>().is_ok()
        });
    !canonical
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Case-insensitive: letters in lower case, decoded ones too.
    Host,
    Path,
    Other,
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Appends `text` with its escapes normalised: unreserved ones decoded, the rest in upper-case
/// hex, and what a URI cannot hold as it is encoded (refused in an authority); a host's
/// letters in lower case.
fn escapes(text: &str, part: Part, out: &mut String) -> Result<(), UriRefusal> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let push_escape = |out: &mut String, b: u8| {
        out.push('%');
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xF)] as char);
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'%' => {
                let hex = |at: usize| bytes.get(at).and_then(|d| (*d as char).to_digit(16));
                let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(UriRefusal::BadEscape);
                };
                let decoded = (high * 16 + low) as u8;
                if unreserved(decoded) {
                    out.push(if part == Part::Host { decoded.to_ascii_lowercase() } else { decoded } as char);
                } else if part != Part::Other && matches!(decoded, b'/' | b'\\') {
                    return Err(UriRefusal::EncodedSeparator);
                } else if part != Part::Other && (decoded < 0x20 || decoded == 0x7F) {
                    // A server in C stops at `%00`: the path it reads is not the one decided on.
                    return Err(UriRefusal::ControlCharacter);
                } else {
                    push_escape(out, decoded);
                }
                i += 3;
                continue;
            }
            0x00..=0x1F | 0x7F => return Err(UriRefusal::ControlCharacter),
            b'\\' => return Err(UriRefusal::Backslash),
            0x80.. | b' ' | b'"' | b'<' | b'>' | b'^' | b'`' | b'{' | b'|' | b'}' => {
                if part == Part::Host {
                    return Err(UriRefusal::Host);
                }
                push_escape(out, b);
            }
            _ if part == Part::Host => out.push(b.to_ascii_lowercase() as char),
            _ => out.push(b as char),
        }
        i += 1;
    }
    Ok(())
}

/// `path` (escapes normalised) without dot segments, or why that cannot be done safely.
fn dot_free(path: &str) -> Result<String, UriRefusal> {
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, segment) in segments.iter().enumerate() {
        // The first is what precedes a leading '/', the last may end the path with a '/'.
        if segment.is_empty() && i != 0 && i != last {
            return Err(UriRefusal::EmptySegment);
        }
        if matches!(segment.split(';').next(), Some("." | "..")) && segment.contains(';') {
            return Err(UriRefusal::DotSegmentParameters);
        }
    }
    let dotted = segments.iter().any(|s| matches!(*s, "." | ".."));
    if !dotted {
        return Ok(path.to_string());
    }
    if !path.starts_with('/') {
        return Err(UriRefusal::RelativeDotSegment);
    }
    Ok(remove_dot_segments(path))
}

/// RFC 3986 §5.2.4, as written.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut output = String::with_capacity(path.len());
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") || input == "/.." {
            input = if input == "/.." { "/" } else { &input[3..] };
            let cut = output.rfind('/').unwrap_or(0);
            output.truncate(cut);
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            output.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(raw: &str) -> Result<String, UriRefusal> {
        CanonicalUri::parse(raw).map(|u| u.as_str().to_string())
    }

    #[test]
    fn mcp_apps_ui_uris_keep_their_form() {
        // What MCP Apps servers list (the ext-apps examples, the Python SDK's `Apps`): canonical
        // already, so the URI a tool's `_meta.ui.resourceUri` names is the one listed and read.
        for uri in ["ui://get-time/mcp-app.html", "ui://budget-allocator/mcp-app.html", "ui://clock/app.html"]
        {
            assert_eq!(form(uri).as_deref(), Ok(uri));
        }
        // Not a special scheme: no `//` needed, the host's case folded, dot segments removed.
        assert_eq!(form("UI://Clock/./app.html").as_deref(), Ok("ui://clock/app.html"));
        assert_eq!(form("ui://clock/a/../app.html").as_deref(), Ok("ui://clock/app.html"));
        assert_eq!(form("ui://clock/%2e%2e/x"), form("ui://clock/../x"));
        assert_eq!(form("ui://clock/a%2Fb"), Err(UriRefusal::EncodedSeparator));
    }

    #[test]
    fn rfc_3986_dot_segment_removal_examples() {
        // §5.2.4's two walk-throughs and §5.4's results (the path part of each).
        assert_eq!(remove_dot_segments("/a/b/c/./../../g"), "/a/g");
        assert_eq!(remove_dot_segments("mid/content=5/../6"), "mid/6");
        for (path, expected) in [
            ("/b/c/g", "/b/c/g"),
            ("/b/c/./g", "/b/c/g"),
            ("/b/c/g/", "/b/c/g/"),
            ("/b/c/.", "/b/c/"),
            ("/b/c/./", "/b/c/"),
            ("/b/c/..", "/b/"),
            ("/b/c/../", "/b/"),
            ("/b/c/../g", "/b/g"),
            ("/b/c/../..", "/"),
            ("/b/c/../../", "/"),
            ("/b/c/../../g", "/g"),
            ("/b/c/../../../g", "/g"),
            ("/b/c/../../../../g", "/g"),
            ("/./g", "/g"),
            ("/../g", "/g"),
            ("/b/c/g.", "/b/c/g."),
            ("/b/c/.g", "/b/c/.g"),
            ("/b/c/g..", "/b/c/g.."),
            ("/b/c/..g", "/b/c/..g"),
            ("/b/c/./../g", "/b/g"),
            ("/b/c/./g/.", "/b/c/g/"),
            ("/b/c/g/./h", "/b/c/g/h"),
            ("/b/c/g/../h", "/b/c/h"),
        ] {
            assert_eq!(remove_dot_segments(path), expected, "{path}");
        }
    }

    #[test]
    fn dot_segments_literal_or_encoded_are_resolved_before_any_prefix_sees_the_uri() {
        for raw in [
            "file:///public/../private/x",
            "file:///./private/x",
            "file:///public/%2e%2e/private/x",
            "file:///public/%2E%2E/private/x",
            "file:///public/.%2e/private/x",
            "file:///%2e/private/x",
            "file:///public/sub/../../private/x",
            "file:///../private/x",
            "FILE:///private/x",
            "file:///%70rivate/x",
            "file:///priv%61te/x",
        ] {
            assert_eq!(form(raw).as_deref(), Ok("file:///private/x"), "{raw}");
        }
        assert_eq!(form("file:///public/readme").as_deref(), Ok("file:///public/readme"));
    }

    #[test]
    fn rfc_3986_case_and_percent_encoding_normalisation() {
        // §6.2.2's example.
        assert_eq!(form("eXAMPLE://a/./b/../b/%63/%7bfoo%7d").as_deref(), Ok("example://a/b/c/%7Bfoo%7D"));
        // §6.2.2.1: scheme and host case-insensitive, escapes' hex upper case; path case kept.
        assert_eq!(
            form("HTTP://www.Example.COM/Path/%3a%c3%a9").as_deref(),
            Ok("http://www.example.com/Path/%3A%C3%A9")
        );
        // §6.2.2.2: encoded unreserved characters decoded; reserved ones stay encoded.
        assert_eq!(form("manga://catalog/%7Euser/%41%2D%5F%2e").as_deref(), Ok("manga://catalog/~user/A-_."));
        assert_eq!(form("manga://catalog/a%3Bb%3f").as_deref(), Ok("manga://catalog/a%3Bb%3F"));
        // Non-ASCII and what a URI cannot hold as it is: one encoded form (RFC 3987 §3.1).
        assert_eq!(form("file:///café/a b").as_deref(), Ok("file:///caf%C3%A9/a%20b"));
        assert_eq!(form("file:///caf%c3%a9/a%20b").as_deref(), Ok("file:///caf%C3%A9/a%20b"));
        // Queries and fragments: escapes normalised, no structure assumed; %2F kept there.
        assert_eq!(form("db://x/t?q=a%2fb&p=../c#%7e").as_deref(), Ok("db://x/t?q=a%2Fb&p=../c#~"));
        assert_eq!(
            form("db://x/t?q=a%0Ab").as_deref(),
            Ok("db://x/t?q=a%0Ab"),
            "an encoded line break is query data"
        );
        // A port stays, unless empty or the scheme's default (§6.2.3).
        assert_eq!(form("s://Host:8080/p").as_deref(), Ok("s://host:8080/p"));
        assert_eq!(form("s://host:/p").as_deref(), Ok("s://host/p"));
        assert_eq!(form("https://Internal.example:443/x").as_deref(), Ok("https://internal.example/x"));
        assert_eq!(form("http://h:0080/x").as_deref(), Ok("http://h/x"));
        assert_eq!(form("http://10.0.0.1:8080/x").as_deref(), Ok("http://10.0.0.1:8080/x"));
        // file: as RFC 8089 and WHATWG agree: `file:/p` and `file://localhost/p` are `file:///p`.
        assert_eq!(form("file:/private/x").as_deref(), Ok("file:///private/x"));
        assert_eq!(form("file://LocalHost/private/x").as_deref(), Ok("file:///private/x"));
        // A bare scheme (a prefix covering all of it).
        assert_eq!(form("HTTPS:").as_deref(), Ok("https:"));
        assert_eq!(
            form("manga://%43AT%2dx/a").as_deref(),
            Ok("manga://cat-x/a"),
            "a decoded host letter too"
        );
        // Already canonical URIs are unchanged.
        for uri in [
            "test://static-text",
            "demo://resource/dynamic/text/9",
            "watch://a",
            "urn:isbn:0451450523",
            "file:///dir/",
        ] {
            assert_eq!(form(uri).as_deref(), Ok(uri));
        }
    }

    #[test]
    fn what_cannot_be_normalised_without_guessing_is_refused() {
        for (raw, why) in [
            ("", UriRefusal::Empty),
            ("file:///public/%2F..%2Fprivate/x", UriRefusal::EncodedSeparator),
            ("file:///public%2f..%2fprivate", UriRefusal::EncodedSeparator),
            ("file:///public/%5C../private", UriRefusal::EncodedSeparator),
            ("file:///public\\..\\private/x", UriRefusal::Backslash),
            ("file:///public/.\t./private/x", UriRefusal::ControlCharacter),
            ("file:///public/x\n", UriRefusal::ControlCharacter),
            ("file:///public/readme%00.txt", UriRefusal::ControlCharacter),
            ("file:///public/a%0a", UriRefusal::ControlCharacter),
            ("file:////private/x", UriRefusal::EmptySegment),
            ("file:///public//../private/x", UriRefusal::EmptySegment),
            ("file:///public/..;x/private", UriRefusal::DotSegmentParameters),
            ("file:///public/%2E%2E;/private", UriRefusal::DotSegmentParameters),
            ("urn:a/../b", UriRefusal::RelativeDotSegment),
            ("file:///a%zz", UriRefusal::BadEscape),
            ("file:///a%4", UriRefusal::BadEscape),
            ("1abc:x", UriRefusal::Scheme),
            ("https://exämple.com/x", UriRefusal::Host),
            ("https://user@internal.example/x", UriRefusal::Userinfo),
            ("s://User@Host/p", UriRefusal::Userinfo),
            ("https:internal.example/x", UriRefusal::MissingAuthority),
            ("http:/internal.example/x", UriRefusal::MissingAuthority),
            ("file:private/x", UriRefusal::MissingAuthority),
            ("http:///internal.example/x", UriRefusal::Host),
            ("http://0x7f.1/x", UriRefusal::Host),
            ("http://2130706433/x", UriRefusal::Host),
            ("http://127.000.0.1/x", UriRefusal::Host),
            ("http://internal.example./x", UriRefusal::Host),
            ("http://inter%C3%A4l.example/x", UriRefusal::Host),
            ("http://[::1]/x", UriRefusal::Host),
            ("file://host:21/x", UriRefusal::Host),
            ("s://host:99999/x", UriRefusal::Host),
            ("s://host:8a/x", UriRefusal::Host),
            ("https://ex%2Fample.com/x", UriRefusal::EncodedSeparator),
        ] {
            assert_eq!(form(raw), Err(why), "{raw:?}");
        }
        let long = format!("file:///{}", "a".repeat(MAX_URI_BYTES));
        assert_eq!(form(&long), Err(UriRefusal::TooLong));
        let grows = format!("file:///{}", "é".repeat(MAX_URI_BYTES / 3));
        assert_eq!(form(&grows), Err(UriRefusal::TooLong), "bounded after encoding too");
    }

    #[test]
    fn an_operator_prefix_must_be_canonical() {
        assert!(check_prefix("file:///private/").is_ok());
        assert!(check_prefix("manga://internal").is_ok());
        let error = check_prefix("FILE:///Private/./x/").unwrap_err();
        assert!(error.contains("write \"file:///Private/x/\""), "{error}");
        assert!(check_prefix("file:///a\\b").unwrap_err().contains("backslash"));
    }
}
