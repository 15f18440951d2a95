//! JSON-RPC 2.0 envelopes: decoding inbound messages (single or batch) strictly, and writing
//! responses whose `result` may be raw bytes passed through from an upstream untouched, or
//! bytes shared by every request (the pre-serialised `tools/list`), written without a copy.

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer, ser::SerializeStruct};
use serde_json::{Value, value::RawValue};

pub use crate::error::ErrorObject;
use crate::error::{Category, GatewayError};

/// One decoded inbound message: a request (has an id) or a notification (has none).
#[derive(Debug, Clone)]
pub struct Message {
    /// `None` for a notification. `Some(Value::Null)` is an explicit `"id": null`.
    pub id: Option<Value>,
    pub method: String,
    pub params: Option<Value>,
}

impl Message {
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }
}

/// An entry that is not a valid request, answered with `error` under `id`.
#[derive(Debug)]
pub struct Rejected {
    pub id: Value,
    pub error: GatewayError,
}

/// One decoded message or the reason it is not one.
pub type Entry = Result<Message, Box<Rejected>>;

/// What a POST body decodes to.
#[derive(Debug)]
pub enum Inbound {
    Single(Entry),
    Batch(Vec<Entry>),
}

/// Decodes a POST body. `Err` is a parse error of the whole body (answered with id `null`).
/// Each entry that is not a valid request becomes an `Err((id, error))` answered on its own.
pub fn decode(body: &[u8]) -> Result<Inbound, GatewayError> {
    decode_bounded(body, usize::MAX)
}

/// [`decode`], refusing a batch of more than `max_batch_items` items whole: one `-32600`
/// error whose `data` names the limit, and no item decoded into a request (so none runs).
pub fn decode_bounded(body: &[u8], max_batch_items: usize) -> Result<Inbound, GatewayError> {
    let text = utf8(body)?;
    if let Some(message) = single_request(text) {
        return Ok(Inbound::Single(Ok(message)));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| GatewayError::new(Category::ParseError, e.to_string()))?;
    match value {
        Value::Array(items) if items.is_empty() => Ok(Inbound::Single(Err(Box::new(Rejected {
            id: Value::Null,
            error: GatewayError::new(Category::InvalidRequest, "empty batch"),
        })))),
        Value::Array(items) if items.len() > max_batch_items => {
            Err(batch_too_large(items.len(), max_batch_items))
        }
        Value::Array(items) => Ok(Inbound::Batch(items.into_iter().map(message).collect())),
        other => Ok(Inbound::Single(message(other))),
    }
}

/// The refusal of a whole batch over the item limit.
pub fn batch_too_large(items: usize, limit: usize) -> GatewayError {
    GatewayError::new(
        Category::InvalidRequest,
        format!("a batch may hold at most {limit} items; this one holds {items}"),
    )
    .with_limit("inbound.max_batch_items", limit as u64)
}

/// The shape nearly every POST has — one valid request object — decoded straight into a
/// [`Message`], without a map for the envelope or a second pass to take it apart (about 3k
/// instructions a call). Anything else (a batch, a wrong type, a duplicate key, a
/// syntax error) is `None` and takes the general path, which has the precise error for it.
fn single_request(text: &str) -> Option<Message> {
    /// `Some` whenever the key is present, `null` included (`Option<Value>` alone reads
    /// `"id": null` as absent, and an explicit null id is an id).
    fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Value::deserialize(d).map(Some)
    }
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: Option<&'a str>,
        #[serde(default, deserialize_with = "present")]
        id: Option<Value>,
        method: Option<String>,
        #[serde(default, deserialize_with = "present")]
        params: Option<Value>,
    }
    // A derived struct also reads a JSON array; only an object is a single request here.
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    let valid = envelope.jsonrpc == Some("2.0")
        && matches!(envelope.id, None | Some(Value::String(_) | Value::Number(_) | Value::Null))
        && matches!(envelope.params, None | Some(Value::Object(_) | Value::Array(_)));
    let method = envelope.method.filter(|_| valid)?;
    Some(Message { id: envelope.id, method, params: envelope.params })
}

/// The body as text, checked once: parsing a `&str` skips serde_json's check of every string.
fn utf8(body: &[u8]) -> Result<&str, GatewayError> {
    std::str::from_utf8(body).map_err(|e| {
        GatewayError::new(Category::ParseError, format!("invalid UTF-8 at byte {}", e.valid_up_to()))
    })
}

fn rejected(id: Value, detail: &str) -> Box<Rejected> {
    Box::new(Rejected { id, error: GatewayError::new(Category::InvalidRequest, detail) })
}

fn message(value: Value) -> Entry {
    let Value::Object(mut obj) = value else {
        return Err(rejected(Value::Null, "a request must be a JSON object"));
    };
    let id = obj.remove("id");
    let reply_id = match &id {
        Some(v @ (Value::String(_) | Value::Number(_) | Value::Null)) => v.clone(),
        Some(_) => return Err(rejected(Value::Null, "id must be a string, number or null")),
        None => Value::Null,
    };
    let invalid = |detail: &str| rejected(reply_id.clone(), detail);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return Err(invalid("method must be a string")),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Err(invalid("responses are not accepted on this endpoint"));
        }
        None => return Err(invalid("method is missing")),
    };
    let params = match obj.remove("params") {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => return Err(invalid("params must be an object or an array")),
    };
    Ok(Message { id, method, params })
}

/// A successful response's result.
#[derive(Debug)]
pub enum Payload {
    /// One answer's JSON (an upstream result passed through, or a gateway-made one).
    Raw(Box<RawValue>),
    /// A result shared by many requests (a `tools/list` page): `head`, `tail` and `end` are
    /// together one JSON value; `tail` (a slice of the catalogue's list) is written out
    /// without being copied or re-serialised.
    Shared { head: Bytes, tail: Bytes, end: Bytes },
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Raw(raw) => raw.serialize(serializer),
            // Inside a batch (rare): copied once into one raw value.
            Payload::Shared { head, tail, end } => {
                let mut text = Vec::with_capacity(head.len() + tail.len() + end.len());
                text.extend_from_slice(head);
                text.extend_from_slice(tail);
                text.extend_from_slice(end);
                let text = String::from_utf8(text).map_err(serde::ser::Error::custom)?;
                RawValue::from_string(text).map_err(serde::ser::Error::custom)?.serialize(serializer)
            }
        }
    }
}

/// A JSON-RPC response. The result is raw JSON so upstream results pass through byte for byte.
#[derive(Debug)]
pub struct Response {
    pub id: Value,
    pub body: Result<Payload, ErrorObject>,
}

impl Response {
    pub fn result(id: Value, result: Box<RawValue>) -> Self {
        Self { id, body: Ok(Payload::Raw(result)) }
    }

    /// A result of shared bytes: `head`, `tail` then `end` (see [`Payload::Shared`]).
    pub fn shared(id: Value, head: Bytes, tail: Bytes, end: Bytes) -> Self {
        Self { id, body: Ok(Payload::Shared { head, tail, end }) }
    }

    /// A result built from a `serde_json::Value` (for small gateway-made results).
    pub fn result_value(id: Value, result: &Value) -> Self {
        let raw = serde_json::value::to_raw_value(result)
            .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("static JSON"));
        Self::result(id, raw)
    }

    /// The response as the segments of an HTTP body: one buffer, or for a shared result the
    /// envelope around the shared bytes (which are not copied).
    pub fn encode(&self) -> Result<Vec<Bytes>, serde_json::Error> {
        match &self.body {
            Ok(Payload::Shared { head, tail, end }) => {
                let mut envelope = Vec::with_capacity(64 + head.len());
                envelope.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
                serde_json::to_writer(&mut envelope, &self.id)?;
                envelope.extend_from_slice(br#","result":"#);
                envelope.extend_from_slice(head);
                let mut closing = Vec::with_capacity(end.len() + 1);
                closing.extend_from_slice(end);
                closing.push(b'}');
                Ok(vec![Bytes::from(envelope), tail.clone(), Bytes::from(closing)])
            }
            body => {
                // Sized for the whole answer up front: growing it copied the result twice.
                let capacity = match body {
                    Ok(Payload::Raw(raw)) => raw.get().len() + 64,
                    _ => 256,
                };
                let mut answer = Vec::with_capacity(capacity);
                serde_json::to_writer(&mut answer, self)?;
                Ok(vec![Bytes::from(answer)])
            }
        }
    }

    pub fn error(id: Value, error: &GatewayError) -> Self {
        Self { id, body: Err(error.to_error_object()) }
    }

    /// A refusal the transport answers with HTTP 400 (header mismatch, unsupported version).
    pub fn is_protocol_refusal(&self) -> bool {
        matches!(&self.body, Err(e) if e.code == -32020 || e.code == -32022)
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Response", 3)?;
        s.serialize_field("jsonrpc", "2.0")?;
        s.serialize_field("id", &self.id)?;
        match &self.body {
            Ok(result) => s.serialize_field("result", result)?,
            Err(error) => s.serialize_field("error", error)?,
        }
        s.end()
    }
}

/// An upstream's JSON-RPC response, decoded without building a tree of the result.
#[derive(Debug, Deserialize)]
pub struct UpstreamResponse {
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Value>,
    #[serde(default)]
    pub result: Option<Box<RawValue>>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

/// Keeps an explicit `null` distinct from an absent field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The only field of a `tools/call` result the gateway must read: `isError`.
#[derive(Debug, Default, Deserialize)]
pub struct CallResultProbe {
    #[serde(rename = "isError", default)]
    pub is_error: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn single(body: &str) -> Entry {
        match decode(body.as_bytes()).unwrap() {
            Inbound::Single(m) => m,
            Inbound::Batch(_) => panic!("expected a single message"),
        }
    }

    #[test]
    fn invalid_utf8_anywhere_is_a_parse_error() {
        let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"#.to_vec();
        let at = body.len();
        body.extend_from_slice(&[0xc3, 0x28]); // a broken two-byte sequence inside a string
        body.extend_from_slice(br#""}}"#);
        let Err(error) = decode(&body) else { panic!("not UTF-8") };
        assert_eq!(error.category, Category::ParseError);
        assert!(error.detail.contains(&format!("byte {at}")), "{}", error.detail);
        assert!(decode("{\"jsonrpc\":\"2.0\",\"id\":\"caf\u{e9}\",\"method\":\"ping\"}".as_bytes()).is_ok());
    }

    #[test]
    fn notifications_have_no_id_and_null_ids_are_kept() {
        let n = single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(n.is_notification());
        let r = single(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap();
        assert_eq!(r.id, Some(Value::Null));
    }

    #[test]
    fn invalid_requests_keep_their_id_when_it_is_valid() {
        let rejected = single(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#).unwrap_err();
        assert_eq!(rejected.id, json!(7));
        assert_eq!(rejected.error.category, Category::InvalidRequest);
        let rejected = single(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#).unwrap_err();
        assert_eq!(rejected.id, Value::Null);
        assert!(single(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#).is_err());
        assert!(single("42").is_err());
    }

    #[test]
    fn the_single_request_shortcut_decodes_exactly_what_the_general_path_does() {
        let general = |text: &str| message(serde_json::from_str(text).unwrap());
        let same = |a: &Message, b: &Message| a.id == b.id && a.method == b.method && a.params == b.params;
        for taken in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1]}}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"method":"ping","params":[1,2],"id":"s","jsonrpc":"2.0","extra":{"ignored":true}}"#,
            " \n {\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"p\\u0069ng\"}",
        ] {
            let fast = single_request(taken).unwrap_or_else(|| panic!("not taken: {taken}"));
            let slow = general(taken).unwrap();
            assert!(same(&fast, &slow), "{taken}: {fast:?} != {slow:?}");
        }
        // Whatever the shortcut declines, the general path decides (valid or not).
        for declined in [
            r#"["2.0",1,"ping"]"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"s"}"#,
            r#"{"jsonrpc":null,"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
        ] {
            assert!(single_request(declined).is_none(), "taken: {declined}");
        }
        let id_kept_last = single(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#).unwrap();
        assert_eq!(id_kept_last.id, Some(json!(2)), "a duplicate key: the last one, as before");
        assert!(single(r#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#).is_ok());
        assert!(matches!(decode(br#"["2.0",1,"ping"]"#).unwrap(), Inbound::Batch(v) if v.len() == 3));
    }

    #[test]
    fn batches_and_parse_errors() {
        assert!(matches!(decode(b"[1,2]").unwrap(), Inbound::Batch(v) if v.len() == 2));
        assert!(matches!(decode(b"[]").unwrap(), Inbound::Single(Err(_))));
        assert_eq!(decode(b"{nope").unwrap_err().category, Category::ParseError);
    }

    #[test]
    fn shared_results_encode_as_their_serialised_form() {
        let shared = Response::shared(
            json!(7),
            Bytes::from_static(br#"{"ttlMs":5,"tools":["#),
            Bytes::from_static(br#"{"name":"a"}"#),
            Bytes::from_static(b"]}"),
        );
        let segments = shared.encode().unwrap();
        let joined: Vec<u8> = segments.concat();
        assert_eq!(joined, serde_json::to_vec(&shared).unwrap(), "in a batch and alone, the same bytes");
        let v: Value = serde_json::from_slice(&joined).unwrap();
        assert_eq!(v, json!({"jsonrpc": "2.0", "id": 7, "result": {"ttlMs": 5, "tools": [{"name": "a"}]}}));
    }

    #[test]
    fn raw_results_pass_through_unchanged() {
        let raw = RawValue::from_string(r#"{"content":[],"isError":true}"#.into()).unwrap();
        let text = serde_json::to_string(&Response::result(json!("a"), raw)).unwrap();
        assert_eq!(text, r#"{"jsonrpc":"2.0","id":"a","result":{"content":[],"isError":true}}"#);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// A JSON value of bounded depth and size, with the shapes an envelope has.
        fn json_value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| json!(n)),
                any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
                "[ -~]{0,12}".prop_map(Value::String),
                Just(json!("2.0")),
                Just(json!("tools/call")),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec(
                        (
                            prop_oneof![
                                Just("jsonrpc"),
                                Just("id"),
                                Just("method"),
                                Just("params"),
                                Just("result"),
                                Just("x")
                            ],
                            inner
                        ),
                        0..5
                    )
                    .prop_map(|pairs| Value::Object(
                        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                    )),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

            /// Arbitrary bytes: a decision, never a panic; a batch never holds more entries
            /// than the bound, and an over-long one is one `-32600` error.
            #[test]
            fn arbitrary_bytes_decode_or_fail_cleanly(body in prop::collection::vec(any::<u8>(), 0..512), limit in 1usize..8) {
                match decode_bounded(&body, limit) {
                    Ok(Inbound::Batch(entries)) => prop_assert!(entries.len() <= limit && !entries.is_empty()),
                    Ok(Inbound::Single(_)) => {}
                    Err(e) => prop_assert!(matches!(e.category, Category::ParseError | Category::InvalidRequest)),
                }
            }

            /// Arbitrary JSON (single or batch): the decoder agrees with the JSON's shape, each
            /// entry is decided on its own, and every answer to a rejected entry serialises.
            #[test]
            fn arbitrary_envelopes_and_batches(value in json_value(), limit in 1usize..6) {
                let body = serde_json::to_vec(&value).unwrap();
                match (decode_bounded(&body, limit), &value) {
                    (Ok(Inbound::Batch(entries)), Value::Array(items)) => {
                        prop_assert_eq!(entries.len(), items.len());
                        prop_assert!(entries.len() <= limit);
                        for entry in entries {
                            match entry {
                                Ok(message) => prop_assert!(matches!(message.id, None | Some(Value::String(_) | Value::Number(_) | Value::Null))),
                                Err(rejected) => {
                                    let answer = Response::error(rejected.id.clone(), &rejected.error);
                                    prop_assert!(serde_json::to_vec(&answer).is_ok());
                                    prop_assert_eq!(rejected.error.category, Category::InvalidRequest);
                                }
                            }
                        }
                    }
                    (Err(e), Value::Array(items)) => {
                        prop_assert!(items.len() > limit);
                        prop_assert_eq!(e.to_error_object().code, -32600);
                        let data = e.to_error_object().data.unwrap();
                        prop_assert_eq!(&data["limit"]["value"], &json!(limit));
                    }
                    (Ok(Inbound::Single(Err(_))), Value::Array(items)) => prop_assert!(items.is_empty()),
                    (Ok(Inbound::Single(entry)), other) => {
                        prop_assert!(!other.is_array());
                        // The shortcut and the general path decide alike.
                        let general = message(other.clone());
                        prop_assert_eq!(entry.is_ok(), general.is_ok());
                        if let (Ok(a), Ok(b)) = (entry, general) {
                            prop_assert_eq!((a.id, a.method, a.params), (b.id, b.method, b.params));
                        }
                    }
                    (decoded, value) => prop_assert!(false, "{:?} decoded from {}", decoded, value),
                }
            }

            /// An upstream's response bytes: a decision, never a panic.
            #[test]
            fn upstream_responses_never_panic(body in prop::collection::vec(any::<u8>(), 0..256), value in json_value()) {
                let _ = serde_json::from_slice::<UpstreamResponse>(&body);
                let text = serde_json::to_vec(&value).unwrap();
                // (A derived struct also reads an array, by position.)
                if let (Ok(response), true) = (serde_json::from_slice::<UpstreamResponse>(&text), value.is_object()) {
                    prop_assert_eq!(response.id.is_some(), value.get("id").is_some());
                }
            }
        }
    }
}
