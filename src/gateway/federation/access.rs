//! What a caller may see and get of the federated surface: its endpoint's selection first
//! (outside it an item is unknown), then the policy's decision (`Action::"read"`,
//! `Action::"get"`), and a prompt as its endpoint shows it. Separate so that the lists, the
//! requests and the change fingerprints all decide the same way.

use serde_json::{Value, json};

use super::{answers::bad_input, index, not_found};
use crate::{
    audit::Decision,
    error::{Category, GatewayError},
    gateway::Gateway,
    identity::Caller,
    policy::SurfaceItem,
};

/// A policy's denial: the caller's error and the decision the audit line records.
pub(in crate::gateway) struct Denied {
    pub(super) error: GatewayError,
    pub(super) decision: Decision,
}

impl Gateway {
    /// The policy's decision on a resource or prompt; a denial with its decision.
    pub(in crate::gateway) fn decide_item(
        &self,
        caller: &Caller,
        item: SurfaceItem<'_>,
    ) -> Result<(), Box<Denied>> {
        // Outside the caller's endpoint: unknown there, as for what no server offers.
        if !self.endpoint_selects(caller, item) {
            let error = match item {
                SurfaceItem::Resource { uri, .. } => not_found(uri, index::Unroutable::Unknown),
                SurfaceItem::Template { .. } => {
                    bad_input("params.ref names no resource template a server offers")
                }
                SurfaceItem::Prompt { name, .. } => {
                    let shown: String = name.chars().take(64).collect();
                    bad_input(&format!("no server offers a prompt named {shown:?}"))
                }
            };
            return Err(Box::new(Denied { error, decision: Decision::no_policy() }));
        }
        let settings = self.settings();
        let Some(policy) = &settings.policy else { return Ok(()) };
        let verdict = policy.decide_item(caller, item);
        let server = match item {
            SurfaceItem::Resource { server, .. }
            | SurfaceItem::Template { server, .. }
            | SurfaceItem::Prompt { server, .. } => server,
        };
        let outcome = if verdict.allowed { "allow" } else { "deny" };
        self.metrics.policy_decisions.with_label_values(&[&verdict.rule, server, outcome]).inc();
        if verdict.allowed {
            return Ok(());
        }
        let what = match item {
            SurfaceItem::Resource { .. } | SurfaceItem::Template { .. } => "read this resource",
            SurfaceItem::Prompt { .. } => "get this prompt",
        };
        let err = GatewayError::new(
            Category::Forbidden,
            format!("the policy does not allow this caller to {what}"),
        )
        .with_server(server)
        .with_extra("rule", json!(verdict.rule.as_ref()));
        Err(Box::new(Denied { error: err, decision: Decision { allowed: false, rule: verdict.rule } }))
    }

    /// Fingerprints of the resources (and templates, and skills) and of the prompts `caller` sees now:
    /// equal fingerprints, equal lists (`server/listen.rs` tells a stream when one moves).
    pub fn surface_fingerprints(&self, caller: &Caller) -> (u64, u64) {
        use std::hash::{BuildHasher, Hash, Hasher};
        let index = self.federation.index();
        let state = foldhash::quality::FixedState::with_seed(0x7375_7266);
        let mut resources = state.build_hasher();
        for r in index.resources.iter().filter(|r| self.may_read(caller, r)) {
            (r.uri.as_str(), r.server.as_ref(), r.definition.to_string()).hash(&mut resources);
        }
        for (t, _) in index.templates.iter().filter(|(t, _)| self.may_read_template(caller, t)) {
            (t.text.as_ref(), t.server.as_ref(), t.definition.to_string()).hash(&mut resources);
        }
        // Skills are resources (SEP-2640 names no list change of its own): a change in the
        // skills a caller sees is told as `notifications/resources/list_changed`.
        for s in index.skills.iter().filter(|s| self.may_read_skill(caller, &index, s)) {
            ("skill", s.uri.as_str(), s.server.as_ref(), s.definition.get()).hash(&mut resources);
        }
        let mut prompts = state.build_hasher();
        for p in index.prompts.iter().filter(|p| self.may_get(caller, p).is_ok()) {
            (p.name.as_ref(), self.prompt_as_shown(caller, p).to_string()).hash(&mut prompts);
        }
        (resources.finish(), prompts.finish())
    }

    pub(super) fn may_read(&self, caller: &Caller, resource: &index::Resource) -> bool {
        let item = SurfaceItem::Resource {
            uri: &resource.uri,
            server: &resource.server,
            mime_type: resource.mime_type.as_deref(),
        };
        self.may_see(caller, item)
    }

    pub(super) fn may_read_template(&self, caller: &Caller, template: &index::Template) -> bool {
        let item = SurfaceItem::Template {
            text: &template.text,
            server: &template.server,
            mime_type: template.mime_type.as_deref(),
        };
        self.may_see(caller, item)
    }

    fn may_see(&self, caller: &Caller, item: SurfaceItem<'_>) -> bool {
        self.endpoint_selects(caller, item)
            && self.settings().policy.as_ref().is_none_or(|policy| policy.decide_item(caller, item).allowed)
    }

    /// Whether the caller's endpoint (if any) serves the resource or prompt.
    fn endpoint_selects(&self, caller: &Caller, item: SurfaceItem<'_>) -> bool {
        let Some(endpoint) = caller.endpoint.as_deref() else { return true };
        match item {
            SurfaceItem::Resource { uri, server, .. } => {
                self.settings().endpoints.selects_resource(endpoint, uri, server)
            }
            SurfaceItem::Template { text, server, .. } => {
                self.settings().endpoints.selects_template(endpoint, text, server)
            }
            SurfaceItem::Prompt { name, server, .. } => {
                self.settings().endpoints.selects_prompt(endpoint, name, server)
            }
        }
    }

    /// A prompt's definition as the caller's endpoint shows it (its own description, if any).
    pub(super) fn prompt_as_shown<'a>(
        &self,
        caller: &Caller,
        prompt: &'a index::Prompt,
    ) -> std::borrow::Cow<'a, Value> {
        let settings = self.settings();
        let description =
            caller.endpoint.as_deref().and_then(|e| settings.endpoints.prompt_description(e, &prompt.name));
        match (description, prompt.definition.as_object()) {
            (Some(description), Some(object)) => {
                let mut object = object.clone();
                object.insert("description".into(), Value::String(description.to_string()));
                std::borrow::Cow::Owned(Value::Object(object))
            }
            _ => std::borrow::Cow::Borrowed(&prompt.definition),
        }
    }

    pub(super) fn may_get(&self, caller: &Caller, prompt: &index::Prompt) -> Result<(), Box<Denied>> {
        let item = SurfaceItem::Prompt {
            name: &prompt.name,
            upstream_name: &prompt.upstream_name,
            server: &prompt.server,
        };
        self.decide_item(caller, item)
    }
}
