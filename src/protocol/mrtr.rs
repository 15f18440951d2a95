//! Multi-round-trip requests (2026-07-28, SEP-2322): what of a caller's `tools/call` belongs to
//! the conversation between the caller and the server rather than to the tool's arguments.
//!
//! A modern server that needs the user or the client's model answers `input_required` (with
//! `inputRequests` and an opaque `requestState`); the client retries the same call with
//! `inputResponses` and the `requestState` echoed. Whether the server may ask at all is decided
//! by the `clientCapabilities` in the request's `_meta` — so a modern caller's own declaration
//! (and `clientInfo`) must reach the server, and its retry fields must travel with the call.
//! The gateway never reads the opaque parts; it carries them, keeps such calls out of the
//! result cache and the joining of identical calls, and writes the declaration only to modern
//! servers (the encoder in [`super::mcp`]).

use serde_json::{Map, Value};

pub use super::mcp::CLIENT_META;
use super::mcp::META_CLIENT_CAPABILITIES;

/// The params of a retried round, passed to the server as the caller sent them.
pub const RETRY_PARAMS: [&str; 2] = ["inputResponses", "requestState"];

/// Capabilities under which a server may ask the client during a call.
const ASKABLE: [&str; 3] = ["elicitation", "sampling", "roots"];

/// One round of a caller's `tools/call`: its client declaration and its retry fields.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Round {
    /// The caller's `clientCapabilities` / `clientInfo` from `_meta`, under their keys.
    pub client: Vec<(&'static str, Value)>,
    /// `inputResponses` / `requestState`, under their keys.
    pub retry: Vec<(&'static str, Value)>,
}

impl Round {
    /// Reads a round from a `tools/call`'s params (nothing is removed from them).
    pub fn of(params: &Map<String, Value>) -> Self {
        let meta = params.get("_meta").and_then(Value::as_object);
        let client = CLIENT_META
            .iter()
            .filter_map(|key| meta?.get(*key).filter(|v| v.is_object()).map(|v| (*key, v.clone())))
            .collect();
        let retry =
            RETRY_PARAMS.iter().filter_map(|key| params.get(*key).map(|v| (*key, v.clone()))).collect();
        Self { client, retry }
    }

    /// Whether the server may ask this caller something during the call, or the call answers
    /// a question: then its result is this caller's alone (never cached, never shared).
    pub fn is_conversation(&self) -> bool {
        !self.retry.is_empty()
            || self.client.iter().any(|(key, value)| {
                *key == META_CLIENT_CAPABILITIES
                    && ASKABLE.iter().any(|capability| value.get(capability).is_some())
            })
    }

    /// The retry fields as one value (for keys derived from the operation), `Null` when none.
    pub fn retry_value(&self) -> Value {
        if self.retry.is_empty() {
            return Value::Null;
        }
        Value::Object(self.retry.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// Writes the round into an upstream call's params and forwarded `_meta`.
    pub fn apply(self, params: &mut Map<String, Value>, meta: &mut Map<String, Value>) {
        for (key, value) in self.client {
            meta.insert(key.into(), value);
        }
        for (key, value) in self.retry {
            params.insert(key.into(), value);
        }
    }
}

impl Round {
    /// The round a session-era caller's session stands for: its declared capabilities and
    /// clientInfo (told to a modern server so that it may ask), no retry fields.
    pub fn declared(capabilities: &Value, client_info: &Value) -> Self {
        let client = [(META_CLIENT_CAPABILITIES, capabilities), (super::mcp::META_CLIENT_INFO, client_info)]
            .into_iter()
            .filter(|(_, value)| value.is_object())
            .map(|(key, value)| (key, value.clone()))
            .collect();
        Self { client, retry: Vec::new() }
    }

    /// The next round after `questions` were answered with `responses`.
    pub fn answering(&self, responses: Map<String, Value>, questions: Questions) -> Self {
        let mut retry = vec![("inputResponses", Value::Object(responses))];
        if let Some(state) = questions.request_state {
            retry.push(("requestState", state));
        }
        Self { client: self.client.clone(), retry }
    }
}

/// Most questions one `input_required` result may ask (each becomes a request to the caller).
pub const MAX_QUESTIONS: usize = 8;

/// What an `input_required` result asks: (key, method, params) per request, and the opaque
/// state to echo.
#[derive(Debug, Default, PartialEq)]
pub struct Questions {
    pub requests: Vec<(String, String, Option<Value>)>,
    pub request_state: Option<Value>,
}

impl Questions {
    /// The questions of a result, `None` when it is final; `Err` with the reason when it asks
    /// in a shape the gateway cannot relay (no `inputRequests` object, a request without a
    /// method, more than [`MAX_QUESTIONS`]).
    pub fn of(result: &serde_json::value::RawValue) -> Option<Result<Self, String>> {
        if is_complete(result) {
            return None;
        }
        let Ok(Value::Object(mut result)) = serde_json::from_str::<Value>(result.get()) else {
            return Some(Err("the result is not an object".into()));
        };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Some(Err("a result type other than complete or input_required".into()));
        }
        let Some(Value::Object(asked)) = result.remove("inputRequests") else {
            return Some(Err("input_required without an inputRequests object".into()));
        };
        if asked.len() > MAX_QUESTIONS {
            return Some(Err(format!("{} questions in one round (at most {MAX_QUESTIONS})", asked.len())));
        }
        let mut requests = Vec::with_capacity(asked.len());
        for (key, mut request) in asked {
            let Some(method) = request.get("method").and_then(Value::as_str).map(str::to_string) else {
                return Some(Err("an input request without a method".into()));
            };
            requests.push((key, method, request.get_mut("params").map(Value::take)));
        }
        Some(Ok(Self { requests, request_state: result.remove("requestState") }))
    }
}

/// The params of a session-era server→client request as a 2026-07-28 `InputRequest` carries
/// them (the schema's `CreateMessageRequestParams`, `ElicitRequestParams`, `ListRootsRequest`):
/// only the members that revision defines (no `task`, `elicitationId` or `_meta`, which belong
/// to the session's own exchange). `Null` for `roots/list` (no params). `None` when the request
/// lacks what the revision requires (`messages` and `maxTokens`; `message`) or is not one of
/// the three.
pub fn input_request_params(method: &str, params: Option<&Value>) -> Option<Value> {
    const SAMPLING: [&str; 10] = [
        "messages",
        "modelPreferences",
        "systemPrompt",
        "includeContext",
        "temperature",
        "maxTokens",
        "stopSequences",
        "metadata",
        "tools",
        "toolChoice",
    ];
    const ELICITATION: [&str; 4] = ["mode", "message", "requestedSchema", "url"];
    let given = params.and_then(Value::as_object);
    let kept = |keys: &[&str]| -> Map<String, Value> {
        keys.iter().filter_map(|k| Some((k.to_string(), given?.get(*k)?.clone()))).collect()
    };
    match method {
        "sampling/createMessage" => {
            let kept = kept(&SAMPLING);
            (kept.get("messages").is_some_and(Value::is_array)
                && kept.get("maxTokens").is_some_and(Value::is_number))
            .then_some(Value::Object(kept))
        }
        "elicitation/create" => {
            let kept = kept(&ELICITATION);
            kept.get("message").is_some_and(Value::is_string).then_some(Value::Object(kept))
        }
        "roots/list" => Some(Value::Null),
        _ => None,
    }
}

/// An `input_required` result asking one question (`key`: `method` with `params`, `Null`: none)
/// with the state the retry must echo.
pub fn input_required_result(
    key: &str,
    method: &str,
    params: &Value,
    request_state: &str,
) -> Box<serde_json::value::RawValue> {
    let mut request = Map::new();
    request.insert("method".into(), Value::String(method.into()));
    if !params.is_null() {
        request.insert("params".into(), params.clone());
    }
    let mut asked = Map::new();
    asked.insert(key.into(), Value::Object(request));
    let result = serde_json::json!({
        "resultType": "input_required",
        "inputRequests": asked,
        "requestState": request_state,
    });
    serde_json::value::to_raw_value(&result).unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
}

impl Round {
    /// Whether the caller declared a capability under which a server may ask it something.
    pub fn may_be_asked(&self) -> bool {
        self.client.iter().any(|(key, value)| {
            *key == META_CLIENT_CAPABILITIES
                && ASKABLE.iter().any(|capability| value.get(capability).is_some())
        })
    }

    /// The caller's declared `clientCapabilities` / `clientInfo` (`Null` when not declared).
    pub fn client_value(&self, key: &str) -> Value {
        self.client.iter().find(|(k, _)| *k == key).map_or(Value::Null, |(_, v)| v.clone())
    }

    /// The `requestState` the caller echoes, when it is a string.
    pub fn request_state(&self) -> Option<&str> {
        self.retry.iter().find(|(k, _)| *k == "requestState").and_then(|(_, v)| v.as_str())
    }

    /// The `inputResponses` the caller sent, if any.
    pub fn input_responses(&self) -> Option<&Value> {
        self.retry.iter().find(|(k, _)| *k == "inputResponses").map(|(_, v)| v)
    }
}

/// Whether a result is final (`resultType` absent or `complete`), as opposed to a question
/// (`input_required`) that only its caller can answer.
pub fn is_complete(result: &serde_json::value::RawValue) -> bool {
    let text = result.get();
    let mut found = text.match_indices("\"resultType\"");
    let Some((at, key)) = found.next() else { return true };
    // The one `resultType` in the text, saying `complete` (a modern server's every result): no
    // parse. Nested or top-level, the result is then complete (a nested one leaves the
    // top-level absent). Anything else (a key spelt with escapes too) is read properly; what
    // cannot be read counts as complete, so the after-hooks still run on it.
    if found.next().is_none() && text[at + key.len()..].starts_with(":\"complete\"") {
        return true;
    }
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_str::<Kind>(text).map_or(true, |kind| kind.result_type.is_none_or(|t| t == "complete"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::mcp::META_CLIENT_INFO;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_modern_callers_declaration_and_retry_fields_are_read() {
        let round = Round::of(&params(json!({
            "name": "place_order",
            "arguments": {},
            "inputResponses": {"confirm": {"action": "accept"}},
            "requestState": "opaque",
            "_meta": {META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}}, META_CLIENT_INFO: {"name": "c"}, "other": 1}
        })));
        assert_eq!(round.client.len(), 2);
        assert_eq!(round.retry.len(), 2);
        assert!(round.is_conversation());
        let (mut upstream, mut meta) = (Map::new(), Map::new());
        round.apply(&mut upstream, &mut meta);
        assert_eq!(upstream["requestState"], "opaque");
        assert_eq!(meta[META_CLIENT_INFO], json!({"name": "c"}));
    }

    #[test]
    fn a_plain_call_is_no_conversation() {
        assert_eq!(Round::of(&params(json!({"name": "t", "arguments": {}}))), Round::default());
        // Declared capabilities that let nobody ask; a declaration that is not an object.
        let quiet = Round::of(&params(
            json!({"name": "t", "_meta": {META_CLIENT_CAPABILITIES: {"experimental": {}}}}),
        ));
        assert!(!quiet.is_conversation());
        let odd =
            Round::of(&params(json!({"name": "t", "_meta": {META_CLIENT_CAPABILITIES: "elicitation"}})));
        assert!(odd.client.is_empty());
    }

    #[test]
    fn questions_are_read_and_answered_in_the_next_round() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        assert_eq!(Questions::of(&raw(r#"{"content":[]}"#)), None);
        let asked = raw(
            r#"{"resultType":"input_required","requestState":"s1","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"ok?"}}}}"#,
        );
        let questions = Questions::of(&asked).unwrap().unwrap();
        assert_eq!(
            questions.requests,
            vec![("q".into(), "elicitation/create".into(), Some(json!({"message": "ok?"})))]
        );
        let declared = Round::declared(&json!({"elicitation": {}}), &json!({"name": "legacy"}));
        let mut responses = Map::new();
        responses.insert("q".into(), json!({"action": "accept"}));
        let next = declared.answering(responses, questions);
        assert_eq!(next.client, declared.client);
        assert_eq!(
            next.retry_value(),
            json!({"inputResponses": {"q": {"action": "accept"}}, "requestState": "s1"})
        );
        for bad in [
            r#"{"resultType":"input_required"}"#,
            r#"{"resultType":"input_required","inputRequests":{"q":{"params":{}}}}"#,
            r#"{"resultType":"later"}"#,
        ] {
            assert!(Questions::of(&raw(bad)).unwrap().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_session_era_request_is_asked_in_the_2026_07_28_shape() {
        let elicit = json!({"mode": "form", "message": "ok?", "requestedSchema": {"type": "object"},
            "task": {"ttl": 1}, "_meta": {"progressToken": 1}});
        assert_eq!(
            input_request_params("elicitation/create", Some(&elicit)),
            Some(json!({"mode": "form", "message": "ok?", "requestedSchema": {"type": "object"}}))
        );
        let url = json!({"mode": "url", "message": "sign in", "url": "https://x", "elicitationId": "e1"});
        assert_eq!(
            input_request_params("elicitation/create", Some(&url)),
            Some(json!({"mode": "url", "message": "sign in", "url": "https://x"}))
        );
        let sample = json!({"messages": [], "maxTokens": 5, "task": {}});
        assert_eq!(
            input_request_params("sampling/createMessage", Some(&sample)),
            Some(json!({"messages": [], "maxTokens": 5}))
        );
        assert_eq!(input_request_params("roots/list", None), Some(Value::Null));
        assert_eq!(input_request_params("sampling/createMessage", Some(&json!({"messages": []}))), None);
        assert_eq!(input_request_params("elicitation/create", None), None);
        assert_eq!(input_request_params("tools/list", None), None);
        let asked: Value =
            serde_json::from_str(input_required_result("k", "roots/list", &Value::Null, "s").get()).unwrap();
        assert_eq!(
            asked,
            json!({"resultType": "input_required", "inputRequests": {"k": {"method": "roots/list"}}, "requestState": "s"})
        );
    }

    #[test]
    fn only_complete_results_are_final() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        assert!(is_complete(&raw(r#"{"content":[]}"#)));
        assert!(is_complete(&raw(r#"{"resultType":"complete","content":[]}"#)));
        assert!(!is_complete(&raw(r#"{"resultType":"input_required","inputRequests":{}}"#)));
        assert!(!is_complete(&raw(r#"{"content":[],"resultType":"incomplete"}"#)));
        assert!(!is_complete(&raw(
            r#"{"structuredContent":{"resultType":"complete"},"resultType":"partial"}"#
        )));
        assert!(is_complete(&raw(r#"{"structuredContent":{"resultType":"partial"}}"#)));
        assert!(!is_complete(&raw(r#"{"resultType" : "partial"}"#)));
    }
}
