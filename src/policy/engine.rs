//! Cedar evaluation of one (caller, tool) pair.
//!
//! Why Cedar: it is a language made for authorization (AWS's, open source, formally
//! verified evaluator): default deny, `forbid` always beats `permit`, no loops or I/O, and
//! every decision names the policies that made it, which is what the decision metric and
//! the log line report. Evaluation is microseconds, in process, with no server to run.
//!
//! Entity model (see `docs/identity-and-policy.md`):
//! - principal `Caller::"<subject>"` (`"anonymous"` without one), attributes `subject`
//!   (string), `anonymous` (bool), `scopes` and `groups` (sets of strings), `claims` (record
//!   of the token's string, number and boolean claims, and arrays of those as sets); its
//!   parents are `Group::"<group>"` for each group, so `principal in Group::"ops"` works;
//! - action `Action::"call"`, one action for listing and calling: what a caller sees is
//!   exactly what it may call;
//! - resource `Tool::"<exposed name>"`, attributes `name`, `server`, `upstreamName` (strings),
//!   `readOnly`, `destructive`, `idempotent`, `openWorld` (the MCP annotations, absent ones at
//!   the spec's defaults: false, true, false, true); its parent is `Server::"<server>"`. The
//!   policy judges the tool as callers see it: catalogue control's rename and annotation
//!   overrides are in `name` and the hints; `upstreamName` is the server's own name.
//! - the rest of a server's surface: action `Action::"read"` on `Resource::"<uri>"` (a listed
//!   resource or a URI read — `uri` in its canonical form, `crate::resource_uri`, so a rule on
//!   a prefix sees no dot segment or encoded spelling — or a template — `uri` is then the
//!   template text and `template` true), attributes `uri`, `server`, `mimeType` (empty when unknown), `template`; action
//!   `Action::"get"` on `Prompt::"<exposed name>"`, attributes `name`, `server`,
//!   `upstreamName`. Both have the parent `Server::"<server>"`. One action each for listing
//!   and using, as for tools; a policy that names only `Action::"call"` denies them (default
//!   deny).
//! - approval: a `permit` annotated `@approval("user")` or `@approval("operator")` allows the
//!   call only once that person approved it (`crate::approvals`); when several permits decide,
//!   the strictest annotation wins (the operator's). Listing is not affected: the caller sees
//!   the tool, and its call waits.
//! - context: `endpoint`, the endpoint the request came through (`[endpoints.NAME]`, served at
//!   `/mcp/NAME`; `""` for the plain `/mcp`), so one policy can scope each audience.

use std::{
    collections::{HashMap, HashSet},
    str::FromStr,
    sync::Arc,
};

use cedar_policy::{
    Authorizer, Context, Decision, Entities, Entity, EntityId, EntityTypeName, EntityUid, PolicySet, Request,
    RestrictedExpression,
};
use serde_json::Value;

use crate::{identity::Caller, registry::ToolRecord, resource_uri::CanonicalUri};

/// The rule label of a deny no policy asked for.
pub const DEFAULT_DENY: &str = "default_deny";

/// One decision: allowed or not, and the policy that decided (its `@id`, else Cedar's id).
#[derive(Debug, Clone)]
pub struct Verdict {
    pub allowed: bool,
    pub rule: Arc<str>,
    /// An allowed call that must wait for a person first (`@approval("…")` on a deciding
    /// permit), with the label of the permit that asked.
    pub approval: Option<(crate::config::Approver, Arc<str>)>,
}

/// A parsed policy file.
pub struct PolicyEngine {
    set: PolicySet,
    /// Cedar policy id → the label reported (its `@id("…")` annotation when it has one).
    labels: HashMap<String, Arc<str>>,
    /// Cedar policy id → the approver its `@approval("…")` annotation names.
    approvals: HashMap<String, crate::config::Approver>,
    authorizer: Authorizer,
    action: EntityUid,
    read: EntityUid,
    get: EntityUid,
}

/// A resource, template or prompt a policy decides on (see the module documentation). A
/// resource's URI is canonical ([`CanonicalUri`]): a rule on `resource.uri` sees the form the
/// server is sent, whatever spelling the caller used.
#[derive(Debug, Clone, Copy)]
pub enum SurfaceItem<'a> {
    Resource { uri: &'a CanonicalUri, server: &'a str, mime_type: Option<&'a str> },
    Template { text: &'a str, server: &'a str, mime_type: Option<&'a str> },
    Prompt { name: &'a str, upstream_name: &'a str, server: &'a str },
}

impl std::fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEngine").field("policies", &self.labels.len()).finish()
    }
}

fn uid(kind: &str, id: &str) -> Option<EntityUid> {
    Some(EntityUid::from_type_name_and_id(EntityTypeName::from_str(kind).ok()?, EntityId::new(id)))
}

impl PolicyEngine {
    /// Parses a policy file; the error names the line and column of each problem.
    pub fn parse(text: &str) -> Result<Self, String> {
        let set = PolicySet::from_str(text).map_err(|errors| describe_parse_errors(text, &errors))?;
        let mut labels = HashMap::new();
        let mut approvals = HashMap::new();
        let mut seen = HashSet::new();
        for policy in set.policies() {
            let label: Arc<str> = policy.annotation("id").unwrap_or(AsRef::<str>::as_ref(policy.id())).into();
            if !seen.insert(label.clone()) {
                return Err(format!("two policies share the id {label:?}: each @id must be unique"));
            }
            if let Some(approver) = policy.annotation("approval") {
                let Some(approver) = crate::config::Approver::parse(approver) else {
                    return Err(format!(
                        "policy {label:?}: @approval({approver:?}) names no approver (\"user\" or \"operator\")"
                    ));
                };
                if policy.effect() != cedar_policy::Effect::Permit {
                    return Err(format!(
                        "policy {label:?}: @approval belongs on a permit (a forbid denies outright)"
                    ));
                }
                approvals.insert(policy.id().to_string(), approver);
            }
            labels.insert(policy.id().to_string(), label);
        }
        let action = uid("Action", "call").ok_or("the Action entity type")?;
        let read = uid("Action", "read").ok_or("the Action entity type")?;
        let get = uid("Action", "get").ok_or("the Action entity type")?;
        Ok(Self { set, labels, approvals, authorizer: Authorizer::new(), action, read, get })
    }

    /// How many policies the file holds.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// May `principal` list and call `tool`?
    pub fn decide(&self, principal: &Principal, tool: &ToolRecord) -> Verdict {
        let Some((resource, entities)) = tool_entities(tool) else { return deny("invalid_tool") };
        self.authorize(principal, &self.action, resource, entities)
    }

    /// May `principal` see and read the resource, or see and get the prompt?
    pub fn decide_item(&self, principal: &Principal, item: SurfaceItem<'_>) -> Verdict {
        let Some((resource, entities)) = item_entities(item) else { return deny("invalid_resource") };
        let action = match item {
            SurfaceItem::Resource { .. } | SurfaceItem::Template { .. } => &self.read,
            SurfaceItem::Prompt { .. } => &self.get,
        };
        self.authorize(principal, action, resource, entities)
    }

    fn authorize(
        &self,
        principal: &Principal,
        action: &EntityUid,
        resource: EntityUid,
        entities: [Entity; 2],
    ) -> Verdict {
        let Ok(entities) = Entities::from_entities(principal.entities.iter().cloned().chain(entities), None)
        else {
            return deny("invalid_entities");
        };
        let endpoint = RestrictedExpression::new_string(principal.endpoint.clone());
        let Ok(context) = Context::from_pairs([("endpoint".to_string(), endpoint)]) else {
            return deny("invalid_context");
        };
        let Ok(request) = Request::new(principal.uid.clone(), action.clone(), resource, context, None) else {
            return deny("invalid_request");
        };
        let response = self.authorizer.is_authorized(&request, &self.set, &entities);
        let allowed = response.decision() == Decision::Allow;
        // The first deciding policy by label, so the label is stable whatever the order.
        let rule = response
            .diagnostics()
            .reason()
            .filter_map(|id| self.labels.get(AsRef::<str>::as_ref(id)))
            .min()
            .cloned()
            .unwrap_or_else(|| DEFAULT_DENY.into());
        // The strictest approval any deciding permit asks for (the smallest label on a tie).
        let approval = if allowed && !self.approvals.is_empty() {
            response
                .diagnostics()
                .reason()
                .filter_map(|id| {
                    let id: &str = id.as_ref();
                    Some((*self.approvals.get(id)?, self.labels.get(id)?.clone()))
                })
                .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)))
        } else {
            None
        };
        Verdict { allowed, rule, approval }
    }
}

/// A caller as Cedar entities (built once per request or cached view).
#[derive(Debug, Clone)]
pub struct Principal {
    uid: EntityUid,
    entities: Vec<Entity>,
    /// The endpoint the request came through (`context.endpoint`, `""` for the plain `/mcp`).
    endpoint: String,
}

impl Principal {
    pub fn of(caller: &Caller) -> Self {
        let subject = caller.subject_or_anonymous();
        let principal_uid = uid("Caller", subject)
            .unwrap_or_else(|| EntityUid::from_str(r#"Caller::"anonymous""#).expect("literal"));
        let strings = |items: &[String]| {
            RestrictedExpression::new_set(items.iter().map(|s| RestrictedExpression::new_string(s.clone())))
        };
        let claims: Vec<(String, RestrictedExpression)> =
            caller.claims.iter().filter_map(|(k, v)| Some((k.clone(), expression(v, true)?))).collect();
        let claims = RestrictedExpression::new_record(claims)
            .unwrap_or_else(|_| RestrictedExpression::new_record([]).expect("empty record"));
        let attrs = HashMap::from([
            ("subject".to_string(), RestrictedExpression::new_string(subject.to_string())),
            ("anonymous".to_string(), RestrictedExpression::new_bool(caller.subject.is_none())),
            ("scopes".to_string(), strings(&caller.scopes)),
            ("groups".to_string(), strings(&caller.groups)),
            ("claims".to_string(), claims),
        ]);
        let groups: Vec<EntityUid> = caller.groups.iter().filter_map(|g| uid("Group", g)).collect();
        let mut entities: Vec<Entity> =
            groups.iter().map(|g| Entity::new_no_attrs(g.clone(), HashSet::new())).collect();
        let principal = Entity::new(principal_uid.clone(), attrs, groups.into_iter().collect())
            .unwrap_or_else(|_| Entity::new_no_attrs(principal_uid.clone(), HashSet::new()));
        entities.push(principal);
        Self { uid: principal_uid, entities, endpoint: caller.endpoint_name().to_string() }
    }
}

/// A claim value Cedar can hold: strings, integers, booleans, and (top level) arrays of
/// those as sets. Objects, floats and nulls are left out.
fn expression(value: &Value, top: bool) -> Option<RestrictedExpression> {
    match value {
        Value::String(s) => Some(RestrictedExpression::new_string(s.clone())),
        Value::Bool(b) => Some(RestrictedExpression::new_bool(*b)),
        Value::Number(n) => n.as_i64().map(RestrictedExpression::new_long),
        Value::Array(items) if top => {
            Some(RestrictedExpression::new_set(items.iter().filter_map(|v| expression(v, false))))
        }
        _ => None,
    }
}

fn deny(rule: &str) -> Verdict {
    Verdict { allowed: false, rule: rule.into(), approval: None }
}

/// A resource, template or prompt and its server as entities.
fn item_entities(item: SurfaceItem<'_>) -> Option<(EntityUid, [Entity; 2])> {
    let string = |s: &str| RestrictedExpression::new_string(s.to_string());
    let resource = |uri: &str, server: &str, mime_type: Option<&str>, template: bool| {
        HashMap::from([
            ("uri".to_string(), string(uri)),
            ("server".to_string(), string(server)),
            ("mimeType".to_string(), string(mime_type.unwrap_or_default())),
            ("template".to_string(), RestrictedExpression::new_bool(template)),
        ])
    };
    let (kind, id, server, attrs) = match item {
        SurfaceItem::Resource { uri, server, mime_type } => {
            ("Resource", uri.as_str(), server, resource(uri.as_str(), server, mime_type, false))
        }
        SurfaceItem::Template { text, server, mime_type } => {
            ("Resource", text, server, resource(text, server, mime_type, true))
        }
        SurfaceItem::Prompt { name, upstream_name, server } => (
            "Prompt",
            name,
            server,
            HashMap::from([
                ("name".to_string(), string(name)),
                ("server".to_string(), string(server)),
                ("upstreamName".to_string(), string(upstream_name)),
            ]),
        ),
    };
    let server = uid("Server", server)?;
    let resource = uid(kind, id)?;
    let entity = Entity::new(resource.clone(), attrs, HashSet::from([server.clone()])).ok()?;
    Some((resource, [entity, Entity::new_no_attrs(server, HashSet::new())]))
}

/// The tool and its server as entities.
fn tool_entities(tool: &ToolRecord) -> Option<(EntityUid, [Entity; 2])> {
    let hint = |key: &str, default: bool| {
        tool.definition
            .head()
            .get("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let server = uid("Server", &tool.server)?;
    let resource = uid("Tool", &tool.name)?;
    let attrs = HashMap::from([
        ("name".to_string(), RestrictedExpression::new_string(tool.name.to_string())),
        ("server".to_string(), RestrictedExpression::new_string(tool.server.to_string())),
        ("upstreamName".to_string(), RestrictedExpression::new_string(tool.upstream_name.to_string())),
        ("readOnly".to_string(), RestrictedExpression::new_bool(hint("readOnlyHint", false))),
        ("destructive".to_string(), RestrictedExpression::new_bool(hint("destructiveHint", true))),
        ("idempotent".to_string(), RestrictedExpression::new_bool(hint("idempotentHint", false))),
        ("openWorld".to_string(), RestrictedExpression::new_bool(hint("openWorldHint", true))),
    ]);
    let entity = Entity::new(resource.clone(), attrs, HashSet::from([server.clone()])).ok()?;
    Some((resource, [entity, Entity::new_no_attrs(server, HashSet::new())]))
}

/// Each parse error with its line and column (`line 3, column 12: unexpected token …`).
fn describe_parse_errors(text: &str, errors: &cedar_policy::ParseErrors) -> String {
    use miette::Diagnostic;
    let mut out = Vec::new();
    for error in errors.iter() {
        let at = error
            .labels()
            .and_then(|mut labels| labels.next())
            .map(|label| {
                let (line, column) = line_column(text, label.offset());
                format!("line {line}, column {column}: ")
            })
            .unwrap_or_default();
        let help = error.help().map(|h| format!(" ({h})")).unwrap_or_default();
        out.push(format!("{at}{error}{help}"));
    }
    out.join("; ")
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_name_line_and_column() {
        let text = "permit(principal, action, resource);\npermit(principal action, resource);\n";
        let err = PolicyEngine::parse(text).unwrap_err();
        assert!(err.contains("line 2, column"), "{err}");
    }

    #[test]
    fn an_approval_annotation_names_who_approves() {
        let engine = PolicyEngine::parse(
            "@id(\"browse\")\npermit (principal, action, resource) when { resource.readOnly };\n\
             @id(\"refund\")\n@approval(\"operator\")\npermit (principal, action, resource == Tool::\"refund\");\n\
             @id(\"checkout\")\n@approval(\"user\")\npermit (principal, action, resource == Tool::\"checkout\");\n",
        )
        .unwrap();
        let alice = Principal::of(&Caller { subject: Some("alice".into()), ..Caller::default() });
        let tool = |name: &str, read_only: bool| {
            let definition = serde_json::json!({"annotations": {"readOnlyHint": read_only}});
            ToolRecord::for_tests(name, "store", definition, read_only)
        };
        let refund = engine.decide(&alice, &tool("refund", false));
        assert!(refund.allowed);
        assert_eq!(refund.approval, Some((crate::config::Approver::Operator, "refund".into())));
        let checkout = engine.decide(&alice, &tool("checkout", false));
        assert_eq!(checkout.approval, Some((crate::config::Approver::User, "checkout".into())));
        assert_eq!(engine.decide(&alice, &tool("search", true)).approval, None);
        let err =
            PolicyEngine::parse("@approval(\"boss\")\npermit (principal, action, resource);").unwrap_err();
        assert!(err.contains("names no approver"), "{err}");
        let err =
            PolicyEngine::parse("@approval(\"user\")\nforbid (principal, action, resource);").unwrap_err();
        assert!(err.contains("belongs on a permit"), "{err}");
    }

    #[test]
    fn line_column_counts_from_one() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab", 0), (1, 1));
    }
}
