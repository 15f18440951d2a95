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
//! - **normalised** (§6.2.2.1, §6.2.2.2, §6.2.2.3): the scheme and host in lower case;
//!   percent-escapes of unreserved characters (`%41`, `%7E`, `%2E`) decoded and every other
//!   escape in upper-case hex; dot segments removed (§5.2.4) — after the decoding, so `%2e%2e`
//!   is a `..`; characters a URI cannot hold as they are (non-ASCII, space, `"<>^`{|}`)
//!   percent-encoded from their UTF-8 (RFC 3987 §3.1), so `é` and `%C3%A9` are one URI;
//! - **refused** ([`UriRefusal`]): control characters (a WHATWG parser drops tabs and line
//!   breaks, joining `.\t.` into `..`), a backslash (a `/` to WHATWG for `file:` and `http:`),
//!   an encoded slash or backslash (`%2F`, `%5C`) in the authority or path (a server that
//!   decodes before splitting would see another path than the prefixes did; in a query it is
//!   an ordinary value and kept), an empty segment inside the path (`//`: many servers
//!   collapse it, and `file:////private` is `/private` to a file system), a dot segment with
//!   parameters (`..;x`, a `..` to some servers), a dot segment in a path without a leading
//!   `/` (removing it would make the path absolute), a bad escape (`%zz`), a malformed scheme,
//!   a host that is not ASCII (IDNA would map it), and anything longer than
//!   [`MAX_URI_BYTES`] before or after normalising.
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
    #[error("the URI's host is not ASCII or holds a character a host cannot")]
    Host,
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
    if let Some(scheme) = scheme {
        let mut chars = scheme.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid {
            return Err(UriRefusal::Scheme);
        }
        out.push_str(&scheme.to_ascii_lowercase());
        out.push(':');
    }
    if let Some(authority) = authority {
        out.push_str("//");
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((userinfo, host)) => (Some(userinfo), host),
            None => (None, authority),
        };
        if let Some(userinfo) = userinfo {
            escapes(userinfo, Part::Userinfo, &mut out)?;
            out.push('@');
        }
        escapes(host, Part::Host, &mut out)?;
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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Userinfo,
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
                } else {
                    push_escape(out, decoded);
                }
                i += 3;
                continue;
            }
            0x00..=0x1F | 0x7F => return Err(UriRefusal::ControlCharacter),
            b'\\' => return Err(UriRefusal::Backslash),
            0x80.. | b' ' | b'"' | b'<' | b'>' | b'^' | b'`' | b'{' | b'|' | b'}' => {
                if matches!(part, Part::Userinfo | Part::Host) {
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
        // Userinfo keeps its case; a port stays.
        assert_eq!(form("s://User@Host:8080/p").as_deref(), Ok("s://User@host:8080/p"));
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
            ("file:////private/x", UriRefusal::EmptySegment),
            ("file:///public//../private/x", UriRefusal::EmptySegment),
            ("file:///public/..;x/private", UriRefusal::DotSegmentParameters),
            ("file:///public/%2E%2E;/private", UriRefusal::DotSegmentParameters),
            ("urn:a/../b", UriRefusal::RelativeDotSegment),
            ("file:///a%zz", UriRefusal::BadEscape),
            ("file:///a%4", UriRefusal::BadEscape),
            ("1abc:x", UriRefusal::Scheme),
            ("https://exämple.com/x", UriRefusal::Host),
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
