//! MCP tasks on the wire, in both forms the gateway relays (see `docs/protocol.md#tasks`):
//! - 2025-11-25 (session era, experimental): a `tools/call` carrying `params.task` is answered
//!   with `{"task": Task}` at once; `tasks/get` and `tasks/cancel` answer a `Task`,
//!   `tasks/result` the request's own result (blocking until the task ends), `tasks/list`
//!   `{"tasks": [Task], "nextCursor"?}`. A `Task` has `ttl` and `pollInterval`.
//! - 2026-07-28 (the `io.modelcontextprotocol/tasks` extension): a caller declares the
//!   extension in its per-request capabilities and the server may answer any `tools/call` with
//!   `{"resultType": "task", …Task}`; `tasks/get` answers the task with its `result`, `error`
//!   or `inputRequests` inlined, `tasks/update` and `tasks/cancel` an empty acknowledgement.
//!   A `Task` has `ttlMs` and `pollIntervalMs`.
//!
//! What an upstream says about a task reaches the caller only as a task object rebuilt here
//! from checked fields ([`task_object`]): the gateway's own task id, a known status, strings
//! and numbers where the schema has them.

use serde_json::{Map, Value, json};

/// The extension's identifier (2026-07-28).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// `_meta` key naming the task a message belongs to (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// `_meta` key of a modern request's client capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The task statuses both forms share.
const STATUSES: [&str; 5] = ["working", "input_required", "completed", "failed", "cancelled"];
/// The statuses after which a task never changes.
pub const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];

/// Longest task id the gateway accepts from a server.
const MAX_ID_CHARS: usize = 256;
/// Longest `statusMessage` passed on (longer ones are cut).
const MAX_STATUS_MESSAGE_CHARS: usize = 4096;

/// Which form a task object is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// 2025-11-25: `ttl`, `pollInterval`.
    Session,
    /// 2026-07-28 extension: `ttlMs`, `pollIntervalMs`, `resultType`.
    Extension,
}

/// A tool's `execution.taskSupport` (2025-11-25; absent: `forbidden`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

/// The task support a tool definition declares.
pub fn task_support(definition: &Value) -> TaskSupport {
    match definition.get("execution").and_then(|e| e.get("taskSupport")).and_then(Value::as_str) {
        Some("required") => TaskSupport::Required,
        Some("optional") => TaskSupport::Optional,
        _ => TaskSupport::Forbidden,
    }
}

/// Whether a (modern) request declares the tasks extension in its per-request capabilities.
pub fn declares_extension(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(Value::is_object)
}

/// The outcome a 2026-07-28 server inlines in a terminal task (`tasks/get`): its `result`
/// (`completed`), or its `error` (`failed`) when that is a JSON-RPC error object. `None`:
/// the task has not ended, or says nothing usable.
pub fn inlined_outcome(task: &Value) -> Option<Result<Value, crate::error::ErrorObject>> {
    match status(task) {
        Some("completed") => task.get("result").filter(|r| r.is_object()).cloned().map(Ok),
        Some("failed") => task.get("error").and_then(|e| serde_json::from_value(e.clone()).ok()).map(Err),
        _ => None,
    }
}

/// Whether a `tools/call` result (JSON text) is a task handle of the 2026-07-28 extension
/// (`resultType: "task"`). Parsed only when the text names one.
pub fn is_extension_task(result: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "resultType", borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    result.contains("\"task\"")
        && serde_json::from_str::<Kind<'_>>(result).is_ok_and(|k| k.result_type.as_deref() == Some("task"))
}

/// The `task` parameter of a 2025-11-25 task-augmented request, checked: an object whose `ttl`,
/// if any, is a non-negative integer. `Ok(None)`: no `task` parameter.
pub fn requested(params: &Map<String, Value>) -> Result<Option<Value>, &'static str> {
    let Some(task) = params.get("task") else { return Ok(None) };
    let Value::Object(task) = task else { return Err("params.task must be an object") };
    let mut checked = Map::new();
    match task.get("ttl") {
        None | Some(Value::Null) => {}
        Some(ttl) if ttl.as_u64().is_some() => {
            checked.insert("ttl".into(), ttl.clone());
        }
        Some(_) => return Err("params.task.ttl must be a non-negative integer (milliseconds)"),
    }
    Ok(Some(Value::Object(checked)))
}

/// A task a server created in answer to a `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// The server's own id of the task.
    pub upstream_id: String,
    /// The task's time to live (`None`: unlimited).
    pub ttl_ms: Option<u64>,
    /// The server answered in the extension's form (a modern server).
    pub form: Form,
    /// The task object as the server sent it.
    pub task: Map<String, Value>,
}

/// The task a `tools/call` result creates, if it is a `CreateTaskResult` of either form;
/// `Some(Err)` for one the gateway cannot route (no usable task id, an unknown status).
pub fn created(result: &Value) -> Option<Result<Created, String>> {
    let (task, form) = match result.get("task") {
        Some(Value::Object(task)) => (task, Form::Session),
        _ if result.get("resultType").and_then(Value::as_str) == Some("task") => match result.as_object() {
            Some(task) => (task, Form::Extension),
            None => return None,
        },
        _ => return None,
    };
    Some(checked_task(task, form))
}

/// The server's task object with the fields the gateway relies on checked.
pub fn checked_task(task: &Map<String, Value>, form: Form) -> Result<Created, String> {
    let upstream_id = match task.get("taskId") {
        Some(Value::String(id)) if !id.is_empty() && id.chars().count() <= MAX_ID_CHARS => id.clone(),
        _ => {
            return Err(format!(
                "the server's task has no usable taskId (a string of 1 to {MAX_ID_CHARS} characters)"
            ));
        }
    };
    status_of(task)?;
    let ttl_ms = task.get("ttl").or_else(|| task.get("ttlMs")).and_then(Value::as_u64);
    Ok(Created { upstream_id, ttl_ms, form, task: task.clone() })
}

fn status_of(task: &Map<String, Value>) -> Result<&str, String> {
    match task.get("status").and_then(Value::as_str) {
        Some(status) if STATUSES.contains(&status) => Ok(status),
        _ => Err("the server's task has no known status".into()),
    }
}

/// The status of a server's task object, when it is a known one.
pub fn status(task: &Value) -> Option<&str> {
    task.as_object().and_then(|t| status_of(t).ok())
}

/// A server's task object rebuilt for the caller in `form`, under the gateway's `id`: known
/// fields only, each of the type the schema gives it. Fails on an unknown status.
pub fn task_object(task: &Map<String, Value>, id: &str, form: Form) -> Result<Map<String, Value>, String> {
    let status = status_of(task)?;
    let mut out = Map::new();
    out.insert("taskId".into(), json!(id));
    out.insert("status".into(), json!(status));
    if let Some(message) = task.get("statusMessage").and_then(Value::as_str) {
        out.insert(
            "statusMessage".into(),
            json!(message.chars().take(MAX_STATUS_MESSAGE_CHARS).collect::<String>()),
        );
    }
    for key in ["createdAt", "lastUpdatedAt"] {
        if let Some(Value::String(at)) = task.get(key)
            && at.len() <= 64
        {
            out.insert(key.into(), json!(at));
        }
    }
    let (ttl_key, poll_key) = match form {
        Form::Session => ("ttl", "pollInterval"),
        Form::Extension => ("ttlMs", "pollIntervalMs"),
    };
    match task.get("ttl").or_else(|| task.get("ttlMs")) {
        Some(ttl) if ttl.as_u64().is_some() => {
            out.insert(ttl_key.into(), ttl.clone());
        }
        // Both forms require the member: null is "unlimited".
        _ => {
            out.insert(ttl_key.into(), Value::Null);
        }
    }
    if let Some(poll) =
        task.get("pollInterval").or_else(|| task.get("pollIntervalMs")).filter(|p| p.as_u64().is_some())
    {
        out.insert(poll_key.into(), poll.clone());
    }
    Ok(out)
}

/// The `CreateTaskResult` for the caller, in its form.
pub fn create_result(created: &Created, id: &str, form: Form) -> Result<Value, String> {
    let task = task_object(&created.task, id, form)?;
    Ok(match form {
        Form::Session => json!({"task": task}),
        Form::Extension => {
            let mut result = Map::new();
            result.insert("resultType".into(), json!("task"));
            result.extend(task);
            Value::Object(result)
        }
    })
}

/// A `tasks/result` answer (the request's own result) with the related-task `_meta` naming the
/// gateway's id instead of the server's.
pub fn with_related_task(mut result: Value, id: &str) -> Value {
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut)
        && meta.contains_key(RELATED_TASK)
    {
        meta.insert(RELATED_TASK.into(), json!({"taskId": id}));
    }
    result
}

/// The extension's detailed task (`tasks/get` for a modern caller): the task, and for a
/// terminal one what the session-era server's `tasks/result` answered (`result` for a
/// completed task, the JSON-RPC `error` for a failed one).
pub fn detailed(task: Map<String, Value>, outcome: Option<Result<Value, Value>>) -> Value {
    let mut out = Map::new();
    out.insert("resultType".into(), json!("complete"));
    let input_required = task.get("status").and_then(Value::as_str) == Some("input_required");
    out.extend(task);
    match outcome {
        Some(Ok(result)) => {
            out.insert("result".into(), result);
        }
        Some(Err(error)) => {
            out.insert("error".into(), error);
        }
        None => {}
    }
    if input_required {
        // A session-era server asks on the `tasks/result` stream, which the extension has no
        // place for: no request the gateway could name is outstanding here.
        out.insert("inputRequests".into(), json!({}));
    }
    Value::Object(out)
}

/// The `-32021` error data of a modern caller that did not declare the extension for a tool
/// that can only run as a task.
pub fn required_capabilities() -> Value {
    json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}})
}

/// The `tasks` capability of a session-era `initialize` result.
pub fn session_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_task() -> Value {
        json!({"task": {"taskId": "up-1", "status": "working", "statusMessage": "go",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": 300000, "pollInterval": 1000, "secret": "not passed on"}})
    }

    #[test]
    fn a_create_task_result_of_either_form_is_recognised_and_rebuilt() {
        let created = created(&session_task()).expect("a task").expect("usable");
        assert_eq!(
            (created.upstream_id.as_str(), created.ttl_ms, created.form),
            ("up-1", Some(300000), Form::Session)
        );
        let for_session = create_result(&created, "gw-1", Form::Session).unwrap();
        assert_eq!(for_session["task"]["taskId"], "gw-1");
        assert_eq!(for_session["task"]["ttl"], 300000);
        assert!(for_session["task"].get("secret").is_none(), "unknown fields are not passed on");
        let for_modern = create_result(&created, "gw-1", Form::Extension).unwrap();
        assert_eq!(for_modern["resultType"], "task");
        assert_eq!(
            (for_modern["ttlMs"].clone(), for_modern["pollIntervalMs"].clone()),
            (json!(300000), json!(1000))
        );
        let modern = json!({"resultType": "task", "taskId": "m-1", "status": "working", "ttlMs": null});
        let created = super::created(&modern).unwrap().unwrap();
        assert_eq!((created.form, created.ttl_ms), (Form::Extension, None));
        assert!(super::created(&json!({"content": []})).is_none());
        assert!(super::created(&json!({"task": {"status": "working"}})).unwrap().is_err());
        assert!(super::created(&json!({"task": {"taskId": "x", "status": "sleeping"}})).unwrap().is_err());
    }

    #[test]
    fn the_task_parameter_and_the_extension_are_read_strictly() {
        let params = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            requested(&params(json!({"task": {"ttl": 5000, "x": 1}}))),
            Ok(Some(json!({"ttl": 5000})))
        );
        assert_eq!(requested(&params(json!({"task": {}}))), Ok(Some(json!({}))));
        assert_eq!(requested(&params(json!({}))), Ok(None));
        assert!(requested(&params(json!({"task": {"ttl": -1}}))).is_err());
        assert!(requested(&params(json!({"task": true}))).is_err());
        let declared = json!({"_meta": {CLIENT_CAPABILITIES: {"extensions": {EXTENSION: {}}}}});
        assert!(declares_extension(Some(&declared)));
        assert!(!declares_extension(Some(&json!({"_meta": {CLIENT_CAPABILITIES: {}}}))));
        assert_eq!(task_support(&json!({"execution": {"taskSupport": "required"}})), TaskSupport::Required);
        assert_eq!(task_support(&json!({})), TaskSupport::Forbidden);
        assert!(is_extension_task(r#"{"resultType":"task","taskId":"t","status":"working"}"#));
        assert!(!is_extension_task(r#"{"content":[{"type":"text","text":"a \"task\""}]}"#));
        assert!(!is_extension_task(r#"{"task":{"taskId":"t"}}"#), "the session form is asked for");
        assert!(!is_extension_task(r#"{"resultType":"complete","content":[]}"#));
    }

    #[test]
    fn a_detailed_task_inlines_the_outcome() {
        let task = task_object(session_task()["task"].as_object().unwrap(), "gw", Form::Extension).unwrap();
        let done = detailed(task.clone(), Some(Ok(json!({"content": []}))));
        assert_eq!(
            (done["resultType"].clone(), done["result"].clone()),
            (json!("complete"), json!({"content": []}))
        );
        let mut asking = task;
        asking.insert("status".into(), json!("input_required"));
        assert_eq!(detailed(asking, None)["inputRequests"], json!({}));
        let related =
            with_related_task(json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "up"}}}), "gw");
        assert_eq!(related["_meta"][RELATED_TASK]["taskId"], "gw");
    }
}
