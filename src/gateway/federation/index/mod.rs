//! The index of every server's resources, resource templates and prompts, rebuilt whole from
//! the servers' lists (never edited in place), and the routing rules on it.
//!
//! - **A resource keeps its URI.** A URI means something to its server and to the caller, so
//!   it is never rewritten: a read goes to the server an operator assigned the URI's prefix to
//!   (`servers.NAME.resource_prefixes`, longest prefix first: the operator's word is final,
//!   and it is how a collision gets an owner), else to the one server that listed the URI,
//!   else to the one server whose template matches it.
//! - **One canonical form.** A listed URI and a URI read are both taken in their canonical form
//!   ([`CanonicalUri`], RFC 3986 §6.2.2) before any prefix, listing, template or hide decision;
//!   a listed URI that has none is not served (logged).
//! - **A URI (or template) two servers both list is a collision**: served by neither (unless a
//!   prefix names the owner), shown in `GET /admin/registry/collisions`, counted and logged.
//!   So is a URI one server lists and another's template matches (the listing would otherwise
//!   silently take the template's reads), and, when read, a URI that matches templates of two
//!   servers.
//! - **Prompt names follow the tool-name rule of collisions**: a name one server offers is
//!   served as it is; a name several servers offer is served as `server__name` for each.
//! - **Catalogue control** (`[prompts.NAME]`, `[resources]`) applies last: a hidden prompt or
//!   resource is not in the index at all (a hidden URI is never routed), a renamed prompt is
//!   served under its new name only, a description replaces the server's.

use std::{collections::HashMap, sync::Arc};

use serde_json::{Value, json, value::RawValue};

use super::{
    listed::{self, Listed, ListedResource, ListedTemplate},
    uri_template::UriTemplate,
};
use crate::{
    config::surface_control::{PromptControl, ResourceControl},
    resource_uri::CanonicalUri,
};

/// The operator's catalogue control of prompts and resources.
#[derive(Debug, Clone, Default)]
pub struct Control {
    pub prompts: std::collections::BTreeMap<String, PromptControl>,
    pub resources: ResourceControl,
}

/// What one server offers besides tools, as its lists said (definitions checked objects;
/// resources and templates kept compact, resources under their canonical URIs: see
/// [`Listed`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerSurface {
    /// Shared by the surface as listed and as served (only prompts differ between them).
    pub resources: Arc<[ListedResource]>,
    pub templates: Arc<[ListedTemplate]>,
    pub prompts: Vec<Value>,
    /// The server answered `completion/complete` in its capabilities (or it offers prompts or
    /// templates, which completion is about).
    pub completions: bool,
    /// The server declared `resources.subscribe: true`.
    pub subscribe: bool,
    /// The server declared the Skills extension (`skills/list`, `skills/get`).
    pub offers_skills: bool,
    /// Its `skills/list` entries, each under the canonical URI of its `SKILL.md`
    /// ([`Listed::skill`]: the entry otherwise as the server sent it).
    pub skills: Arc<[ListedResource]>,
}

/// A prompt as callers see it.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The name callers use (the server's own, or `server__name` on a collision).
    pub name: Arc<str>,
    pub upstream_name: Arc<str>,
    pub server: Arc<str>,
    /// The definition as listed, `name` set to [`Self::name`].
    pub definition: Value,
}

/// A listed resource.
#[derive(Debug, Clone)]
pub struct Resource {
    /// Its `uri`, canonical (the definition's `uri` is this form too).
    pub uri: CanonicalUri,
    pub server: Arc<str>,
    pub mime_type: Option<Arc<str>>,
    /// The definition as listed (shared with the server's surface: see [`Listed`]).
    pub definition: Arc<RawValue>,
}

/// A listed resource template.
#[derive(Debug, Clone)]
pub struct Template {
    /// Its `uriTemplate`, as the server wrote it.
    pub text: Arc<str>,
    pub server: Arc<str>,
    pub mime_type: Option<Arc<str>>,
    /// The definition as listed (shared with the server's surface: see [`Listed`]).
    pub definition: Arc<RawValue>,
}

/// A name, URI or template more than one server claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// `prompt`, `resource` or `resource_template`.
    pub kind: &'static str,
    pub name: String,
    pub servers: Vec<Arc<str>>,
}

/// Why a URI has no server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unroutable {
    /// No prefix, listing or template covers it.
    Unknown,
    /// Several servers claim it and no prefix names the owner.
    Claimed(Vec<Arc<str>>),
}

/// One consistent view of every server's resources, templates and prompts.
#[derive(Debug, Default)]
pub struct Index {
    /// Sorted by URI (served resources only: collisions left out).
    pub resources: Vec<Resource>,
    /// Sorted by template text.
    pub templates: Vec<(Template, UriTemplate)>,
    /// Sorted by name.
    pub prompts: Vec<Prompt>,
    by_uri: HashMap<CanonicalUri, usize>,
    by_prompt: HashMap<Arc<str>, usize>,
    /// Operator-assigned prefixes, longest first.
    prefixes: Vec<(String, Arc<str>)>,
    /// URI prefixes the operator hid (`[resources] hide`): never routed.
    hidden: Vec<String>,
    /// URIs and templates listed by more than one server (served only through a prefix).
    claimed: HashMap<String, Vec<Arc<str>>>,
    pub collisions: Vec<Collision>,
    /// Servers that offer completion.
    pub completing: Vec<Arc<str>>,
    /// Servers that take `resources/subscribe` (declared `resources.subscribe`).
    pub subscribing: Vec<Arc<str>>,
    /// Skills listed by one server (or owned through a prefix), sorted by URI; `mime_type` is
    /// unused, `definition` the entry as listed.
    pub skills: Vec<Resource>,
    by_skill: HashMap<CanonicalUri, usize>,
    /// A skill's directory (its URI without `SKILL.md`, ending in `/`) → the skill, or the
    /// servers that both list it: the files under it are read from the skill's server.
    skill_dirs: HashMap<Box<str>, Result<usize, Vec<Arc<str>>>>,
    /// Servers that declared the Skills extension, in name order.
    pub skill_servers: Vec<Arc<str>>,
}

impl Index {
    /// Builds the index from each server's surface (`servers` in name order) and the
    /// configured prefixes (server → prefixes).
    pub fn build(
        servers: &[(Arc<str>, ServerSurface)],
        prefixes: &[(Arc<str>, Vec<String>)],
        control: &Control,
    ) -> Self {
        let mut index = Index::default();
        for (server, list) in prefixes {
            index.prefixes.extend(list.iter().map(|p| (p.clone(), server.clone())));
        }
        index.prefixes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));

        let mut prompts: HashMap<String, Vec<(Arc<str>, &Value)>> = HashMap::new();
        for (server, surface) in servers {
            for prompt in &surface.prompts {
                if let Some(name) = prompt.get("name").and_then(Value::as_str) {
                    prompts.entry(name.to_string()).or_default().push((server.clone(), prompt));
                }
            }
            if surface.completions {
                index.completing.push(server.clone());
            }
            if surface.subscribe {
                index.subscribing.push(server.clone());
            }
            if surface.offers_skills {
                index.skill_servers.push(server.clone());
            }
        }
        // Resources and templates: who lists each URI (in its canonical form, which a listed
        // resource is kept under: a URI with none was not kept) — one sorted list, no map of
        // lists: a rebuild of 10,000 resources allocates nothing per resource but its entry.
        let uris = listers(servers, |s| &s.resources);
        for claimants in uris.chunk_by(|a, b| a.1.key == b.1.key) {
            let uri = &claimants[0].1.key;
            match claimants {
                [(server, definition)] => index.resources.push(resource(server, definition)),
                _ => match index.owner_among(uri, claimants) {
                    // A prefix names the owner: its definition is the one listed.
                    Some((server, definition)) => index.resources.push(resource(server, definition)),
                    None => index.claim(
                        "resource",
                        uri.as_str().to_string(),
                        claimants.iter().map(|(s, _)| (*s).clone()).collect(),
                    ),
                },
            }
        }
        // Skills: a skill URI two servers both list is theirs alone to mean (SEP-2640 scopes it
        // to its server), so neither serves it unless a prefix names the owner.
        let skills = listers(servers, |s| &s.skills);
        let mut claimed_skills = Vec::new();
        for claimants in skills.chunk_by(|a, b| a.1.key == b.1.key) {
            let uri = &claimants[0].1.key;
            match claimants {
                [(server, definition)] => index.skills.push(resource(server, definition)),
                _ => match index.owner_among(uri, claimants) {
                    Some((server, definition)) => index.skills.push(resource(server, definition)),
                    None => {
                        let servers: Vec<Arc<str>> = claimants.iter().map(|(s, _)| (*s).clone()).collect();
                        claimed_skills.push((skill_dir(uri).into(), servers.clone()));
                        index.claim("skill", uri.as_str().to_string(), servers);
                    }
                },
            }
        }
        let templates = listers(servers, |s| &s.templates);
        for claimants in templates.chunk_by(|a, b| a.1.key == b.1.key) {
            let text = &claimants[0].1.key;
            match (claimants, UriTemplate::parse(text)) {
                ([(server, definition)], Ok(parsed)) => {
                    index.templates.push((template(server, definition), parsed));
                }
                ([(server, _)], Err(reason)) => {
                    tracing::warn!(server = %server, reason, "resource template not served: not an RFC 6570 template");
                }
                _ => index.claim(
                    "resource_template",
                    text.to_string(),
                    claimants.iter().map(|(s, _)| (*s).clone()).collect(),
                ),
            }
        }
        for (name, claimants) in prompts {
            let clash = claimants.len() > 1;
            if clash {
                let servers = claimants.iter().map(|(s, _)| s.clone()).collect();
                index.collisions.push(Collision { kind: "prompt", name: name.clone(), servers });
            }
            for (server, definition) in claimants {
                let listed = if clash { format!("{server}__{name}") } else { name.clone() };
                let rule = control.prompts.get(&listed);
                if rule.is_some_and(|rule| rule.hide) {
                    continue;
                }
                let shown: Arc<str> = rule.and_then(|r| r.rename.as_deref()).unwrap_or(&listed).into();
                let mut definition = definition.clone();
                definition["name"] = json!(shown.as_ref());
                if let Some(description) = rule.and_then(|r| r.description.as_ref()) {
                    definition["description"] = json!(description);
                }
                index.prompts.push(Prompt {
                    name: shown,
                    upstream_name: name.as_str().into(),
                    server,
                    definition,
                });
            }
        }
        // Catalogue control of resources: hidden ones out, descriptions replaced.
        let hidden = &control.resources;
        index.resources.retain(|r| !hidden.hides(&r.uri));
        index.skills.retain(|r| !hidden.hides(&r.uri));
        index.templates.retain(|(t, _)| !hidden.hides_template(&t.text));
        for resource in &mut index.resources {
            if let Some(description) = hidden.descriptions.get(resource.uri.as_str()) {
                resource.definition =
                    listed::with_field(&resource.definition, "description", json!(description));
            }
        }
        for (template, _) in &mut index.templates {
            if let Some(description) = hidden.descriptions.get(template.text.as_ref()) {
                template.definition =
                    listed::with_field(&template.definition, "description", json!(description));
            }
        }
        index.hidden = hidden.hide.clone();
        index.contest_listed_uris();
        // A rename may meet another prompt's name: the one served under its own name keeps it.
        index.prompts.sort_by(|a, b| (&a.name, renamed(a)).cmp(&(&b.name, renamed(b))));
        index.prompts.dedup_by(|later, kept| {
            let twice = later.name == kept.name;
            if twice {
                tracing::warn!(prompt = %later.name, server = %later.server, "two prompts would be served under one name: the renamed one is not served");
            }
            twice
        });
        index.resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        index.templates.sort_by(|a, b| a.0.text.cmp(&b.0.text));
        index.prompts.sort_by(|a, b| a.name.cmp(&b.name));
        index.collisions.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        index.skills.sort_by(|a, b| a.uri.cmp(&b.uri));
        index.by_skill = index.skills.iter().enumerate().map(|(i, r)| (r.uri.clone(), i)).collect();
        index.skill_dirs = claimed_skills.into_iter().map(|(dir, servers)| (dir, Err(servers))).collect();
        for (i, skill) in index.skills.iter().enumerate() {
            index.skill_dirs.insert(skill_dir(&skill.uri).into(), Ok(i));
        }
        index.by_uri = index.resources.iter().enumerate().map(|(i, r)| (r.uri.clone(), i)).collect();
        index.by_prompt = index.prompts.iter().enumerate().map(|(i, p)| (p.name.clone(), i)).collect();
        index
    }

    /// The claimant a configured prefix covering `uri` names, if any.
    fn owner_among<'v>(
        &self,
        uri: &CanonicalUri,
        claimants: &[(&'v Arc<str>, &'v ListedResource)],
    ) -> Option<(&'v Arc<str>, &'v ListedResource)> {
        let owner = self.prefix_owner(uri)?;
        claimants.iter().find(|(server, _)| *server == owner).copied()
    }

    /// The server a configured prefix covering `uri` names (longest prefix first).
    fn prefix_owner(&self, uri: &CanonicalUri) -> Option<&Arc<str>> {
        self.prefixes.iter().find(|(prefix, _)| uri.is_under(prefix)).map(|(_, server)| server)
    }

    /// A URI one server lists that another server's template matches is claimed by both: the
    /// listing must not silently take the template's reads. Unless a prefix covers it (reads
    /// follow the prefix): it stays listed when the prefix names its lister, and is left out
    /// otherwise. Each template is tried only on the listed URIs under its literal head.
    fn contest_listed_uris(&mut self) {
        self.resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        let mut contested: HashMap<usize, Vec<Arc<str>>> = HashMap::new();
        for (template, parsed) in &self.templates {
            let head = parsed.head();
            let start = self.resources.partition_point(|r| r.uri.as_str() < head);
            for (i, listed) in self.resources.iter().enumerate().skip(start) {
                if !listed.uri.is_under(head) {
                    break;
                }
                if listed.server != template.server && parsed.matches(&listed.uri) {
                    let servers = contested.entry(i).or_insert_with(|| vec![listed.server.clone()]);
                    if !servers.contains(&template.server) {
                        servers.push(template.server.clone());
                    }
                }
            }
        }
        if contested.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.resources.len());
        for (i, listed) in std::mem::take(&mut self.resources).into_iter().enumerate() {
            let Some(servers) = contested.remove(&i) else {
                kept.push(listed);
                continue;
            };
            match self.prefix_owner(&listed.uri) {
                Some(owner) if *owner == listed.server => kept.push(listed),
                Some(_) => {}
                None => self.claim("resource", listed.uri.as_str().to_string(), servers),
            }
        }
        self.resources = kept;
    }

    fn claim(&mut self, kind: &'static str, name: String, mut servers: Vec<Arc<str>>) {
        servers.sort();
        self.collisions.push(Collision { kind, name: name.clone(), servers: servers.clone() });
        self.claimed.insert(name, servers);
    }

    /// The server `uri` is read from (see the module documentation for the order).
    pub fn route_uri(&self, uri: &CanonicalUri) -> Result<Arc<str>, Unroutable> {
        if self.hidden.iter().any(|prefix| uri.is_under(prefix)) {
            return Err(Unroutable::Unknown);
        }
        if let Some(server) = self.prefix_owner(uri) {
            return Ok(server.clone());
        }
        if let Some(&i) = self.by_uri.get(uri) {
            return Ok(self.resources[i].server.clone());
        }
        if let Some(servers) = self.claimed.get(uri.as_str()) {
            return Err(Unroutable::Claimed(servers.clone()));
        }
        // A file of a listed skill (its manifest's or not): the skill's server.
        match self.skill_dir_of(uri) {
            Some(Ok(i)) => return Ok(self.skills[*i].server.clone()),
            Some(Err(servers)) => return Err(Unroutable::Claimed(servers.clone())),
            None => {}
        }
        let mut matching: Vec<Arc<str>> =
            self.templates.iter().filter(|(_, t)| t.matches(uri)).map(|(r, _)| r.server.clone()).collect();
        matching.sort();
        matching.dedup();
        match matching.len() {
            0 => Err(Unroutable::Unknown),
            1 => Ok(matching.remove(0)),
            _ => Err(Unroutable::Claimed(matching)),
        }
    }

    /// What is known of a listed resource (its MIME type, for the policy).
    pub fn resource(&self, uri: &CanonicalUri) -> Option<&Resource> {
        self.by_uri.get(uri).map(|&i| &self.resources[i])
    }

    /// The server of a resource template, by its exact text (`completion/complete`'s
    /// `ref/resource`); a template two servers list goes through a prefix, if one covers it.
    pub fn route_template(&self, text: &str) -> Option<&Template> {
        self.templates.iter().find(|(t, _)| &*t.text == text).map(|(t, _)| t)
    }

    /// The listed skill whose directory holds `uri` (the innermost, for nested skills), or
    /// the servers that both list that skill.
    fn skill_dir_of(&self, uri: &CanonicalUri) -> Option<&Result<usize, Vec<Arc<str>>>> {
        if self.skill_dirs.is_empty() {
            return None;
        }
        let text = uri.as_str();
        let after_scheme = text.find("://").map_or(0, |i| i + 3);
        text.match_indices('/')
            .rev()
            .filter(|(at, _)| *at >= after_scheme)
            .find_map(|(at, _)| self.skill_dirs.get(&text[..=at]))
    }

    /// The listed skills whose directory holds `uri` (a skill's `SKILL.md` or another file:
    /// the skill itself, and every skill it is nested in), innermost first.
    pub fn skills_holding(&self, uri: &CanonicalUri) -> Vec<&Resource> {
        if self.skill_dirs.is_empty() {
            return Vec::new();
        }
        let text = uri.as_str();
        let after_scheme = text.find("://").map_or(0, |i| i + 3);
        text.match_indices('/')
            .rev()
            .filter(|(at, _)| *at >= after_scheme)
            .filter_map(|(at, _)| match self.skill_dirs.get(&text[..=at]) {
                Some(Ok(i)) => self.skills.get(*i),
                _ => None,
            })
            .collect()
    }

    /// A listed skill, by the canonical URI of its `SKILL.md`.
    pub fn skill(&self, uri: &CanonicalUri) -> Option<&Resource> {
        self.by_skill.get(uri).map(|&i| &self.skills[i])
    }

    pub fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.by_prompt.get(name).map(|&i| &self.prompts[i])
    }

    pub fn offers_resources(&self) -> bool {
        !self.resources.is_empty() || !self.templates.is_empty() || !self.prefixes.is_empty()
    }

    pub fn offers_prompts(&self) -> bool {
        !self.prompts.is_empty()
    }

    pub fn offers_completions(&self) -> bool {
        !self.completing.is_empty()
    }

    /// Whether `server` takes resource subscriptions.
    pub fn subscribes(&self, server: &str) -> bool {
        self.subscribing.iter().any(|s| s.as_ref() == server)
    }
}

/// A skill's directory: its `SKILL.md` URI without `SKILL.md` (ending in `/`).
fn skill_dir(uri: &CanonicalUri) -> &str {
    uri.as_str().strip_suffix(&listed::SKILL_FILE[1..]).unwrap_or(uri.as_str())
}

/// Whether a prompt is served under another name than its server's (or namespaced) one.
fn renamed(prompt: &Prompt) -> bool {
    *prompt.name != *prompt.upstream_name && !prompt.name.ends_with(&format!("__{}", prompt.upstream_name))
}

/// Every server's listed resources (or templates, as `list` picks), with their server: sorted
/// by URI (or template), the listers of one in server order.
fn listers<'a, K: Ord>(
    servers: &'a [(Arc<str>, ServerSurface)],
    list: impl Fn(&'a ServerSurface) -> &'a [Listed<K>],
) -> Vec<(&'a Arc<str>, &'a Listed<K>)> {
    let mut all: Vec<(&Arc<str>, &Listed<K>)> =
        servers.iter().flat_map(|(server, surface)| list(surface).iter().map(move |l| (server, l))).collect();
    all.sort_by(|a, b| a.1.key.cmp(&b.1.key));
    all
}

/// A listed resource in the index, under its canonical URI (its definition says that form
/// too, see [`Listed`]): its parts shared, not copied.
fn resource(server: &Arc<str>, listed: &ListedResource) -> Resource {
    Resource {
        uri: listed.key.clone(),
        server: server.clone(),
        mime_type: listed.mime_type.clone(),
        definition: listed.definition.clone(),
    }
}

/// A listed template in the index, under its text as written: its parts shared, not copied.
fn template(server: &Arc<str>, listed: &ListedTemplate) -> Template {
    Template {
        text: listed.key.clone(),
        server: server.clone(),
        mime_type: listed.mime_type.clone(),
        definition: listed.definition.clone(),
    }
}

#[cfg(test)]
mod tests;
