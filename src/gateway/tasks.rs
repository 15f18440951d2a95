//! MCP tasks relayed through the gateway: which server and which caller each task belongs to,
//! and the `tasks/*` methods routed to that server (see `docs/protocol.md#tasks`).
//!
//! Choices:
//! - **The caller gets the gateway's own task id** (`mcpgw-task-` + 128 random bits), never the
//!   server's: the id alone routes back to the owning server, two servers' ids can never
//!   collide, and an anonymous caller's tasks are as hard to guess as a session id whatever
//!   ids the server makes. The table maps it to (server, the server's id, owner, the upstream
//!   session the task lives in); results naming the task are rewritten to the gateway's id.
//! - **Owner** ([`crate::ownership`], the one rule): the identified subject, else the
//!   anonymous caller's gateway session, else nobody. `tasks/list` shows the caller's own
//!   tasks only and never a task that has no owner; a task of nobody is reached by its id alone,
//!   from a caller that owns nothing either. A request for a task of another owner is refused
//!   (`forbidden`, `reason: task_not_owned`).
//! - **Where a task lives**: a task created by a back-channel caller's call over its dedicated
//!   upstream session (`upstream/http/relay.rs`) is only known to that session; its `tasks/*`
//!   go the same way, and `tasks/result` relays what the server asks on its stream
//!   (elicitation of an `input_required` task) to the caller.
//! - **Bounded**: at most `tasks.max_tasks` entries; a slot is reserved before the call goes
//!   upstream, so a full table refuses the call (`overloaded`) before a task exists that the
//!   gateway could not route. An entry lives for the task's `ttl`, capped at
//!   `tasks.max_ttl_ms` (the cap when the server gives none); expired entries are purged
//!   when room is needed and refused like unknown ones.
//! - **Time**: a task outlives the call that created it (that call ends with the
//!   `CreateTaskResult`); `tasks/result` waits for its task within `tasks.result_timeout_ms`
//!   (or the caller's own deadline), not the server's `deadline_ms`/`timeout_ms`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::{Map, Value, json};
use tower::ServiceExt;

use super::outbound::Released;
use super::{Gateway, Upstream};
use crate::{
    backchannel::{CallerSession, Relay, caller::mint_id},
    error::{Category, ErrorObject, GatewayError},
    identity::Caller,
    ownership::Owner,
    protocol::tasks::{self, Created, Form},
    upstream::{UpstreamReply, UpstreamRequest},
};

/// Most pages of an upstream `tasks/list` read for one aggregated answer.
const MAX_LIST_PAGES: usize = 16;

/// One routed task.
pub struct TaskEntry {
    pub upstream: Arc<Upstream>,
    pub upstream_id: String,
    pub owner: Owner,
    /// The caller session whose dedicated upstream session holds the task (`None`: the
    /// gateway's own session with the server).
    pub dedicated: Option<Arc<CallerSession>>,
    /// The server speaks the extension's form (a modern server).
    pub form: Form,
    /// The tool and arguments of the call that created the task, when after-hooks guard its
    /// results: `tasks/result` (and a terminal `tasks/get` that inlines it) passes them.
    pub guard: Option<TaskGuard>,
    /// The tool whose call created the task (the audit line of a result read names it).
    pub tool: Arc<str>,
    expires: Instant,
}

/// What the after-hooks of a task's result need of the call that created it.
pub struct TaskGuard {
    pub tool: Arc<crate::registry::ToolRecord>,
    pub arguments: Value,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Arc<TaskEntry>>,
    reserved: usize,
}

/// The routing table, one per gateway.
pub struct TaskTable {
    table: Mutex<Table>,
    max: usize,
    max_ttl: Duration,
}

/// A slot held for a task-augmented call while it runs; released if no task is recorded.
pub struct Reservation<'a> {
    tasks: &'a TaskTable,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Ok(mut table) = self.tasks.table.lock() {
            table.reserved = table.reserved.saturating_sub(1);
        }
    }
}

impl Reservation<'_> {
    /// Records the created task in the slot; returns the caller's id for it.
    pub fn fill(
        self,
        upstream: Arc<Upstream>,
        created: &Created,
        owner: Owner,
        dedicated: Option<Arc<CallerSession>>,
        guard: Option<TaskGuard>,
        tool: Arc<str>,
    ) -> String {
        let id = mint_id("task");
        let ttl = created.ttl_ms.map_or(self.tasks.max_ttl, Duration::from_millis).min(self.tasks.max_ttl);
        let entry = TaskEntry {
            upstream,
            upstream_id: created.upstream_id.clone(),
            owner,
            dedicated,
            form: created.form,
            guard,
            tool,
            expires: crate::clock::after(ttl),
        };
        if let Ok(mut table) = self.tasks.table.lock() {
            table.entries.insert(id.clone(), Arc::new(entry));
        }
        id
    }
}

impl TaskTable {
    pub fn new(settings: &crate::config::TasksConfig) -> Self {
        Self { table: Mutex::default(), max: settings.max_tasks, max_ttl: settings.max_ttl() }
    }

    /// Entries routed now (expired ones not yet purged included).
    pub fn len(&self) -> usize {
        self.table.lock().map(|t| t.entries.len()).unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A slot for one more task, or `overloaded` when the table is full of live tasks.
    pub fn reserve(&self) -> Result<Reservation<'_>, GatewayError> {
        let Ok(mut table) = self.table.lock() else {
            return Err(GatewayError::new(Category::Internal, "the task table is unavailable"));
        };
        if table.entries.len() + table.reserved >= self.max {
            let now = Instant::now();
            table.entries.retain(|_, entry| entry.expires > now);
        }
        if table.entries.len() + table.reserved >= self.max {
            return Err(GatewayError::new(
                Category::Overloaded,
                format!(
                    "the gateway routes at most {} tasks at once; try again when some have ended",
                    self.max
                ),
            )
            .with_limit("tasks.max_tasks", self.max as u64));
        }
        table.reserved += 1;
        Ok(Reservation { tasks: self })
    }

    /// The task `id` when `owner` may use it.
    pub fn lookup(&self, id: &str, owner: &Owner) -> Result<Arc<TaskEntry>, GatewayError> {
        let entry = self
            .table
            .lock()
            .ok()
            .and_then(|t| t.entries.get(id).cloned())
            .filter(|entry| entry.expires > Instant::now());
        match entry {
            Some(entry) if owner.may_use_by_id(&entry.owner) => Ok(entry),
            Some(_) => Err(GatewayError::new(Category::Forbidden, "this task belongs to another caller")
                .with_extra("reason", json!("task_not_owned"))),
            None => Err(GatewayError::new(
                Category::BadInput,
                "no task of the gateway has this id (unknown, or expired)",
            )
            .with_extra("reason", json!("unknown_task"))),
        }
    }

    /// `owner`'s live tasks (none for [`Owner::Nobody`]: what has no owner is never listed).
    fn owned_by(&self, owner: &Owner) -> Vec<(String, Arc<TaskEntry>)> {
        let now = Instant::now();
        self.table
            .lock()
            .map(|t| {
                t.entries
                    .iter()
                    .filter(|(_, e)| owner.may_access(&e.owner) && e.expires > now)
                    .map(|(id, e)| (id.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What a `tasks/*` request brings besides its params.
pub struct TaskCall {
    /// The inbound request's id (the audit line of a result read).
    pub request_id: Arc<str>,
    pub owner: Owner,
    /// The caller speaks the modern era (answers take the extension's form).
    pub modern: bool,
    /// The caller's own deadline, if it set one.
    pub deadline: Option<Instant>,
    /// The way back to a back-channel caller reading an event stream (`tasks/result`).
    pub relay: Option<Relay>,
    pub caller: Arc<Caller>,
}

/// One answer of the server: its result, or its own JSON-RPC error.
type Answered = Result<Value, ErrorObject>;

impl Gateway {
    /// The task table (task-augmented calls record their tasks here).
    pub fn tasks(&self) -> &TaskTable {
        &self.tasks
    }

    /// Whether some tool of the catalogue can run as a task (the gateway then advertises tasks).
    pub fn offers_tasks(&self) -> bool {
        self.catalog()
            .snapshot()
            .tools()
            .iter()
            .any(|t| tasks::task_support(t.definition.head()) != tasks::TaskSupport::Forbidden)
    }

    /// Answers `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` or `tasks/update`.
    pub async fn task_method(
        &self,
        method: &str,
        params: Option<Value>,
        call: TaskCall,
    ) -> Result<Released<Value>, GatewayError> {
        let params = match params {
            Some(Value::Object(map)) => map,
            None => Map::new(),
            Some(_) => return Err(GatewayError::new(Category::BadInput, "params must be an object")),
        };
        if method == "tasks/list" {
            return self.list_tasks(&params, &call).await.map(Released::gateways_own);
        }
        let Some(id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(GatewayError::new(Category::BadInput, "params.taskId must be a string"));
        };
        if let Some(answer) = self.approval_task_method(method, id, &call).await {
            return answer;
        }
        let entry = self.tasks.lookup(id, &call.owner)?;
        let caller_form = if call.modern { Form::Extension } else { Form::Session };
        let answer = match method {
            "tasks/get" => {
                let task = self.send(&entry, "tasks/get", &params, &call, false).await?;
                // A modern server inlines a terminal task's outcome: kept aside, it reaches
                // a modern caller through the creating call's after-hooks, as a result read
                // with `tasks/result` does (the task object itself is rebuilt below).
                let inlined = match (&task, entry.form) {
                    (Ok(answer), Form::Extension) if call.modern => tasks::inlined_outcome(answer),
                    _ => None,
                };
                let task = self.task_answer(task, id, caller_form, &entry)?;
                if let Some(read) = inlined {
                    let released = self.release_task_result(&entry, &call, read, Instant::now()).await;
                    let outcome = released
                        .map(|r| tasks::with_related_task(Released::into_inner(r), id))
                        .map_err(|e| serde_json::to_value(e.to_error_object()).unwrap_or_default());
                    return Ok(Released::gateways_own(tasks::detailed(task, Some(outcome))));
                }
                if call.modern && entry.form == Form::Session {
                    // The extension inlines a terminal task's outcome; a session-era server
                    // gives it from `tasks/result` (which no longer blocks once it has ended).
                    let outcome = match tasks::status(&Value::Object(task.clone())) {
                        Some("completed" | "failed") => {
                            let started = Instant::now();
                            match self.send(&entry, "tasks/result", &params, &call, true).await? {
                                Ok(result) => {
                                    let released =
                                        self.release_task_result(&entry, &call, Ok(result), started);
                                    Some(
                                        released
                                            .await
                                            .map(Released::into_inner)
                                            .map_err(|e| e.to_error_object()),
                                    )
                                }
                                Err(error) => Some(Err(error)),
                            }
                        }
                        _ => None,
                    };
                    let outcome = outcome.map(|o| {
                        o.map(|r| tasks::with_related_task(r, id))
                            .map_err(|e| serde_json::to_value(&e).unwrap_or_default())
                    });
                    return Ok(Released::gateways_own(tasks::detailed(task, outcome)));
                }
                if call.modern {
                    return Ok(Released::gateways_own(Value::Object(with_complete(task))));
                }
                Value::Object(task)
            }
            "tasks/cancel" => {
                let task = self.send(&entry, "tasks/cancel", &params, &call, false).await?;
                if call.modern {
                    // The extension's acknowledgement is empty.
                    task.map_err(|e| upstream_error(e, &entry))?;
                    return Ok(Released::gateways_own(json!({"resultType": "complete"})));
                }
                Value::Object(self.task_answer(task, id, caller_form, &entry)?)
            }
            "tasks/result" => {
                let started = Instant::now();
                let read = self.send(&entry, "tasks/result", &params, &call, true).await?;
                let released = self.release_task_result(&entry, &call, read, started).await?;
                let modern = call.modern;
                return Ok(released.envelope(|result| {
                    let result = tasks::with_related_task(result, id);
                    if modern { with_result_type(result) } else { result }
                }));
            }
            "tasks/update" if entry.form == Form::Extension => {
                let answer = self.send(&entry, "tasks/update", &params, &call, false).await?;
                answer.map_err(|e| upstream_error(e, &entry))?;
                json!({"resultType": "complete"})
            }
            // A session-era server's task never surfaced `inputRequests` keys through the
            // gateway, and the extension asks a server to ignore responses to keys it never
            // issued: acknowledged, as the extension asks.
            "tasks/update" => json!({"resultType": "complete"}),
            other => {
                return Err(GatewayError::new(
                    Category::MethodNotFound,
                    other.chars().take(64).collect::<String>(),
                ));
            }
        };
        Ok(Released::gateways_own(answer))
    }

    /// A task's result, read from its server, through the outbound step: the after-hooks of
    /// the call that created it (an upstream error through `release_error`), and one audit line
    /// for the read (`method: "tasks/result"`, the creating call's tool, the hooks' decisions).
    async fn release_task_result(
        &self,
        entry: &TaskEntry,
        call: &TaskCall,
        read: Answered,
        started: Instant,
    ) -> Result<Released<Value>, GatewayError> {
        let settings = self.settings();
        let server = entry.upstream.name.clone();
        let (released, marks) = match read {
            Ok(result) => match self.guard_task_result(entry.guard.as_ref(), call, result).await {
                Ok((result, marks)) => (Ok(Self::released_task_result(result)), marks),
                Err(err) => (Err(err), Vec::new()),
            },
            Err(error) => (
                Err(self.release_error(&settings, &entry.tool, &server, upstream_error(error, entry))),
                Vec::new(),
            ),
        };
        let outcome = match &released {
            Ok(_) => "success",
            Err(err) => err.category.as_str(),
        };
        if let Some(audit) = &self.audit {
            let entry = crate::audit::AuditEntry {
                at: std::time::SystemTime::now(),
                request_id: call.request_id.clone(),
                trace_id: crate::telemetry::otel::log_trace_id(),
                subject: call.caller.subject.clone(),
                method: Some("tasks/result"),
                tool: Some(entry.tool.clone()),
                requested_tool: None,
                server: Some(server.clone()),
                endpoint: call.caller.endpoint.clone(),
                decision: crate::audit::Decision::no_policy(),
                outcome,
                args_sha256: None,
                latency_us: started.elapsed().as_micros() as u64,
                guardrails: marks,
            };
            let audit = audit.clone();
            crate::telemetry::after_answer::defer(move || {
                audit.write(&entry);
            });
        }
        released.map_err(|e| e.with_server(server))
    }

    /// A task object the server answered, rebuilt for the caller under the gateway's id.
    fn task_answer(
        &self,
        answered: Answered,
        id: &str,
        form: Form,
        entry: &TaskEntry,
    ) -> Result<Map<String, Value>, GatewayError> {
        let settings = self.settings();
        let server = &entry.upstream.name;
        let task = answered
            .map_err(|e| self.release_error(&settings, &entry.tool, server, upstream_error(e, entry)))?;
        let Some(task) = task.as_object() else {
            return Err(protocol_error("the server's task is not an object", entry));
        };
        let mut task = tasks::task_object(task, id, form).map_err(|reason| protocol_error(&reason, entry))?;
        // The server's own words about the task pass the outbound step.
        self.screen_status(&settings, &entry.tool, server, &mut task);
        Ok(task)
    }

    /// `tasks/list`: the caller's own tasks, from every server holding one, in one page.
    async fn list_tasks(&self, params: &Map<String, Value>, call: &TaskCall) -> Result<Value, GatewayError> {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(GatewayError::new(
                Category::BadInput,
                "the gateway lists every task of the caller in one page; it issues no cursor",
            ));
        }
        let owned = self.tasks.owned_by(&call.owner);
        // One upstream listing per place tasks live (server × the upstream session).
        let mut places: Vec<(Arc<TaskEntry>, HashMap<String, String>)> = Vec::new();
        // The tool that created each task: its after-hooks screen the task's status.
        let settings = self.settings();
        let tools: HashMap<String, Arc<str>> =
            owned.iter().map(|(id, entry)| (id.clone(), entry.tool.clone())).collect();
        let screened = |mut task: Map<String, Value>, server: &str| {
            let tool = task.get("taskId").and_then(Value::as_str).and_then(|id| tools.get(id)).cloned();
            if let Some(tool) = tool {
                self.screen_status(&settings, &tool, server, &mut task);
            }
            Value::Object(task)
        };
        for (id, entry) in owned {
            let same = places.iter_mut().find(|(e, _)| {
                Arc::ptr_eq(&e.upstream, &entry.upstream)
                    && match (&e.dedicated, &entry.dedicated) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    }
            });
            match same {
                Some((_, ids)) => {
                    ids.insert(entry.upstream_id.clone(), id);
                }
                None => {
                    let ids = HashMap::from([(entry.upstream_id.clone(), id)]);
                    places.push((entry, ids));
                }
            }
        }
        let form = if call.modern { Form::Extension } else { Form::Session };
        let mut listed = Vec::new();
        for (entry, ids) in places {
            if entry.form == Form::Extension {
                // The extension has no tasks/list: each task is asked for on its own.
                for (upstream_id, id) in &ids {
                    let mut one = Map::new();
                    one.insert("taskId".into(), json!(upstream_id));
                    if let Ok(Ok(task)) = self.send(&entry, "tasks/get", &one, call, false).await
                        && let Some(task) = task.as_object()
                        && let Ok(task) = tasks::task_object(task, id, form)
                    {
                        listed.push(screened(task, &entry.upstream.name));
                    }
                }
                continue;
            }
            let mut cursor: Option<Value> = None;
            for _ in 0..MAX_LIST_PAGES {
                let mut page_params = Map::new();
                if let Some(cursor) = cursor.take() {
                    page_params.insert("cursor".into(), cursor);
                }
                let page = self.send(&entry, "tasks/list", &page_params, call, false).await?;
                let page = page.map_err(|e| upstream_error(e, &entry))?;
                for task in page.get("tasks").and_then(Value::as_array).into_iter().flatten() {
                    let Some(task) = task.as_object() else { continue };
                    let Some(id) = task.get("taskId").and_then(Value::as_str).and_then(|t| ids.get(t)) else {
                        // Another caller's task on the same upstream session: not this caller's.
                        continue;
                    };
                    if let Ok(task) = tasks::task_object(task, id, form) {
                        listed.push(screened(task, &entry.upstream.name));
                    }
                }
                match page.get("nextCursor") {
                    Some(next @ Value::String(_)) => cursor = Some(next.clone()),
                    _ => break,
                }
            }
        }
        listed.sort_by(|a, b| a["taskId"].as_str().cmp(&b["taskId"].as_str()));
        let mut result = json!({"tasks": listed});
        if call.modern {
            result["resultType"] = json!("complete");
        }
        Ok(result)
    }

    /// Sends one `tasks/*` request for `entry`'s task through its server's stack, over the
    /// upstream session the task lives in. `waits`: a `tasks/result`, bounded by
    /// `tasks.result_timeout_ms` (or the caller's deadline) instead of the server's clocks.
    async fn send(
        &self,
        entry: &TaskEntry,
        method: &'static str,
        params: &Map<String, Value>,
        call: &TaskCall,
        waits: bool,
    ) -> Result<Answered, GatewayError> {
        let mut upstream_params = Map::new();
        if method != "tasks/list" {
            upstream_params.insert("taskId".into(), json!(entry.upstream_id));
        }
        if let Some(cursor) = params.get("cursor") {
            upstream_params.insert("cursor".into(), cursor.clone());
        }
        if let Some(responses) = params.get("inputResponses") {
            upstream_params.insert("inputResponses".into(), responses.clone());
        }
        let forwarded = super::forwarded_meta::forwarded_meta(params.get("_meta"));
        if !forwarded.is_empty() {
            upstream_params.insert("_meta".into(), Value::Object(forwarded));
        }
        let mut request = UpstreamRequest::new(method, upstream_params);
        if entry.form == Form::Extension && method != "tasks/list" {
            // The extension routes task requests by `Mcp-Name: <taskId>`.
            request.tool = Some(entry.upstream_id.as_str().into());
        }
        request.caller = Some(call.caller.clone());
        if waits {
            let bound = self.settings().config.tasks.result_timeout();
            let deadline = call.deadline.unwrap_or_else(|| crate::clock::after(bound));
            request.deadline = Some(deadline);
            request.attempt_timeout = Some(deadline.saturating_duration_since(Instant::now()));
        } else {
            request.deadline = call.deadline;
        }
        // The task lives in the caller's dedicated upstream session: its requests go there, and
        // what the server asks meanwhile goes to the caller's stream when it reads one (else the
        // caller cannot be asked: a closed way back answers "did not answer").
        request.relay = entry.dedicated.as_ref().map(|session| match &call.relay {
            Some(relay) if Arc::ptr_eq(&relay.caller, session) => relay.clone(),
            _ => {
                let (closed, _) = crate::backchannel::progress_channel();
                Relay::new(session.clone(), closed)
            }
        });
        let result = entry.upstream.service.clone().oneshot(request).await;
        match result {
            Ok(UpstreamReply::Result(raw)) => {
                let value: Value = serde_json::from_str(raw.get())
                    .map_err(|e| protocol_error(&format!("the server's answer is not JSON: {e}"), entry))?;
                Ok(Ok(value))
            }
            Ok(UpstreamReply::Error(error)) => Ok(Err(error)),
            Err(error) => Err(GatewayError::from_upstream(&error).with_server(entry.upstream.name.clone())),
        }
    }

    /// After a task-augmented `tools/call` answered: records the task it created (filling
    /// `slot`) and rewrites the answer for the caller. A result that created no task is passed
    /// on as it is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_task(
        &self,
        slot: Reservation<'_>,
        raw: Box<serde_json::value::RawValue>,
        upstream: Arc<Upstream>,
        owner: Owner,
        dedicated: Option<Arc<CallerSession>>,
        caller_form: Form,
        guard: Option<TaskGuard>,
        tool: Arc<str>,
    ) -> Result<Box<serde_json::value::RawValue>, GatewayError> {
        let Ok(value) = serde_json::from_str::<Value>(raw.get()) else { return Ok(raw) };
        let created = match tasks::created(&value) {
            None => return Ok(raw),
            Some(Ok(created)) => created,
            Some(Err(reason)) => {
                return Err(
                    GatewayError::new(Category::UpstreamProtocol, reason).with_server(upstream.name.clone())
                );
            }
        };
        let server = upstream.name.clone();
        let id = slot.fill(upstream, &created, owner, dedicated, guard, tool);
        // The id is a bearer of access for anonymous callers: logged as a tag, like session ids.
        tracing::info!(server = %server, task = %crate::redact::session_tag(&id), "task created");
        let answer = tasks::create_result(&created, &id, caller_form)
            .map_err(|reason| GatewayError::new(Category::UpstreamProtocol, reason).with_server(server))?;
        serde_json::value::to_raw_value(&answer)
            .map_err(|e| GatewayError::new(Category::Internal, format!("serializing the task: {e}")))
    }
}

/// The server's own error about a task, passed on as its answer.
fn upstream_error(error: ErrorObject, entry: &TaskEntry) -> GatewayError {
    GatewayError::from_upstream_reply(error, false).with_server(entry.upstream.name.clone())
}

fn protocol_error(reason: &str, entry: &TaskEntry) -> GatewayError {
    GatewayError::new(Category::UpstreamProtocol, reason.to_string()).with_server(entry.upstream.name.clone())
}

fn with_complete(mut task: Map<String, Value>) -> Map<String, Value> {
    task.insert("resultType".into(), json!("complete"));
    task
}

fn with_result_type(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut()
        && !object.contains_key("resultType")
    {
        object.insert("resultType".into(), json!("complete"));
    }
    result
}

/// The after-hooks of a task's result live with the task: the guard (`guard.rs`) knows no task.
impl Gateway {
    /// A task's result (`tasks/result`) through the after-hooks of the call that created the
    /// task, for the caller reading it (none guard it: as it is).
    pub(super) async fn guard_task_result(
        &self,
        guard: Option<&TaskGuard>,
        call: &TaskCall,
        result: Value,
    ) -> Result<(Value, Vec<crate::guardrail::Mark>), GatewayError> {
        let Some(guard) = guard else { return Ok((result, Vec::new())) };
        let mut marks = Vec::new();
        let (subject, arguments) = (super::guard::Subject::tool(&guard.tool), &guard.arguments);
        let check =
            |replacement: Value| crate::guardrail::contract::check_result(&replacement).map(|()| replacement);
        let settings = self.settings();
        let (result, _) = self
            .guard_value(
                &settings,
                &call.caller,
                &subject,
                arguments,
                result,
                call.deadline,
                &mut marks,
                check,
            )
            .await?;
        Ok((result, marks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: usize) -> TaskTable {
        TaskTable::new(&crate::config::TasksConfig { max_tasks: max, ..Default::default() })
    }

    #[test]
    fn a_full_table_refuses_a_reservation_and_a_dropped_one_makes_room() {
        let tasks = table(1);
        let first = tasks.reserve().expect("room for one");
        let refused = tasks.reserve().err().expect("full");
        assert_eq!(refused.category, Category::Overloaded);
        drop(first);
        assert!(tasks.reserve().is_ok(), "a reservation that recorded nothing is released");
    }

    #[test]
    fn an_unknown_id_is_refused_precisely() {
        let tasks = table(4);
        let refused = tasks.lookup("mcpgw-task-nope", &Owner::Nobody).err().unwrap();
        assert_eq!(refused.category, Category::BadInput);
    }
}
