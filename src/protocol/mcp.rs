//! The two MCP protocol eras, on both sides of the gateway.
//!
//! - **Legacy** (2024-11-05 … 2025-11-25): `initialize` → `notifications/initialized`, an
//!   optional `Mcp-Session-Id`, the version negotiated once.
//! - **Modern** (2026-07-28): stateless; every request carries its protocol version and the
//!   client's capabilities in `_meta`, plus `Mcp-Method` / `Mcp-Name` routing headers;
//!   `server/discover` replaces the handshake; results carry `resultType`.
//!
//! This module holds the constants and the pure functions that build and read both shapes;
//! transports and the inbound server decide when to use which.

use serde_json::{Map, Value, json};

/// The stateless revision.
pub const MODERN_VERSION: &str = "2026-07-28";
/// Session-era revisions, newest first.
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The newest session-era revision (what `initialize` answers when asked for something else).
pub const LATEST_LEGACY_VERSION: &str = LEGACY_VERSIONS[0];

/// `_meta` key carrying the protocol version of a modern request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key carrying the client's capabilities on a modern request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key carrying the client's name and version on a modern request.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `_meta` entries that describe the client: a modern caller's own reach a modern server
/// (see `protocol::mrtr`); a session-era server is never written them.
pub const CLIENT_META: [&str; 2] = [META_CLIENT_CAPABILITIES, META_CLIENT_INFO];
/// Prefix of every `_meta` key the protocol reserves.
pub const META_RESERVED_PREFIX: &str = "io.modelcontextprotocol/";

/// HTTP headers of streamable HTTP.
pub mod headers {
    pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
    pub const SESSION_ID: &str = "mcp-session-id";
    pub const METHOD: &str = "mcp-method";
    pub const NAME: &str = "mcp-name";
    pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

    /// The same names parsed once: a lookup by `&str` parses the name on every request.
    pub mod names {
        use http::HeaderName;

        pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(super::PROTOCOL_VERSION);
        pub const SESSION_ID: HeaderName = HeaderName::from_static(super::SESSION_ID);
        pub const METHOD: HeaderName = HeaderName::from_static(super::METHOD);
        pub const NAME: HeaderName = HeaderName::from_static(super::NAME);
    }
}

/// Which era a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

/// Every version the gateway speaks, newest first.
pub fn supported_versions() -> Vec<&'static str> {
    std::iter::once(MODERN_VERSION).chain(LEGACY_VERSIONS).collect()
}

pub fn is_supported(version: &str) -> bool {
    version == MODERN_VERSION || LEGACY_VERSIONS.contains(&version)
}

/// The protocol version a request's `_meta` declares (modern era), if any.
pub fn meta_version(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// The version `initialize` answers: the client's if it is a session-era version we speak,
/// else our newest session-era version (the client then decides whether to continue).
pub fn negotiate_legacy(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| LEGACY_VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(LATEST_LEGACY_VERSION)
}

/// The `initialize` result of a server that offers tools.
pub fn initialize_result(
    requested: Option<&str>,
    name: &str,
    version: &str,
    instructions: Option<&str>,
) -> Value {
    let mut result = json!({
        "protocolVersion": negotiate_legacy(requested),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": name, "version": version},
    });
    if let Some(text) = instructions {
        result["instructions"] = json!(text);
    }
    result
}

/// `_meta` key of the server's name and version on modern results.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The `server/discover` result of a server that offers tools (a cacheable result).
pub fn discover_result(name: &str, version: &str, instructions: Option<&str>, ttl_ms: u64) -> Value {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": supported_versions(),
        "capabilities": {"tools": {"listChanged": false}},
        "ttlMs": ttl_ms,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: {"name": name, "version": version}},
    });
    if let Some(text) = instructions {
        result["instructions"] = json!(text);
    }
    result
}

/// Whether a request is in the modern era (its `_meta` names the modern version).
pub fn is_modern(params: Option<&Value>) -> bool {
    meta_version(params) == Some(MODERN_VERSION)
}

/// The first revision whose callers get input-validation failures as tool execution errors
/// (SEP-1303): a result with `isError: true` the model reads, not a JSON-RPC error.
pub const TOOL_EXECUTION_ERRORS_SINCE: &str = "2025-11-25";

/// Whether a caller speaks [`TOOL_EXECUTION_ERRORS_SINCE`] or later: a modern request, or a
/// session-era one whose `MCP-Protocol-Version` header names such a revision. A caller that
/// sends neither is taken for 2025-03-26, as the specification says of a missing header.
pub fn takes_tool_execution_errors(header_version: Option<&str>, modern: bool) -> bool {
    // Revisions are dates: their order is the strings' order.
    modern || header_version.is_some_and(|v| is_supported(v) && v >= TOOL_EXECUTION_ERRORS_SINCE)
}

/// A modern-era result must carry `resultType`; results passed through from a session-era
/// upstream lack it. Adds `"resultType":"complete"` to a raw JSON object without re-parsing it.
pub fn with_result_type(raw: Box<serde_json::value::RawValue>) -> Box<serde_json::value::RawValue> {
    let text = raw.get();
    let Some(body) = text.trim_start().strip_prefix('{') else {
        return raw;
    };
    if text.contains("\"resultType\"") {
        return raw;
    }
    let separator = if body.trim_start().starts_with('}') { "" } else { "," };
    let spliced = format!("{{\"resultType\":\"complete\"{separator}{body}");
    serde_json::value::RawValue::from_string(spliced).unwrap_or(raw)
}

/// The cache hints modern list results must carry (`resultType`, `ttlMs`, `cacheScope`) as
/// the leading fields of a serialised result (each followed by a comma): written before a
/// `tools/list` page's shared bytes, so the list is neither copied nor scanned.
pub fn cache_fields(ttl_ms: u64) -> String {
    format!(r#""resultType":"complete","ttlMs":{ttl_ms},"cacheScope":"public","#)
}

/// [`cache_fields`] for a list that is this caller's own (an MCP Apps host's `tools/list`,
/// which holds tools no other caller is listed): `cacheScope: "private"`.
pub fn private_cache_fields(ttl_ms: u64) -> String {
    format!(r#""resultType":"complete","ttlMs":{ttl_ms},"cacheScope":"private","#)
}

/// Adds the cache hints modern list results must carry (`ttlMs`, `cacheScope`).
pub fn cacheable(raw: Box<serde_json::value::RawValue>, ttl_ms: u64) -> Box<serde_json::value::RawValue> {
    let Ok(Value::Object(mut result)) = serde_json::from_str::<Value>(raw.get()) else {
        return raw;
    };
    result.insert("resultType".into(), json!("complete"));
    result.insert("ttlMs".into(), json!(ttl_ms));
    result.insert("cacheScope".into(), json!("public"));
    serde_json::value::to_raw_value(&result).unwrap_or(raw)
}

/// A result's `cacheScope` set to `private` (a result that is this caller's own).
pub fn private(raw: Box<serde_json::value::RawValue>) -> Box<serde_json::value::RawValue> {
    let Ok(Value::Object(mut result)) = serde_json::from_str::<Value>(raw.get()) else {
        return raw;
    };
    result.insert("cacheScope".into(), json!("private"));
    serde_json::value::to_raw_value(&result).unwrap_or(raw)
}

/// The `_meta` the gateway puts on a modern-era upstream request (built once, written by
/// reference into every request).
fn modern_meta() -> &'static Map<String, Value> {
    static META: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(|| {
        let mut meta = Map::new();
        meta.insert(META_PROTOCOL_VERSION.into(), json!(MODERN_VERSION));
        meta.insert(META_CLIENT_CAPABILITIES.into(), json!({}));
        meta.insert(META_CLIENT_INFO.into(), json!({"name": "mcp-gateway", "version": crate::VERSION}));
        meta
    });
    &META
}

/// What a transport changes in a request's `_meta` besides the era's own entries: keys dropped
/// from the caller's, entries set over them. Applied while the request is written, so the
/// params (arguments and all) are never copied to change their `_meta`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetaPatch {
    pub drop: Vec<&'static str>,
    pub set: Vec<(&'static str, Value)>,
}

impl MetaPatch {
    pub fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.set.is_empty()
    }

    /// Applies the patch to a `_meta` map a transport holds a copy of anyway (where
    /// [`encode_patched_request`] applies it as it writes).
    pub fn apply(self, meta: &mut Map<String, Value>) {
        for key in self.drop {
            meta.remove(key);
        }
        meta.extend(self.set.into_iter().map(|(key, value)| (key.to_string(), value)));
    }
}

/// A request's `_meta` as written: the caller's entries (less the dropped ones) with the
/// gateway's over them, as the merged `Map` would hold them, without building it.
struct MergedMeta<'a> {
    caller: Option<&'a Map<String, Value>>,
    drop: &'a [&'a str],
    /// Sorted by key, each key once.
    ours: Vec<(&'a str, &'a Value)>,
    era: Era,
}

impl<'a> MergedMeta<'a> {
    fn new(caller: Option<&'a Map<String, Value>>, era: Era, patch: &'a MetaPatch) -> Self {
        let era_entries = (era == Era::Modern).then(modern_meta).into_iter().flatten();
        // A modern caller's own capabilities and clientInfo describe who will answer an
        // `input_required` result (which passes through to it): they reach a modern upstream
        // in place of the gateway's defaults, or the server would never ask (SEP-2322).
        let callers_own = |key: &str| {
            CLIENT_META.contains(&key) && caller.and_then(|meta| meta.get(key)).is_some_and(Value::is_object)
        };
        let mut ours: Vec<(&str, &Value)> =
            era_entries.filter(|(k, _)| !callers_own(k)).map(|(k, v)| (k.as_str(), v)).collect();
        for (key, value) in &patch.set {
            match ours.iter_mut().find(|(k, _)| k == key) {
                Some(entry) => entry.1 = value,
                None => ours.push((key, value)),
            }
        }
        ours.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Self { caller, drop: &patch.drop, ours, era }
    }

    /// The caller's entries as written: less the dropped ones, and less the client declaration
    /// for a session-era server (which learned its client in `initialize`).
    fn callers(&self) -> impl Iterator<Item = (&'a String, &'a Value)> + '_ {
        self.caller.into_iter().flatten().filter(|(k, _)| {
            !self.drop.contains(&k.as_str())
                && (self.era == Era::Modern || !CLIENT_META.contains(&k.as_str()))
        })
    }

    fn is_empty(&self) -> bool {
        self.ours.is_empty() && self.callers().next().is_none()
    }
}

impl serde::Serialize for MergedMeta<'_> {
    /// The caller's entries in their own order, less those the gateway sets, then the
    /// gateway's. Membership, not key order, decides what is replaced: serde_json keeps a map's
    /// insertion order in this build (a dependency turns on `preserve_order`), so a caller's
    /// `_meta` cannot be assumed sorted — and a key written twice would let the caller's value
    /// win in most parsers.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.callers() {
            if !self.ours.iter().any(|(ours, _)| *ours == key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        for (key, value) in &self.ours {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Serializes a request (method and params) as a JSON-RPC request of the given era. Takes
/// plain parts so the protocol layer knows nothing of the upstream layer. The params are
/// written as they are (not copied); only a modern request's `_meta` is merged as written.
pub fn encode_request(id: u64, method: &str, params: &Map<String, Value>, era: Era) -> Vec<u8> {
    encode_patched_request(id, method, params, era, &MetaPatch::default())
}

/// [`encode_request`] with the transport's changes to `_meta` applied as it is written. A
/// `_meta` left empty is left out.
pub fn encode_patched_request(
    id: u64,
    method: &str,
    params: &Map<String, Value>,
    era: Era,
    patch: &MetaPatch,
) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Request<'a> {
        // Key order as `json!` (a sorted map) wrote them.
        id: u64,
        jsonrpc: &'static str,
        method: &'a str,
        params: Params<'a>,
    }
    struct Params<'a> {
        params: &'a Map<String, Value>,
        meta: Option<MergedMeta<'a>>,
    }
    impl serde::Serialize for Params<'_> {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let Some(meta) = &self.meta else { return self.params.serialize(serializer) };
            // In key order, as a `Map` with the merged `_meta` would be written.
            let mut map = serializer.serialize_map(None)?;
            let mut meta = Some(meta).filter(|meta| !meta.is_empty());
            for (key, value) in self.params.iter().filter(|(k, _)| k.as_str() != "_meta") {
                if key.as_str() > "_meta"
                    && let Some(meta) = meta.take()
                {
                    map.serialize_entry("_meta", meta)?;
                }
                map.serialize_entry(key, value)?;
            }
            if let Some(meta) = meta {
                map.serialize_entry("_meta", meta)?;
            }
            map.end()
        }
    }
    let callers_meta = params.get("_meta").and_then(Value::as_object);
    // A session-era server is written the caller's `_meta` as is, less a client declaration.
    let declares = || callers_meta.is_some_and(|m| CLIENT_META.iter().any(|k| m.contains_key(*k)));
    let meta = (era == Era::Modern || !patch.is_empty() || declares())
        .then(|| MergedMeta::new(callers_meta, era, patch));
    let message = Request { id, jsonrpc: "2.0", method, params: Params { params, meta } };
    // Most requests fit: growing from serde_json's 128 bytes copied the request twice.
    let mut request = Vec::with_capacity(512);
    match serde_json::to_writer(&mut request, &message) {
        Ok(()) => request,
        Err(_) => Vec::new(),
    }
}

/// The method a client of unknown era probes with (2026-07-28, "Backward compatibility").
pub const DISCOVER: &str = "server/discover";

/// The modern revision's `UnsupportedProtocolVersionError` code.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// The `server/discover` probe, in the modern shape (`_meta` with version and capabilities).
pub fn encode_discover(id: u64) -> Vec<u8> {
    encode_request(id, DISCOVER, &Map::new(), Era::Modern)
}

/// Whether a `server/discover` result shows a modern server: its `supportedVersions` lists
/// 2026-07-28. Anything else (no such field, other versions, not an object) does not.
pub fn shows_modern(result: &Value) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|versions| versions.iter().any(|v| v == MODERN_VERSION))
}

/// Whether an error is the revision's unsupported-version error refusing `version`: code
/// `-32022` whose `data.supported` does not list the version the request was sent in.
pub fn refuses_version(code: i64, data: Option<&Value>, version: &str) -> bool {
    code == UNSUPPORTED_VERSION
        && !data
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|versions| versions.iter().any(|v| v == version))
}

/// Serializes a notification (no id) of the given method and params.
pub fn encode_notification(method: &str, params: Option<Value>) -> Vec<u8> {
    let mut message = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        message["params"] = params;
    }
    serde_json::to_vec(&message).unwrap_or_default()
}

/// The `initialize` request the gateway sends to a session-era upstream.
pub fn encode_initialize(id: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-gateway", "version": crate::VERSION},
        },
    }))
    .unwrap_or_default()
}

/// Removes the keys the protocol reserves from a caller's `_meta` before it is forwarded:
/// the gateway states its own version and capabilities to each upstream.
pub fn forwardable_meta(meta: &Value) -> Option<Map<String, Value>> {
    let forwarded: Map<String, Value> = meta
        .as_object()?
        .iter()
        .filter(|(k, _)| !k.starts_with(META_RESERVED_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!forwarded.is_empty()).then_some(forwarded)
}

/// The capabilities a request states for its caller: an `initialize`'s `capabilities`, a
/// 2026-07-28 request's `_meta` client capabilities.
pub fn stated_capabilities<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a Value> {
    let params = params?;
    if method == "initialize" {
        return params.get("capabilities");
    }
    params.get("_meta")?.get(META_CLIENT_CAPABILITIES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_negotiates_a_session_era_version() {
        assert_eq!(negotiate_legacy(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate_legacy(Some("2026-07-28")), LATEST_LEGACY_VERSION);
        assert_eq!(negotiate_legacy(Some("1999-01-01")), LATEST_LEGACY_VERSION);
        assert_eq!(negotiate_legacy(None), LATEST_LEGACY_VERSION);
    }

    #[test]
    fn modern_requests_carry_meta_and_keep_caller_meta() {
        let mut params = Map::new();
        params.insert("name".into(), json!("echo"));
        params.insert("_meta".into(), json!({"trace": "t1"}));
        let body = encode_request(7, "tools/call", &params, Era::Modern);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["params"]["_meta"][META_PROTOCOL_VERSION], MODERN_VERSION);
        assert_eq!(v["params"]["_meta"]["trace"], "t1");
        assert_eq!(v["id"], 7);
    }

    #[test]
    fn tool_execution_errors_are_for_callers_of_2025_11_25_and_later() {
        assert!(takes_tool_execution_errors(None, true));
        assert!(takes_tool_execution_errors(Some("2025-11-25"), false));
        assert!(takes_tool_execution_errors(Some(MODERN_VERSION), false));
        assert!(!takes_tool_execution_errors(Some("2025-06-18"), false));
        assert!(!takes_tool_execution_errors(None, false), "no header: 2025-03-26");
        assert!(!takes_tool_execution_errors(Some("2099-01-01"), false), "not a supported revision");
    }

    #[test]
    fn modern_results_get_a_result_type() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        assert_eq!(
            with_result_type(raw(r#"{"content":[]}"#)).get(),
            r#"{"resultType":"complete","content":[]}"#
        );
        assert_eq!(with_result_type(raw("{}")).get(), r#"{"resultType":"complete"}"#);
        assert_eq!(
            with_result_type(raw(r#"{"resultType":"input_required"}"#)).get(),
            r#"{"resultType":"input_required"}"#
        );
        let listed: Value = serde_json::from_str(cacheable(raw(r#"{"tools":[]}"#), 5).get()).unwrap();
        assert_eq!(listed["ttlMs"], 5);
        assert_eq!(listed["cacheScope"], "public");
        for list in [r#"{"tools":[{"name":"a"}]}"#, r#"{"tools":[]}"#] {
            let spliced = format!("{{{}{}", cache_fields(5), &list[1..]);
            let spliced: Value = serde_json::from_str(&spliced).unwrap();
            let copied: Value = serde_json::from_str(cacheable(raw(list), 5).get()).unwrap();
            assert_eq!(spliced, copied, "{list}");
        }
    }

    /// The written bytes are the expected message: the same JSON value, and the same length
    /// (a key written twice would parse to the same value but not the same length). Key order is
    /// not compared: serde_json keeps insertion order in this build (a dependency turns on its
    /// `preserve_order`), while the encoder writes the gateway's keys in its own fixed order.
    fn assert_same_message(written: &[u8], expected: &[u8]) {
        let parsed: Value = serde_json::from_slice(written).expect("the encoder writes JSON");
        let wanted: Value = serde_json::from_slice(expected).expect("expected JSON");
        assert_eq!(parsed, wanted, "{}", String::from_utf8_lossy(written));
        assert_eq!(written.len(), expected.len(), "{}", String::from_utf8_lossy(written));
    }

    #[test]
    fn requests_are_written_as_a_merged_map_would_be() {
        let mut params = Map::new();
        params.insert("name".into(), json!("echo"));
        params.insert("arguments".into(), json!({"b": 1, "a": [1, 2]}));
        params.insert("Zed".into(), json!(true));
        for with_meta in [false, true] {
            if with_meta {
                // Keys before, between, after and equal to the gateway's own (which win).
                params.insert(
                    "_meta".into(),
                    json!({"trace": "t1", "a": 1, "io.modelcontextprotocol/m": 2, META_PROTOCOL_VERSION: "1999-01-01"}),
                );
            }
            for era in [Era::Legacy, Era::Modern] {
                let mut merged = params.clone();
                if era == Era::Modern {
                    let meta = merged.entry("_meta").or_insert_with(|| json!({}));
                    meta.as_object_mut().unwrap().extend(modern_meta().clone());
                }
                let expected = serde_json::to_vec(
                    &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": merged}),
                )
                .unwrap();
                assert_same_message(&encode_request(3, "tools/call", &params, era), &expected);
            }
        }
    }

    #[test]
    fn a_modern_callers_client_declaration_reaches_a_modern_server_only() {
        let declared = json!({"elicitation": {"form": {}}, "sampling": {}});
        let mut params = Map::new();
        params.insert("name".into(), json!("place_order"));
        params.insert(
            "_meta".into(),
            json!({META_CLIENT_CAPABILITIES: declared, META_CLIENT_INFO: {"name": "shop-agent"}, "trace": "t"}),
        );
        let modern: Value =
            serde_json::from_slice(&encode_request(1, "tools/call", &params, Era::Modern)).unwrap();
        let meta = &modern["params"]["_meta"];
        assert_eq!(meta[META_CLIENT_CAPABILITIES], declared, "the caller's, not the gateway's empty one");
        assert_eq!(meta[META_CLIENT_INFO], json!({"name": "shop-agent"}));
        assert_eq!(meta[META_PROTOCOL_VERSION], MODERN_VERSION, "the version stays the gateway's");
        let legacy: Value =
            serde_json::from_slice(&encode_request(1, "tools/call", &params, Era::Legacy)).unwrap();
        assert_eq!(legacy["params"]["_meta"], json!({"trace": "t"}), "a session-era server is not told");
        // A declaration that is not an object: the gateway's defaults.
        params.insert("_meta".into(), json!({META_CLIENT_CAPABILITIES: "everything"}));
        let odd: Value =
            serde_json::from_slice(&encode_request(1, "tools/call", &params, Era::Modern)).unwrap();
        assert_eq!(odd["params"]["_meta"][META_CLIENT_CAPABILITIES], json!({}));
    }

    #[test]
    fn a_patch_is_written_as_the_patched_map_would_be() {
        let patch = MetaPatch {
            drop: vec!["progressToken"],
            set: vec![
                ("progressToken", json!("gw-3")),
                ("io.modelcontextprotocol/logLevel", json!("warning")),
            ],
        };
        for caller in
            [json!({"progressToken": "c", "trace": "t", "zz": 1}), json!({"progressToken": 5}), json!("x")]
        {
            let mut params = Map::new();
            params.insert("name".into(), json!("echo"));
            params.insert("_meta".into(), caller.clone());
            for era in [Era::Legacy, Era::Modern] {
                let mut meta = caller.as_object().cloned().unwrap_or_default();
                meta.remove("progressToken");
                if era == Era::Modern {
                    meta.extend(modern_meta().clone());
                }
                meta.extend(patch.set.iter().map(|(k, v)| (k.to_string(), v.clone())));
                let expected = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "method": "m",
                    "params": {"name": "echo", "_meta": meta}}))
                .unwrap();
                let written = encode_patched_request(3, "m", &params, era, &patch);
                assert_same_message(&written, &expected);
            }
            // Only dropping: an emptied `_meta` is left out.
            let dropped = encode_patched_request(
                3,
                "m",
                &params,
                Era::Legacy,
                &MetaPatch { drop: vec!["progressToken"], set: vec![] },
            );
            let sent: Value = serde_json::from_slice(&dropped).unwrap();
            let left = caller.as_object().map(|m| m.len() > 1).unwrap_or(false);
            assert_eq!(sent["params"].get("_meta").is_some(), left, "{caller}");
        }
    }

    #[test]
    fn only_a_discover_result_listing_the_modern_version_shows_a_modern_server() {
        assert!(shows_modern(&json!({"supportedVersions": ["2025-11-25", MODERN_VERSION]})));
        assert!(!shows_modern(&json!({"supportedVersions": ["2025-11-25"]})));
        assert!(!shows_modern(&json!({})), "a lenient server's empty result");
        assert!(!shows_modern(&json!({"supportedVersions": MODERN_VERSION})), "not a list");
        let probe: Value = serde_json::from_slice(&encode_discover(3)).unwrap();
        assert_eq!(probe["method"], DISCOVER);
        assert_eq!(probe["params"]["_meta"][META_PROTOCOL_VERSION], MODERN_VERSION);
    }

    #[test]
    fn an_unsupported_version_error_refuses_the_version_it_does_not_list() {
        let supported = json!({"supported": ["2025-11-25"]});
        assert!(refuses_version(-32022, Some(&supported), MODERN_VERSION));
        assert!(!refuses_version(-32022, Some(&supported), "2025-11-25"));
        assert!(refuses_version(-32022, None, MODERN_VERSION), "no list: refused");
        assert!(!refuses_version(-32602, Some(&supported), MODERN_VERSION));
    }

    #[test]
    fn reserved_meta_is_not_forwarded() {
        let meta = json!({META_PROTOCOL_VERSION: "2026-07-28", "progressToken": 1});
        let kept = forwardable_meta(&meta).unwrap();
        assert!(kept.contains_key("progressToken") && kept.len() == 1);
    }
}

/// What a server declares it offers besides tools (`capabilities.resources`, `.prompts`,
/// `.completions`, and the carried extensions under `.extensions`, of its `initialize` or
/// `server/discover` result).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    pub resources: bool,
    pub prompts: bool,
    pub completions: bool,
    /// `capabilities.resources.subscribe: true`: the server takes `resources/subscribe`.
    pub subscribe: bool,
    /// The extensions the gateway carries that the server declared (`capabilities.extensions`).
    pub extensions: super::extensions::Carried,
}

impl Offers {
    pub fn declared(result: &Value) -> Self {
        let has = |key: &str| result.pointer(&format!("/capabilities/{key}")).is_some_and(Value::is_object);
        Offers {
            resources: has("resources"),
            prompts: has("prompts"),
            completions: has("completions"),
            subscribe: result.pointer("/capabilities/resources/subscribe").and_then(Value::as_bool)
                == Some(true),
            extensions: super::extensions::Carried::offered_in(result.get("capabilities")),
        }
    }

    /// The server serves `skills/list` and `skills/get` (SEP-2640).
    pub fn skills(self) -> bool {
        self.extensions.has(super::extensions::SKILLS)
    }

    pub fn any(self) -> bool {
        self.resources || self.prompts || self.completions || self.skills()
    }
}
