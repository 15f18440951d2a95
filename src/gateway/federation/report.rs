//! The operators' view of the federated surface (`GET /admin/registry/surface`, the console's
//! Catalogue page): per server, how many resources, resource templates, prompts and skills it serves
//! through the one endpoint, what two servers both claim (a URI or template served by neither
//! unless a prefix names the owner, a prompt name served as `server__name`), and the served
//! items themselves, at most [`MAX_ITEMS`] of each kind (a 10,000-resource server must not
//! make the page's every poll megabytes). Names, URIs (query values redacted, as in the logs)
//! and MIME types only: never a definition's description or a resource's contents.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::index::Index;

/// Most items of each kind (resources, templates, prompts) the report lists.
pub const MAX_ITEMS: usize = 500;

/// What one server serves of each kind.
#[derive(Default)]
struct Counts {
    resources: usize,
    templates: usize,
    prompts: usize,
    skills: usize,
}

/// The report of `index` (see the module's doc).
pub fn report(index: &Index) -> Value {
    let mut servers: BTreeMap<&str, Counts> = BTreeMap::new();
    for resource in &index.resources {
        servers.entry(&resource.server).or_default().resources += 1;
    }
    for (template, _) in &index.templates {
        servers.entry(&template.server).or_default().templates += 1;
    }
    for prompt in &index.prompts {
        servers.entry(&prompt.server).or_default().prompts += 1;
    }
    for skill in &index.skills {
        servers.entry(&skill.server).or_default().skills += 1;
    }
    for server in index.completing.iter().chain(&index.skill_servers) {
        servers.entry(server).or_default();
    }
    let per_server: Vec<Value> = servers
        .iter()
        .map(|(server, counts)| {
            json!({
                "server": server,
                "resources": counts.resources,
                "resource_templates": counts.templates,
                "prompts": counts.prompts,
                "completions": index.completing.iter().any(|s| s.as_ref() == *server),
                "skills": counts.skills,
                "skills_extension": index.skill_servers.iter().any(|s| s.as_ref() == *server),
            })
        })
        .collect();
    let resources: Vec<Value> = index
        .resources
        .iter()
        .take(MAX_ITEMS)
        .map(|r| {
            json!({
                "uri": crate::redact::url(r.uri.as_str()),
                "name": serde_json::from_str::<Value>(r.definition.get()).ok().and_then(|d| d.get("name").cloned()).filter(Value::is_string),
                "server": r.server.as_ref(),
                "mime_type": r.mime_type.as_deref(),
            })
        })
        .collect();
    let templates: Vec<Value> = index
        .templates
        .iter()
        .take(MAX_ITEMS)
        .map(|(t, _)| json!({"uri_template": t.text.as_ref(), "server": t.server.as_ref(), "mime_type": t.mime_type.as_deref()}))
        .collect();
    let prompts: Vec<Value> = index
        .prompts
        .iter()
        .take(MAX_ITEMS)
        .map(|p| {
            let arguments = p.definition.get("arguments").and_then(Value::as_array).map_or(0, Vec::len);
            json!({"name": p.name.as_ref(), "server": p.server.as_ref(), "upstream_name": p.upstream_name.as_ref(), "arguments": arguments})
        })
        .collect();
    // A skill: its URI, its name and how many files its manifest lists (`dynamic`: none).
    let skills: Vec<Value> = index
        .skills
        .iter()
        .take(MAX_ITEMS)
        .map(|s| {
            let entry = super::listed::parsed(&s.definition);
            let files = match &entry["resources"] {
                Value::Array(files) => json!(files.len()),
                other => other.clone(),
            };
            json!({"uri": crate::redact::url(s.uri.as_str()), "name": entry["frontmatter"]["name"], "server": s.server.as_ref(), "files": files})
        })
        .collect();
    let collisions: Vec<Value> = index
        .collisions
        .iter()
        .map(|c| {
            let name = if c.kind == "prompt" { c.name.clone() } else { crate::redact::url(&c.name) };
            json!({"kind": c.kind, "name": name, "servers": c.servers.iter().map(|s| s.as_ref()).collect::<Vec<_>>()})
        })
        .collect();
    json!({
        "servers": per_server,
        "totals": {
            "resources": index.resources.len(),
            "resource_templates": index.templates.len(),
            "prompts": index.prompts.len(),
            "skills": index.skills.len(),
        },
        "max_items": MAX_ITEMS,
        "resources": resources,
        "resource_templates": templates,
        "prompts": prompts,
        "skills": skills,
        "collisions": collisions,
    })
}
