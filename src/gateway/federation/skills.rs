//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) through the one endpoint:
//! `skills/list` paged from the index (every declaring server's entries, merged by URI) and
//! `skills/get` routed to the skill's server, and the extension declared to a caller.
//!
//! - **A skill is a resource.** Its identity is the canonical URI of its `SKILL.md`; its files
//!   are resources read through `resources/read` (routed to the skill's server: see `index`).
//!   So it is decided as a resource is: the caller's endpoint selects it by that URI and its
//!   server (`select.resources`, `exclude_resources`, `servers`), and the policy decides
//!   `Action::"read"` on `Resource::"<SKILL.md URI>"` (`mimeType` `text/markdown`). A skill the
//!   policy denies is absent from `skills/list`, `forbidden` on `skills/get`, and so is every
//!   file under its directory on `resources/read`, nested skills included — a rule on the
//!   skill covers all beneath it.
//! - **Entries pass unchanged.** An entry (frontmatter, manifest, digests) is the server's: only
//!   a non-canonical `uri` is written in its canonical form. The gateway never recomputes a
//!   digest: a file an after-hook edits no longer matches its digest, and a verifying client
//!   refuses it — the honest outcome (SEP-2640: "any intermediary … can rewrite both";
//!   this one does not hide its edits).
//! - **The one way out.** An entry is catalogue data, as a `resources/list` item is: listed from
//!   the index, or (`skills/get`) rebuilt from the checked fields of the server's answer. The
//!   content a model reads — `SKILL.md` and the other files — comes through `resources/read`
//!   and meets the after-hooks there as resource content (kind `resource`, matched by URI).
//! - **Declared where carried**, by the one rule of every carried extension
//!   (`protocol/extensions.rs`, `gateway/extensions.rs`): to a caller whose endpoint selects a
//!   server that declared it. The methods answer `-32601` where no such server is behind the
//!   endpoint; a caller that sends them without having declared the extension is answered all
//!   the same (the request is its own opt-in, as for the servers, FastMCP's included).

use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{
    Index, SurfaceCall,
    answers::{bad_input, canonical_param, page_of},
    index,
};
use crate::{
    error::{Category, GatewayError},
    gateway::{Gateway, outbound::Released},
    identity::Caller,
    policy::SurfaceItem,
    resource_uri::CanonicalUri,
};

/// The MIME type a skill is decided under (its `SKILL.md`'s, SEP-2640).
const SKILL_MIME: &str = "text/markdown";

impl Gateway {
    /// `skills/list` and `skills/get`; `-32601` where no server behind the caller's endpoint
    /// declared the extension.
    pub(super) async fn skills_answer(
        &self,
        method: &str,
        index: &Index,
        params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        if !self.carries_skills(&call.caller, index) {
            return Err(GatewayError::new(Category::MethodNotFound, method.to_string()));
        }
        if method == "skills/list" {
            let visible = index.skills.iter().filter(|s| self.may_read_skill(&call.caller, index, s));
            return page_of(visible.map(|s| &*s.definition), &params, "skills").map(Released::gateways_own);
        }
        self.get_skill(index, params, call).await
    }

    /// Whether a server the caller's endpoint selects declared the Skills extension.
    pub(in crate::gateway) fn carries_skills(&self, caller: &Caller, index: &Index) -> bool {
        let settings = self.settings();
        index.skill_servers.iter().any(|server| match caller.endpoint.as_deref() {
            Some(endpoint) => settings.endpoints.selects_server(endpoint, server),
            None => true,
        })
    }

    /// Whether the caller may see a listed skill (its endpoint, then the policy).
    pub(super) fn may_read_skill(&self, caller: &Caller, index: &Index, skill: &index::Resource) -> bool {
        self.decide_skill(caller, index, &skill.uri, &skill.server).is_ok()
    }

    /// The decision on the skill `uri` of `server`, as on the resource `uri` (`text/markdown`),
    /// and on every listed skill of that server it is nested in: a skill's directory is its
    /// own (SEP-2640: a nested skill's files are the enclosing skill's supporting files too),
    /// so a rule on a skill covers all beneath it.
    pub(super) fn decide_skill(
        &self,
        caller: &Caller,
        index: &Index,
        uri: &CanonicalUri,
        server: &str,
    ) -> Result<(), Box<super::access::Denied>> {
        self.decide_item(caller, SurfaceItem::Resource { uri, server, mime_type: Some(SKILL_MIME) })?;
        self.decide_enclosing_skills(caller, index, uri, server)
    }

    /// The decision on every listed skill of `server` whose directory holds `uri` (but the
    /// skill `uri` itself): a file of a denied skill is denied.
    pub(super) fn decide_enclosing_skills(
        &self,
        caller: &Caller,
        index: &Index,
        uri: &CanonicalUri,
        server: &str,
    ) -> Result<(), Box<super::access::Denied>> {
        for skill in index.skills_holding(uri) {
            if *skill.server == *server && skill.uri != *uri {
                let item = SurfaceItem::Resource { uri: &skill.uri, server, mime_type: Some(SKILL_MIME) };
                self.decide_item(caller, item)?;
            }
        }
        Ok(())
    }

    async fn get_skill(
        &self,
        index: &Index,
        mut params: Map<String, Value>,
        call: &SurfaceCall,
    ) -> Result<Released<Value>, GatewayError> {
        let started = Instant::now();
        let method = "skills/get";
        let uri = match canonical_param(params.get("uri")) {
            Ok(uri) => uri,
            Err(err) => {
                self.record_surface(call, started, method, "", None, err.category.as_str(), None);
                return Err(err);
            }
        };
        params.insert("uri".into(), json!(uri.as_str()));
        let shown = crate::redact::url(uri.as_str());
        // A listed skill's server; else (SEP-2640: a server answers for skills it does not
        // list) the server a prefix or a listed skill's directory routes the URI to, when it
        // declared the extension.
        let server = match index.skill(&uri) {
            Some(skill) => Some(skill.server.clone()),
            None => index.route_uri(&uri).ok().filter(|s| index.skill_servers.contains(s)),
        };
        let unknown = || bad_input("no server behind this endpoint serves a skill at params.uri");
        let Some(server) = server.filter(|_| uri.as_str().ends_with(super::listed::SKILL_FILE)) else {
            let err = unknown();
            self.record_surface(call, started, method, &shown, None, err.category.as_str(), None);
            return Err(err);
        };
        if let Err(denied) = self.decide_skill(&call.caller, index, &uri, &server) {
            let mut denied = *denied;
            // Outside the caller's endpoint: an unknown skill there.
            if denied.error.category == Category::ResourceNotFound {
                denied.error = unknown();
            }
            return Err(self.refused(call, started, method, &shown, &server, denied));
        }
        let settings = self.settings();
        let budget = settings.config.defaults.max_result_bytes;
        let result =
            match self.forward_surface(&server, method, params, Some(uri.as_str().into()), call).await {
                Ok(answer) => checked_entry(answer, &uri, budget),
                Err(err) => Err(self.release_error(&settings, uri.as_str(), &server, err)),
            };
        self.answered(call, started, method, &shown, &server, result).map(Released::skill_entry)
    }
}

/// A `skills/get` answer reduced to its checked entry: `{"skill": entry}`, the entry as the
/// server sent it (its digests untouched), provided it is the skill asked for, has the shape
/// SEP-2640 gives an entry, and fits the result budget.
fn checked_entry(mut answer: Value, uri: &CanonicalUri, budget: usize) -> Result<Value, GatewayError> {
    let protocol = |detail: &str| {
        GatewayError::new(Category::UpstreamProtocol, format!("the server's skills/get answer: {detail}"))
    };
    let Some(skill) = answer.get_mut("skill").map(Value::take) else {
        return Err(protocol("no skill object"));
    };
    let kept = super::listed::Listed::skill(skill.clone()).map_err(|_| {
        protocol("the skill is not a SEP-2640 entry (a SKILL.md uri, frontmatter.name, resources)")
    })?;
    if kept.key != *uri {
        return Err(protocol("the skill's uri is not the one asked for"));
    }
    let size = kept.definition.get().len();
    if size > budget {
        return Err(GatewayError::new(
            Category::ResponseTooLarge,
            format!("a skill entry of {size} bytes is over the result budget ({budget} bytes)"),
        ));
    }
    Ok(json!({"skill": super::listed::parsed(&kept.definition)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(text: &str) -> CanonicalUri {
        CanonicalUri::parse(text).unwrap()
    }

    #[test]
    fn an_entry_passes_with_its_digests_untouched() {
        let entry = json!({
            "uri": "skill://git-workflow/SKILL.md",
            "frontmatter": {"name": "git-workflow", "description": "d"},
            "resources": [{"uri": "skill://git-workflow/SKILL.md", "digest": "sha256:ab", "size": 3}],
        });
        let answer = json!({"skill": entry.clone(), "resultType": "complete", "ttlMs": 5});
        let checked = checked_entry(answer, &uri("skill://git-workflow/SKILL.md"), 10_000).unwrap();
        assert_eq!(checked, json!({"skill": entry}));
    }

    #[test]
    fn an_entry_for_another_skill_or_of_another_shape_is_refused() {
        let other = json!({"skill": {"uri": "skill://b/SKILL.md", "frontmatter": {"name": "b"}, "resources": "dynamic"}});
        let err = checked_entry(other, &uri("skill://a/SKILL.md"), 10_000).unwrap_err();
        assert_eq!(err.category, Category::UpstreamProtocol);
        let no_manifest = json!({"skill": {"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a"}}});
        let err = checked_entry(no_manifest, &uri("skill://a/SKILL.md"), 10_000).unwrap_err();
        assert_eq!(err.category, Category::UpstreamProtocol);
        let big = json!({"skill": {"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a"}, "resources": "dynamic"}});
        assert_eq!(
            checked_entry(big, &uri("skill://a/SKILL.md"), 10).unwrap_err().category,
            Category::ResponseTooLarge
        );
    }
}
