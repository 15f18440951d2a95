//! Answering the six federated methods: the lists paged from the index (filtered by what the
//! caller may see), and `resources/read`, `prompts/get` and `completion/complete` routed to
//! their server and sent through its stack, their results checked. Separate from the state:
//! this is the per-request path.

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value, json};
use tower::ServiceExt;

use super::{
    Index, SurfaceCall,
    answers::{bad_input, checked_completion, checked_contents, checked_messages, page_of},
    canonical_param, not_found,
};
use crate::{
    audit::Decision,
    config::hooks::HookPhase,
    error::{Category, GatewayError},
    gateway::{
        Gateway,
        guard::Subject,
        outbound::{Released, item_arguments},
        settings::Settings,
    },
    guardrail::{
        Mark,
        contract::{self, ItemKind},
    },
    policy::SurfaceItem,
    upstream::{UpstreamReply, UpstreamRequest},
};

impl Gateway {
    /// Answers one of [`METHODS`](super::METHODS), in the caller's protocol revision.
    pub async fn surface_method(
        &self,
        method: &str,
        params: Option<Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let released = self.surface_answer(method, params, call).await?;
        Ok(released.envelope(|result| self.surface_envelope(method, call, result)))
    }

    /// The gateway's own envelope around an answer: the server's revision fields and identity
    /// taken off, the caller's revision's put on.
    fn surface_envelope(&self, method: &str, call: &SurfaceCall, mut result: Value) -> Value {
        let Some(object) = result.as_object_mut() else { return result };
        // The server's own revision fields and identity are not the gateway's answer.
        for key in ["resultType", "ttlMs", "cacheScope"] {
            object.remove(key);
        }
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.remove("io.modelcontextprotocol/serverInfo");
            if meta.is_empty() {
                object.remove("_meta");
            }
        }
        if call.modern {
            object.insert("resultType".into(), json!("complete"));
            if method.ends_with("/list") {
                // Fresh until the next refresh; a list filtered by the policy is this caller's.
                let scope = if self.settings().policy.is_some() { "private" } else { "public" };
                object.insert("ttlMs".into(), json!(self.refresh_interval().as_millis() as u64));
                object.insert("cacheScope".into(), json!(scope));
            } else if method == "resources/read" || method == "skills/get" {
                // A read is a cacheable result too (2026-07-28 `ReadResourceResult extends
                // CacheableResult`: both fields required). Its freshness is the server's to
                // know, not the gateway's: not to be reused, and only by this caller.
                object.insert("ttlMs".into(), json!(0));
                object.insert("cacheScope".into(), json!("private"));
            }
        }
        result
    }

    async fn surface_answer(
        &self,
        method: &str,
        params: Option<Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let params = match params {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(bad_input("params must be an object")),
        };
        let index = self.federation.index();
        match method {
            "resources/list" => {
                let visible = index.resources.iter().filter(|r| self.may_read(&call.caller, r));
                page_of(visible.map(|r| &*r.definition), &params, "resources").map(Released::gateways_own)
            }
            "resources/templates/list" => {
                let visible = index
                    .templates
                    .iter()
                    .map(|(t, _)| t)
                    .filter(|t| self.may_read_template(&call.caller, t));
                page_of(visible.map(|r| &*r.definition), &params, "resourceTemplates")
                    .map(Released::gateways_own)
            }
            "prompts/list" => {
                let visible: Vec<std::borrow::Cow<'_, Value>> = index
                    .prompts
                    .iter()
                    .filter(|p| self.may_get(&call.caller, p).is_ok())
                    .map(|p| self.prompt_as_shown(&call.caller, p))
                    .collect();
                page_of(visible.iter().map(|p| p.as_ref()), &params, "prompts").map(Released::gateways_own)
            }
            "resources/read" => self.read_resource(&index, params, call).await,
            "skills/list" | "skills/get" => self.skills_answer(method, &index, params, call).await,
            "prompts/get" => self.get_prompt(&index, params, call).await,
            _ => self.complete(&index, params, call).await,
        }
    }

    async fn read_resource(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let started = Instant::now();
        let uri = match canonical_param(params.get("uri")) {
            Ok(uri) => uri,
            Err(err) => {
                self.record_surface(call, started, "resources/read", "", None, err.category.as_str(), None);
                return Err(err);
            }
        };
        // Every decision below, and the server, see this one form.
        params.insert("uri".into(), json!(uri.as_str()));
        let shown = crate::redact::url(uri.as_str());
        let server = match index.route_uri(&uri) {
            Ok(server) => server,
            Err(why) => {
                let err = not_found(&uri, why);
                self.record_surface(
                    call,
                    started,
                    "resources/read",
                    &shown,
                    None,
                    err.category.as_str(),
                    None,
                );
                return Err(err);
            }
        };
        let listed = index.resource(&uri);
        let item = SurfaceItem::Resource {
            uri: &uri,
            server: &server,
            mime_type: listed.and_then(|r| r.mime_type.as_deref()),
        };
        if let Err(denied) = self.decide_item(&call.caller, item) {
            return Err(self.refused(call, started, "resources/read", &shown, &server, *denied));
        }
        // A file of a listed skill of this server (or of skills nested in one another): the
        // decision on each skill covers its files.
        if let Err(denied) = self.decide_enclosing_skills(&call.caller, index, &uri, &server) {
            return Err(self.refused(call, started, "resources/read", &shown, &server, *denied));
        }
        let settings = self.settings();
        let budget = settings.config.defaults.max_result_bytes;
        let subject = Subject {
            kind: ItemKind::Resource,
            name: uri.as_str(),
            server: &server,
            label: Some("resources/read"),
        };
        let mut marks = Vec::new();
        let arguments = json!({"uri": uri.as_str()});
        let name_header = Some(uri.as_str().into());
        let check = |item| checked_contents(item, budget);
        let result = self
            .forward_and_release(
                &settings,
                call,
                &subject,
                params,
                name_header,
                &arguments,
                &mut marks,
                check,
            )
            .await;
        self.answered_item(call, started, "resources/read", &shown, &server, result, marks)
    }

    async fn get_prompt(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let started = Instant::now();
        let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_string) else {
            return Err(bad_input("params.name must be a string"));
        };
        let Some(prompt) = index.prompt(&name) else {
            let shown: String = name.chars().take(64).collect();
            let err = bad_input(&format!("no server offers a prompt named {shown:?}"));
            self.record_surface(call, started, "prompts/get", &shown, None, err.category.as_str(), None);
            return Err(err);
        };
        if let Err(denied) = self.may_get(&call.caller, prompt) {
            return Err(self.refused(call, started, "prompts/get", &prompt.name, &prompt.server, *denied));
        }
        let settings = self.settings();
        let subject = Subject {
            kind: ItemKind::Prompt,
            name: &prompt.name,
            server: &prompt.server,
            label: Some("prompts/get"),
        };
        let (arguments, mut marks) =
            match self.guard_item_arguments(&settings, call, started, &subject, &mut params).await {
                Ok(guarded) => guarded,
                Err(err) => return Err(err),
            };
        params.insert("name".into(), json!(prompt.upstream_name.as_ref()));
        let budget = settings.config.defaults.max_result_bytes;
        let upstream_name = Some(prompt.upstream_name.clone());
        let check = |item| checked_messages(item, budget);
        let result = self
            .forward_and_release(
                &settings,
                call,
                &subject,
                params,
                upstream_name,
                &arguments,
                &mut marks,
                check,
            )
            .await;
        self.answered_item(call, started, "prompts/get", &prompt.name, &prompt.server, result, marks)
    }

    /// The before-hooks of a prompt or a completion on its arguments (none configured or
    /// matching: as they are); a replacement is put in `params`. A refusal is recorded.
    async fn guard_item_arguments(
        &self,
        settings: &Settings,
        call: &SurfaceCall,
        started: Instant,
        subject: &Subject<'_>,
        params: &mut Map<String, Value>,
    ) -> Result<(Value, Vec<Mark>), GatewayError> {
        let arguments = item_arguments(subject.kind, params);
        if !settings.has_hooks()
            || settings.hooks.matching(HookPhase::Before, subject.name, subject.server).next().is_none()
        {
            return Ok((arguments, Vec::new()));
        }
        let kind = subject.kind;
        let recheck = |replaced: Value| {
            contract::check_item_arguments(kind, replaced)
                .map_err(|e| GatewayError::new(Category::BadInput, e))
        };
        let guarded =
            self.guard_arguments(settings, &call.caller, subject, arguments, call.deadline, recheck).await;
        let method = subject.label.unwrap_or("prompts/get");
        match guarded {
            Ok((arguments, marks)) => {
                match (kind, &arguments) {
                    (ItemKind::Prompt, Value::Object(map))
                        if !map.is_empty() || params.contains_key("arguments") =>
                    {
                        params.insert("arguments".into(), arguments.clone());
                    }
                    (ItemKind::Completion, _) => {
                        params.insert("argument".into(), arguments["argument"].clone());
                        if let Some(context) = arguments.get("context") {
                            params.insert("context".into(), context.clone());
                        }
                    }
                    _ => {}
                }
                Ok((arguments, marks))
            }
            Err(guarded) => {
                let decision =
                    Decision { allowed: false, rule: format!("guardrail:{}", guarded.hook).into() };
                let outcome = guarded.error.category.as_str();
                self.record_surface_marked(
                    call,
                    started,
                    method,
                    subject.name,
                    Some(subject.server),
                    outcome,
                    Some(decision),
                    guarded.marks,
                );
                Err(guarded.error.with_server(Arc::from(subject.server)))
            }
        }
    }

    async fn complete(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let started = Instant::now();
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let (server, shown, name_header) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
                let Some(prompt) = index.prompt(name) else {
                    return Err(bad_input("params.ref names no prompt a server offers"));
                };
                if let Err(denied) = self.may_get(&call.caller, prompt) {
                    return Err(self.refused(
                        call,
                        started,
                        "completion/complete",
                        &prompt.name,
                        &prompt.server,
                        *denied,
                    ));
                }
                params.insert(
                    "ref".into(),
                    json!({"type": "ref/prompt", "name": prompt.upstream_name.as_ref()}),
                );
                (prompt.server.clone(), prompt.name.to_string(), Some(prompt.upstream_name.clone()))
            }
            Some("ref/resource") => {
                let uri = reference.get("uri").and_then(Value::as_str).unwrap_or_default();
                let Some(template) = index.route_template(uri) else {
                    return Err(bad_input("params.ref names no resource template a server offers"));
                };
                let item = SurfaceItem::Template {
                    text: &template.text,
                    server: &template.server,
                    mime_type: template.mime_type.as_deref(),
                };
                if let Err(denied) = self.decide_item(&call.caller, item) {
                    return Err(self.refused(
                        call,
                        started,
                        "completion/complete",
                        &template.text,
                        &template.server,
                        *denied,
                    ));
                }
                (template.server.clone(), template.text.to_string(), None)
            }
            _ => return Err(bad_input("params.ref.type must be ref/prompt or ref/resource")),
        };
        // A server that declared no completions is not asked: its completion is empty.
        if !index.completing.contains(&server) {
            self.record_surface(call, started, "completion/complete", &shown, Some(&server), "success", None);
            return Ok(Released::gateways_own(json!({"completion": {"values": [], "hasMore": false}})));
        }
        let settings = self.settings();
        let subject = Subject {
            kind: ItemKind::Completion,
            name: &shown,
            server: &server,
            label: Some("completion/complete"),
        };
        let (arguments, mut marks) =
            self.guard_item_arguments(&settings, call, started, &subject, &mut params).await?;
        let result = self
            .forward_and_release(
                &settings,
                call,
                &subject,
                params,
                name_header,
                &arguments,
                &mut marks,
                checked_completion,
            )
            .await;
        self.answered_item(call, started, "completion/complete", &shown, &server, result, marks)
    }

    /// Sends one request to `server` through its stack and parses the result.
    /// Sends a federated request (`subject.label`: its method) to `subject.server` and lets
    /// what comes back out through the one way out: the answer checked by `check` and passed
    /// through the after-hooks ([`Gateway::release_item`]), an error through
    /// [`Gateway::release_error`].
    #[allow(clippy::too_many_arguments)]
    async fn forward_and_release(
        &self,
        settings: &Settings,
        call: &SurfaceCall,
        subject: &Subject<'_>,
        params: Map<String, Value>,
        name_header: Option<Arc<str>>,
        arguments: &Value,
        marks: &mut Vec<Mark>,
        check: impl Fn(Value) -> Result<Value, GatewayError>,
    ) -> Result<Released<Value>, GatewayError> {
        let method = subject.label.unwrap_or_default();
        match self.forward_surface(subject.server, method, params, name_header, call).await {
            Ok(item) => {
                self.release_item(
                    settings,
                    &call.caller,
                    subject,
                    arguments,
                    item,
                    call.deadline,
                    marks,
                    check,
                )
                .await
            }
            Err(err) => Err(self.release_error(settings, subject.name, subject.server, err)),
        }
    }

    pub(super) async fn forward_surface(
        &self,
        server: &str,
        method: &'static str,
        params: Map<String, Value>,
        name: Option<Arc<str>>,
        call: &SurfaceCall,
    ) -> Result<Value, GatewayError> {
        let Some(upstream) = self.surface_upstream(server) else {
            return Err(GatewayError::new(Category::Internal, "the server of this item is not configured"));
        };
        // The caller's `_meta` as any forwarded request carries it: without the keys the
        // protocol reserves (its revision's envelope is not the server's: a session-era
        // server refuses a 2026-07-28 one) nor the gateway's own.
        let mut params = params;
        if let Some(meta) = params.remove("_meta") {
            let forwarded = crate::gateway::forwarded_meta::forwarded_meta(Some(&meta));
            if !forwarded.is_empty() {
                params.insert("_meta".into(), Value::Object(forwarded));
            }
        }
        let mut request = UpstreamRequest::new(method, params);
        request.tool = name;
        request.deadline = call.deadline;
        request.caller = Some(call.caller.clone());
        match upstream.service.clone().oneshot(request).await {
            Ok(UpstreamReply::Result(raw)) => serde_json::from_str(raw.get()).map_err(|e| {
                GatewayError::new(
                    Category::UpstreamProtocol,
                    format!("the server's {method} result is not JSON: {e}"),
                )
            }),
            Ok(UpstreamReply::Error(error)) => Err(GatewayError::from_upstream_reply(error, false)),
            Err(error) => Err(GatewayError::from_upstream(&error)),
        }
    }
}
