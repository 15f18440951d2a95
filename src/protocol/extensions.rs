//! MCP extensions (SEP-2133) on the wire: which ones the gateway carries, what a caller may
//! declare, and the MCP Apps extension's own reading of tools (SEP-1865).
//!
//! One rule for every extension, in one place ([`CARRIED`]):
//! - **Caller → servers.** What a caller declares in `capabilities.extensions` (its
//!   `initialize`, or a 2026-07-28 request's `_meta` client capabilities) reaches the servers
//!   that serve it as it was written, known to the gateway or not: an extension is the
//!   caller's statement about itself, and a server must degrade gracefully for a client that
//!   lacks one (SEP-2133), so the gateway neither invents one nor drops one. It is bounded like
//!   any caller input ([`check_declared`]): at most [`MAX_DECLARED`] extensions, each
//!   identifier of the SEP's `vendor-prefix/name` grammar and at most [`MAX_IDENTIFIER_CHARS`]
//!   characters, all their settings at most [`MAX_DECLARED_BYTES`] bytes of JSON; anything
//!   else is refused (`-32602`), never cut.
//! - **Servers → caller.** The gateway declares an extension to a caller only when it carries
//!   it (it is in [`CARRIED`]: the gateway knows what the extension adds to the wire and
//!   passes it through correctly) and a server behind the caller's endpoint offers it
//!   ([`Carried`], read from the server's handshake). A server's extension the gateway does not
//!   carry is not declared: what it adds (methods, result types) would not pass the gateway.

use serde_json::{Map, Value};

/// The MCP Apps extension (SEP-1865).
pub const APPS: &str = "io.modelcontextprotocol/ui";
/// The Skills extension (SEP-2640): `skills/list`, `skills/get`, `skill://` resources.
pub const SKILLS: &str = "io.modelcontextprotocol/skills";
/// The MIME type of an MCP App's HTML (`ui://` resources).
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The extensions the gateway carries, each declared to a caller by one rule (above). Adding
/// one here is the whole of declaring it; what it needs on the wire is its own module's.
pub const CARRIED: [&str; 3] = [super::tasks::EXTENSION, APPS, SKILLS];

/// Most extensions a caller may declare.
pub const MAX_DECLARED: usize = 32;
/// Most bytes of JSON the declared extensions (identifiers and settings) may take.
pub const MAX_DECLARED_BYTES: usize = 8 * 1024;
/// Longest extension identifier.
pub const MAX_IDENTIFIER_CHARS: usize = 128;

/// The carried extensions a server offers (a bit per entry of [`CARRIED`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carried(u8);

impl Carried {
    /// The carried extensions a server's `capabilities` (of its `initialize` or
    /// `server/discover` result) name in `extensions`.
    pub fn offered_in(capabilities: Option<&Value>) -> Self {
        let Some(extensions) = capabilities.and_then(|c| c.get("extensions")).and_then(Value::as_object)
        else {
            return Self::default();
        };
        let mut bits = 0u8;
        for (i, id) in CARRIED.iter().enumerate() {
            if extensions.get(*id).is_some_and(|v| !v.is_null()) {
                bits |= 1 << i;
            }
        }
        Self(bits)
    }

    pub fn has(self, id: &str) -> bool {
        CARRIED.iter().position(|c| *c == id).is_some_and(|i| self.0 & (1 << i) != 0)
    }

    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Why a caller's declared extensions were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    NotAnObject,
    TooMany { declared: usize },
    TooLarge { bytes: usize },
    BadIdentifier(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotAnObject => write!(f, "capabilities.extensions must be an object"),
            Refused::TooMany { declared } => {
                write!(f, "capabilities.extensions declares {declared} extensions; at most {MAX_DECLARED}")
            }
            Refused::TooLarge { bytes } => {
                write!(f, "capabilities.extensions takes {bytes} bytes of JSON; at most {MAX_DECLARED_BYTES}")
            }
            Refused::BadIdentifier(id) => write!(
                f,
                "capabilities.extensions names {id:?}, not an extension identifier (vendor-prefix/name, at most {MAX_IDENTIFIER_CHARS} characters)"
            ),
        }
    }
}

impl Refused {
    /// `error.data.limit.key` of the refusal, when a bound was passed.
    pub fn limit(&self) -> Option<(&'static str, u64)> {
        match self {
            Refused::TooMany { .. } => Some(("extensions.max_declared", MAX_DECLARED as u64)),
            Refused::TooLarge { .. } => Some(("extensions.max_declared_bytes", MAX_DECLARED_BYTES as u64)),
            _ => None,
        }
    }
}

/// Checks what a caller's `capabilities` declare in `extensions` (absent or `null`: nothing).
pub fn check_declared(capabilities: Option<&Value>) -> Result<Option<&Map<String, Value>>, Refused> {
    let declared = match capabilities.and_then(|c| c.get("extensions")) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(declared)) => declared,
        Some(_) => return Err(Refused::NotAnObject),
    };
    if declared.len() > MAX_DECLARED {
        return Err(Refused::TooMany { declared: declared.len() });
    }
    if let Some(bad) = declared.keys().find(|id| !valid_identifier(id)) {
        let shown: String = bad.chars().take(MAX_IDENTIFIER_CHARS).collect();
        return Err(Refused::BadIdentifier(shown));
    }
    let bytes = serde_json::to_vec(declared).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_DECLARED_BYTES {
        return Err(Refused::TooLarge { bytes });
    }
    Ok(Some(declared))
}

/// SEP-2133's identifier grammar: dot-separated labels (a letter first, a letter or digit
/// last, hyphens inside), `/`, then a name (alphanumeric at both ends, `.`, `_`, `-` inside).
pub fn valid_identifier(id: &str) -> bool {
    if id.is_empty() || id.chars().count() > MAX_IDENTIFIER_CHARS {
        return false;
    }
    let Some((prefix, name)) = id.split_once('/') else { return false };
    let label = |l: &str| {
        let bytes = l.as_bytes();
        !bytes.is_empty()
            && bytes[0].is_ascii_alphabetic()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
    };
    let name_ok = {
        let bytes = name.as_bytes();
        !bytes.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    prefix.split('.').all(label) && name_ok
}

/// Whether a caller's `capabilities` negotiate MCP Apps: the extension declared with
/// `mimeTypes` naming [`APP_MIME_TYPE`] (what a host that renders apps declares, and what the
/// official SDKs' servers check before answering as to an Apps host).
pub fn negotiates_apps(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(APPS))
        .and_then(|s| s.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|types| types.iter().any(|t| t.as_str() == Some(APP_MIME_TYPE)))
}

/// Whether a tool is for an app only (`_meta.ui.visibility` without `"model"`): listed only to
/// callers that negotiated MCP Apps, whose host keeps it from the model, and never to anyone
/// else, `search_tools` or the model-API exports. A tool without `visibility` is for both.
pub fn app_only(definition: &Value) -> bool {
    match definition.get("_meta").and_then(|m| m.get("ui")).and_then(|ui| ui.get("visibility")) {
        Some(Value::Array(visibility)) => !visibility.iter().any(|v| v.as_str() == Some("model")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn identifiers_follow_the_sep_grammar() {
        for good in ["io.modelcontextprotocol/ui", "com.example/x", "a/b", "a-1.b2/n_a.m-e"] {
            assert!(valid_identifier(good), "{good}");
        }
        for bad in ["ui", "/ui", "io./ui", "1io/ui", "io-/ui", "io/ui-", "io/", "io/a b", "io/ü"] {
            assert!(!valid_identifier(bad), "{bad}");
        }
        assert!(!valid_identifier(&format!("io/{}", "a".repeat(200))));
    }

    #[test]
    fn declared_extensions_are_bounded_and_checked_never_cut() {
        assert_eq!(check_declared(None), Ok(None));
        assert_eq!(check_declared(Some(&json!({"extensions": null}))), Ok(None));
        assert_eq!(check_declared(Some(&json!({"extensions": []}))), Err(Refused::NotAnObject));
        let unknown = json!({"extensions": {"com.example/unknown": {"x": 1}}});
        assert!(check_declared(Some(&unknown)).is_ok_and(|d| d.is_some_and(|d| d.len() == 1)));
        let many: Map<String, Value> =
            (0..=MAX_DECLARED).map(|i| (format!("com.example/e{i}"), json!({}))).collect();
        assert_eq!(
            check_declared(Some(&json!({"extensions": many}))),
            Err(Refused::TooMany { declared: MAX_DECLARED + 1 })
        );
        let large = json!({"extensions": {"com.example/big": {"s": "x".repeat(MAX_DECLARED_BYTES)}}});
        assert!(matches!(check_declared(Some(&large)), Err(Refused::TooLarge { .. })));
        let bad = json!({"extensions": {"not an id": {}}});
        assert!(matches!(check_declared(Some(&bad)), Err(Refused::BadIdentifier(_))));
    }

    #[test]
    fn apps_is_negotiated_with_its_mime_type_and_app_only_tools_lack_the_model() {
        let host = json!({"extensions": {APPS: {"mimeTypes": [APP_MIME_TYPE]}}});
        assert!(negotiates_apps(Some(&host)));
        assert!(!negotiates_apps(Some(&json!({"extensions": {APPS: {}}}))));
        assert!(!negotiates_apps(None));
        assert!(app_only(&json!({"_meta": {"ui": {"resourceUri": "ui://a/b", "visibility": ["app"]}}})));
        assert!(app_only(&json!({"_meta": {"ui": {"visibility": []}}})));
        assert!(!app_only(&json!({"_meta": {"ui": {"visibility": ["model", "app"]}}})));
        assert!(!app_only(&json!({"_meta": {"ui": {"resourceUri": "ui://a/b"}}})));
        assert!(!app_only(&json!({"name": "t"})));
    }

    #[test]
    fn a_server_offers_only_what_the_gateway_carries_by_this_list() {
        let caps = json!({"extensions": {APPS: {}, "com.example/other": {}}});
        let offered = Carried::offered_in(Some(&caps));
        assert!(offered.has(APPS));
        assert!(!offered.has("com.example/other") && !offered.has(super::super::tasks::EXTENSION));
        assert_eq!(Carried::offered_in(Some(&json!({}))), Carried::default());
    }
}
