//! The outbound step: the mirror of the door (`door.rs`). Every piece of upstream data that
//! reaches a caller passes here before it is written — a `tools/call` result of any
//! `resultType`, a task's result, the contents of `resources/read`, the messages of
//! `prompts/get`, the values of `completion/complete`, the progress, log entries and relayed
//! server→client requests of a call, and an upstream's own JSON-RPC error message. Here they
//! meet the after-hooks that match them (`[[hooks]]`, built-in and MCP-tool hooks:
//! `gateway/guard.rs` runs them), the checks of their kind, and then the audit line.
//!
//! What passes is a [`Released`] answer, and a `Released` is the only thing the gateway's
//! answering methods (`call_tool`, `surface_method`, `task_method`) give the writer
//! (`server/dispatch.rs`). Its one constructor is private to this module, as `Admitted`'s is to
//! the door: a new path that answers a caller with upstream data cannot skip the step without
//! the type system noticing. The items of a caller's event stream cannot skip it either: they
//! travel on the call's [`ProgressSink`], which the step screens ([`CallScreen`]) when an
//! after-hook matches the call.
//!
//! Answers the gateway composes itself (a list page of the federation index, a task's status
//! rebuilt from checked fields, an acknowledgement, `search_tools`' matches) are released as
//! such by named constructors, so each is visible where it is made. Errors are not a type of
//! their own: `release_error` is called where an upstream error becomes the caller's.
//!
//! Cheap when no hook is configured: nothing is parsed, copied or wrapped (`has_hooks`); the
//! one check on every result is the `resultType` rule (`mrtr::is_complete`: a byte search, no
//! parse for a result saying `complete`).
//!
//! The rules, in the order they apply:
//! - a tool result whose `resultType` is not `complete` passes the hooks only as a well-formed
//!   `input_required` (a question, no result: only its requests' params meet the built-in
//!   redactors, as a relayed request's do); any other
//!   `resultType` is `upstream_protocol` — a server cannot opt out of the hooks by naming a
//!   result type of its own;
//! - the after-hooks that match the item (by tool, prompt name or resource URI and server);
//!   a hook tool's replacement must be a well-formed item of its kind (and is fitted again);
//! - an error's message and `data`, when after-hooks match the call: the built-in redactors
//!   run on them; with an MCP-tool hook among them (no hook call is made for an error) an
//!   upstream JSON-RPC error's message is replaced by a fixed text and its data withheld;
//! - a task's `statusMessage` (`tasks/get`, `tasks/list`, `tasks/cancel`): as an error message is;
//! - progress messages, log data and relayed requests' params of a call with after-hooks: the
//!   built-in redactors run on each; an MCP-tool hook is not called per item, so while one
//!   matches, progress goes without its message and log entries are not relayed (a relayed
//!   request still goes, redacted by the built-in hooks: the server waits for its answer).

use std::sync::Arc;

use serde_json::{Value, json, value::RawValue};

use super::{Gateway, guard::Subject, settings::Settings};
use crate::{
    backchannel::{Notifications, ProgressSink, Screen, ToCaller},
    config::hooks::{BuiltinRule, HookPhase},
    error::{Category, GatewayError},
    guardrail::{HookKind, Mark, contract::ItemKind},
    identity::Caller,
    protocol::mrtr,
};

/// An answer that passed the outbound step, ready for the writer. Only this module makes one.
#[derive(Debug)]
pub struct Released<T>(T);

impl<T> Released<T> {
    /// The answer, for the writer.
    pub fn into_inner(self) -> T {
        self.0
    }

    /// The gateway's own envelope around a released answer (its `resultType`, cache hints,
    /// related-task `_meta`): what the step let through stays what it is.
    pub(super) fn envelope(self, f: impl FnOnce(T) -> T) -> Self {
        Self(f(self.0))
    }
}

impl Released<Value> {
    /// An answer the gateway composes itself, carrying no upstream item: a list page of the
    /// federation index (checked when it was built), a task's status rebuilt from its checked
    /// fields, an acknowledgement.
    pub(super) fn gateways_own(value: Value) -> Self {
        Self(value)
    }

    /// A `skills/get` answer rebuilt from the checked fields of the server's entry (its URI,
    /// frontmatter and manifest, digests untouched): catalogue data, as a list entry is. The
    /// skill's files — `SKILL.md` first — reach a caller through `resources/read`, where they
    /// meet the after-hooks as resource content (`federation/skills.rs`).
    pub(super) fn skill_entry(value: Value) -> Self {
        Self(value)
    }
}

impl Released<Box<RawValue>> {
    /// A result the gateway answered itself before any server: `search_tools`' matches.
    pub(super) fn search_answer(raw: Box<RawValue>) -> Self {
        Self(raw)
    }
}

impl Gateway {
    /// A tool call's result through the step: the `resultType` rule, then the after-hooks of
    /// `tool` (their decisions appended to `marks`). A task's creation (`task`) is the task
    /// table's, not a result. `None` hooks configured: the result as it is, after the rule.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn release_result(
        &self,
        settings: &Settings,
        caller: &Caller,
        tool: &crate::registry::ToolRecord,
        arguments: &Value,
        raw: Box<RawValue>,
        task: bool,
        deadline: Option<std::time::Instant>,
        marks: &mut Vec<Mark>,
    ) -> Result<Box<RawValue>, GatewayError> {
        if task {
            return Ok(raw);
        }
        match mrtr::Questions::of(&raw) {
            None => {}
            Some(Ok(_)) if settings.has_hooks() => return Ok(self.release_questions(settings, tool, raw)),
            Some(Ok(_)) => return Ok(raw),
            Some(Err(reason)) => {
                return Err(GatewayError::new(
                    Category::UpstreamProtocol,
                    format!(
                        "the server's tools/call result is neither complete nor a well-formed question: {reason}"
                    ),
                ));
            }
        }
        if !settings.has_hooks() {
            return Ok(raw);
        }
        // Boxed: the hooks' future is large and taken only when hooks are configured; inline,
        // it would grow every call's future.
        Box::pin(self.guard_result(settings, caller, tool, arguments, raw, deadline, marks)).await
    }

    /// A well-formed `input_required`: not a result (no hook decides on it), but what it asks
    /// the caller is the server's words, as a relayed request's are — every string of each
    /// `inputRequests` entry's `params` passes the built-in redactors of the tool's after-hooks.
    fn release_questions(
        &self,
        settings: &Settings,
        tool: &crate::registry::ToolRecord,
        raw: Box<RawValue>,
    ) -> Box<RawValue> {
        let mut redactors = settings.hooks.matching(HookPhase::After, &tool.name, &tool.server).filter_map(
            |hook| match &hook.kind {
                HookKind::Builtin { rule: BuiltinRule::Redact, detectors } => Some(detectors),
                _ => None,
            },
        );
        let Some(first) = redactors.next() else { return raw };
        let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return raw };
        let mut changed = false;
        if let Some(Value::Object(asked)) = result.get_mut("inputRequests") {
            for detectors in std::iter::once(first).chain(redactors) {
                for request in asked.values_mut() {
                    if let Some(params) = request.get_mut("params") {
                        changed |= detectors.redact_in(params);
                    }
                }
            }
        }
        if !changed {
            return raw;
        }
        serde_json::value::to_raw_value(&result).unwrap_or(raw)
    }

    /// A federated item (`resources/read`, `prompts/get`, `completion/complete`), checked by
    /// `check` as it came, through the after-hooks of `subject`; a hook's replacement passes
    /// `check` again.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn release_item(
        &self,
        settings: &Settings,
        caller: &Caller,
        subject: &Subject<'_>,
        arguments: &Value,
        item: Value,
        deadline: Option<std::time::Instant>,
        marks: &mut Vec<Mark>,
        check: impl Fn(Value) -> Result<Value, GatewayError>,
    ) -> Result<Released<Value>, GatewayError> {
        let item = check(item)?;
        if !settings.has_hooks()
            || settings.hooks.matching(HookPhase::After, subject.name, subject.server).next().is_none()
        {
            return Ok(Released(item));
        }
        let recheck = |replacement: Value| check(replacement).map_err(|e| e.detail);
        let apps = AppsUi::of(&item);
        let (mut item, _) =
            self.guard_value(settings, caller, subject, arguments, item, deadline, marks, recheck).await?;
        apps.restore(&mut item);
        Ok(Released(item))
    }

    /// A tool call's result that passed [`Self::release_result`] and the size budget.
    pub(super) fn released_result(raw: Box<RawValue>) -> Released<Box<RawValue>> {
        Released(raw)
    }

    /// A task's result through the after-hooks of the call that created it (done by
    /// `tasks.rs` with the creating call's tool and arguments).
    pub(super) fn released_task_result(value: Value) -> Released<Value> {
        Released(value)
    }

    /// An error for the caller through the after-hooks that match `name` on `server`: the
    /// built-in redactors on its message and data (an upstream's own JSON-RPC error carries the
    /// server's words in both; a Lambda function's error message, a protocol error's detail may
    /// quote it); with an MCP-tool hook among them, an upstream JSON-RPC error's message is
    /// replaced by a fixed text and its data withheld.
    pub(super) fn release_error(
        &self,
        settings: &Settings,
        name: &str,
        server: &str,
        mut error: GatewayError,
    ) -> GatewayError {
        if !settings.has_hooks() {
            return error;
        }
        for hook in settings.hooks.matching(HookPhase::After, name, server) {
            match &hook.kind {
                HookKind::Builtin { rule: BuiltinRule::Redact, detectors } => {
                    if let Some(redacted) = detectors.redact(&error.detail) {
                        error.detail = redacted;
                    }
                    if let Some(extra) = error.extra.as_mut() {
                        detectors.redact_in(&mut extra.1);
                    }
                }
                HookKind::Builtin { .. } => {}
                HookKind::Tool { .. } if error.upstream_code.is_some() => {
                    error.detail = format!(
                        "the server answered JSON-RPC error {} (its message is withheld: guardrail {} guards this server's answers)",
                        error.upstream_code.unwrap_or_default(),
                        hook.name
                    );
                    error.extra = None;
                    return error;
                }
                HookKind::Tool { .. } => {}
            }
        }
        error
    }

    /// A task object's `statusMessage` (the server's words) through the after-hooks of the
    /// tool that created the task: built-in redactors; with an MCP-tool hook among them
    /// (no hook call is made for a status), the message is dropped.
    pub(super) fn screen_status(
        &self,
        settings: &Settings,
        name: &str,
        server: &str,
        task: &mut serde_json::Map<String, Value>,
    ) {
        if !settings.has_hooks() || !task.contains_key("statusMessage") {
            return;
        }
        for hook in settings.hooks.matching(HookPhase::After, name, server) {
            match &hook.kind {
                HookKind::Builtin { rule: BuiltinRule::Redact, detectors } => {
                    if let Some(message) = task.get_mut("statusMessage") {
                        detectors.redact_in(message);
                    }
                }
                HookKind::Builtin { .. } => {}
                HookKind::Tool { .. } => {
                    task.remove("statusMessage");
                    return;
                }
            }
        }
    }

    /// `notifications` with every sink screened by the after-hooks of `name` on `server`
    /// ([`CallScreen`]); as they are when none matches.
    pub(super) fn screened_notifications(
        &self,
        settings: &Arc<Settings>,
        name: &str,
        server: &str,
        notifications: &Notifications,
    ) -> Option<Notifications> {
        if !settings.has_hooks() || settings.hooks.matching(HookPhase::After, name, server).next().is_none() {
            return None;
        }
        if notifications.progress.is_none() && notifications.logs.is_none() && notifications.relay.is_none() {
            return None;
        }
        let screen: Arc<Box<dyn Screen>> = Arc::new(Box::new(CallScreen {
            settings: settings.clone(),
            name: Arc::from(name),
            server: Arc::from(server),
        }));
        let screened = |sink: &ProgressSink| sink.with_screen(screen.clone());
        let mut notifications = notifications.clone();
        notifications.progress = notifications.progress.as_ref().map(screened);
        if let Some(logs) = notifications.logs.as_mut() {
            logs.sink = screened(&logs.sink);
        }
        if let Some(relay) = notifications.relay.as_mut() {
            relay.outbox = screened(&relay.outbox);
        }
        Some(notifications)
    }
}

/// The outbound step of the items on a call's event stream: the after-hooks of the call's tool.
struct CallScreen {
    settings: Arc<Settings>,
    name: Arc<str>,
    server: Arc<str>,
}

impl Screen for CallScreen {
    fn screen(&self, mut item: ToCaller) -> Option<ToCaller> {
        for hook in self.settings.hooks.matching(HookPhase::After, &self.name, &self.server) {
            match (&hook.kind, &mut item) {
                (HookKind::Builtin { rule: BuiltinRule::Redact, detectors }, item) => match item {
                    ToCaller::Progress(update) => {
                        if let Some(message) = update.message_mut()
                            && let Some(redacted) = detectors.redact(message)
                        {
                            *message = redacted;
                        }
                    }
                    ToCaller::Log(entry) => {
                        detectors.redact_in(entry.data_mut());
                    }
                    ToCaller::Request(request) => {
                        if let Some(params) = request.params_mut() {
                            detectors.redact_in(params);
                        }
                    }
                },
                (HookKind::Builtin { .. }, _) => {}
                (HookKind::Tool { .. }, ToCaller::Progress(update)) => *update.message_mut() = None,
                (HookKind::Tool { .. }, ToCaller::Log(_)) => return None,
                (HookKind::Tool { .. }, ToCaller::Request(_)) => {}
            }
        }
        Some(item)
    }
}

/// The `prompts/get` and `completion/complete` arguments a before-hook sees, and what its
/// replacement may be ([`crate::guardrail::contract::check_item_arguments`]).
pub(super) fn item_arguments(kind: ItemKind, params: &serde_json::Map<String, Value>) -> Value {
    match kind {
        ItemKind::Prompt => params.get("arguments").cloned().unwrap_or_else(|| json!({})),
        ItemKind::Completion => {
            let mut arguments = json!({"argument": params.get("argument").cloned().unwrap_or(Value::Null)});
            if let Some(context) = params.get("context") {
                arguments["context"] = context.clone();
            }
            arguments
        }
        ItemKind::Tool | ItemKind::Resource => json!({}),
    }
}

/// What frames an MCP App (`_meta.ui` of each `resources/read` content: its CSP, permissions,
/// domain) is the server's: an after-hook may redact or replace the HTML, never widen what the
/// host enforces around it. Kept by content URI before the hooks run, put back after them; a
/// content a hook added under another URI gets no `_meta.ui`.
struct AppsUi(Vec<(Value, Option<Value>)>);

impl AppsUi {
    fn of(item: &Value) -> Self {
        let contents = item.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        Self(
            contents
                .iter()
                .filter_map(|c| {
                    Some((c.get("uri")?.clone(), c.get("_meta").and_then(|m| m.get("ui")).cloned()))
                })
                .collect(),
        )
    }

    fn restore(&self, item: &mut Value) {
        let Some(contents) = item.get_mut("contents").and_then(Value::as_array_mut) else { return };
        for content in contents.iter_mut().filter_map(Value::as_object_mut) {
            let kept = content
                .get("uri")
                .and_then(|uri| self.0.iter().find(|(u, _)| u == uri))
                .and_then(|(_, ui)| ui.clone());
            let meta = content.get_mut("_meta").and_then(Value::as_object_mut);
            match (kept, meta) {
                (Some(ui), Some(meta)) => {
                    meta.insert("ui".into(), ui);
                }
                (Some(ui), None) => {
                    content.insert("_meta".into(), serde_json::json!({"ui": ui}));
                }
                (None, Some(meta)) => {
                    meta.remove("ui");
                }
                (None, None) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_page_keeps_the_servers_frame() {
        let server = json!({"contents": [{"uri": "ui://a/app.html", "text": "<p>server</p>",
            "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example"]}}, "other": 1}}]});
        let apps = AppsUi::of(&server);
        let mut replaced = json!({"contents": [
            {"uri": "ui://a/app.html", "text": "<p>hook</p>", "_meta": {"ui": {"csp": {"connectDomains": ["*"]}}}},
            {"uri": "ui://a/extra.html", "text": "<p>added</p>", "_meta": {"ui": {"permissions": {"camera": {}}}}},
            {"uri": "ui://a/bare.html", "text": "<p>bare</p>"}]});
        apps.restore(&mut replaced);
        assert_eq!(replaced["contents"][0]["text"], "<p>hook</p>");
        assert_eq!(replaced["contents"][0]["_meta"]["ui"], server["contents"][0]["_meta"]["ui"]);
        assert!(replaced["contents"][1]["_meta"].get("ui").is_none(), "{replaced}");
        assert!(replaced["contents"][2].get("_meta").is_none(), "{replaced}");
    }
}
