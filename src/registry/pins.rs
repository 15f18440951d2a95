//! Definition pinning (`catalogue.pin_tool_definitions`): a discovered tool's (or a federated
//! prompt's) definition goes live once, and a later change to it (the "rug pull": a
//! description that turns into instructions after it was trusted) waits for an operator's
//! approval. Tools and prompts are pinned by the same rules, each under its own kind: a
//! prompt's hash covers what a model or user sees of it ([`prompt_hash`]: title, description,
//! arguments).
//!
//! Trust on first use: a tool seen for the first time is pinned as it is, unless the pin file
//! already lists it (then the file's hash is the one approved). A definition whose hash
//! differs from its pin is *pending*: the approved definition keeps being served and called;
//! when only a hash is known for it (a pin file written by hand), the tool is hidden until
//! approved. Approvals (`POST /admin/registry/approve`, `mcp-gateway registry approve`) move
//! a pending definition to the pins. Pins live in memory and, with `catalogue.pin_file`, in a
//! JSON file (`{"pins": [{"server", "tool" | "prompt", "hash", "definition"}]}`) rewritten on
//! every change, so approvals survive a restart. Only discovered tools are pinned: configured
//! (static) tools and DynamoDB registry entries are the operator's own.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{hash::canonical_hash, record::definition_hash};

/// What a pin is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Tool,
    Prompt,
    /// An OpenAPI server's approved target origin (one per server, named [`ORIGIN_PIN`]).
    Origin,
}

/// The name of an OpenAPI server's origin pin.
pub const ORIGIN_PIN: &str = "target";

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Origin => "origin",
        }
    }

    /// The hash a definition of this kind is pinned by.
    fn hash(self, definition: &Value) -> String {
        match self {
            Kind::Tool => definition_hash(definition),
            Kind::Prompt => prompt_hash(definition),
            Kind::Origin => canonical_hash(definition),
        }
    }
}

/// Hash of what a model or a user sees of a prompt: its title, description and arguments.
pub fn prompt_hash(definition: &Value) -> String {
    canonical_hash(&json!({
        "title": definition.get("title"),
        "description": definition.get("description"),
        "arguments": definition.get("arguments"),
    }))
}

/// One approved definition of one server's tool or prompt.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(try_from = "PinRecord", into = "PinRecord")]
pub struct Pin {
    pub server: String,
    pub kind: Kind,
    /// The tool's (or prompt's) name on its server.
    pub name: String,
    /// [`definition_hash`] (or [`prompt_hash`]) of the approved definition.
    pub hash: String,
    /// The approved definition as the server sent it; `None` when only its hash is known.
    pub definition: Option<Value>,
}

/// A pin as the pin file writes it: `tool` or `prompt` names it; `origin` is an OpenAPI
/// server's approved target origin itself.
#[derive(Serialize, Deserialize)]
struct PinRecord {
    server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
    hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    definition: Option<Value>,
}

impl TryFrom<PinRecord> for Pin {
    type Error = String;

    fn try_from(record: PinRecord) -> Result<Self, String> {
        let (kind, name) = match (record.tool, record.prompt, record.origin) {
            (Some(tool), None, None) => (Kind::Tool, tool),
            (None, Some(prompt), None) => (Kind::Prompt, prompt),
            (None, None, Some(origin)) => {
                let definition = json!({"origin": origin});
                let hash = canonical_hash(&definition);
                let name = ORIGIN_PIN.to_string();
                return Ok(Pin {
                    server: record.server,
                    kind: Kind::Origin,
                    name,
                    hash,
                    definition: Some(definition),
                });
            }
            _ => return Err("a pin names exactly one of \"tool\", \"prompt\" and \"origin\"".into()),
        };
        Ok(Pin { server: record.server, kind, name, hash: record.hash, definition: record.definition })
    }
}

impl From<Pin> for PinRecord {
    fn from(pin: Pin) -> Self {
        let (tool, prompt) = match pin.kind {
            Kind::Tool => (Some(pin.name), None),
            Kind::Prompt => (None, Some(pin.name)),
            Kind::Origin => {
                let origin = pin.definition.as_ref().and_then(|d| d["origin"].as_str()).map(str::to_string);
                return PinRecord {
                    server: pin.server,
                    tool: None,
                    prompt: None,
                    origin,
                    hash: pin.hash,
                    definition: None,
                };
            }
        };
        PinRecord {
            server: pin.server,
            tool,
            prompt,
            origin: None,
            hash: pin.hash,
            definition: pin.definition,
        }
    }
}

/// A definition that differs from its pin, waiting for approval.
#[derive(Debug, Clone)]
struct Pending {
    hash: String,
    definition: Value,
    /// Seconds since the epoch when this definition was first seen.
    since: u64,
}

#[derive(Debug, Serialize, Deserialize, Default)]
struct PinFile {
    pins: Vec<Pin>,
}

/// Server, kind, name on the server.
type Key = (String, Kind, String);

#[derive(Debug, Default)]
struct State {
    pins: BTreeMap<Key, Pin>,
    pending: BTreeMap<Key, Pending>,
}

/// What an approval did.
#[derive(Debug)]
pub enum Approval {
    /// These `(server, kind, tool | prompt, hash)` are now pinned.
    Approved(Vec<Value>),
    /// Nothing pending matches.
    NothingPending,
    /// The name matches pending changes of several servers: name the server.
    Ambiguous(Vec<String>),
}

/// The pins and the pending changes.
#[derive(Debug)]
pub struct PinStore {
    file: Option<PathBuf>,
    state: Mutex<State>,
}

impl PinStore {
    /// Loads the pin file if there is one (a missing file is an empty one; an unreadable one
    /// is a startup error: serving without the operator's approvals would trust anew).
    pub fn load(file: Option<PathBuf>) -> anyhow::Result<Self> {
        let mut state = State::default();
        if let Some(path) = &file
            && path.exists()
        {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading pin file {}", path.display()))?;
            let parsed: PinFile = serde_json::from_str(&text)
                .with_context(|| format!("pin file {} is not {{\"pins\": [...]}}", path.display()))?;
            for pin in parsed.pins {
                state.pins.insert((pin.server.clone(), pin.kind, pin.name.clone()), pin);
            }
        }
        Ok(Self { file, state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The definitions of `server`'s discovered `tools` to serve: each as it is when it matches
    /// its pin (or is pinned now, at first sight), the approved one while a change is pending,
    /// none while a change is pending and no approved definition is known.
    pub fn resolve(&self, server: &str, tools: &[Value]) -> Vec<Value> {
        self.resolve_kind(Kind::Tool, server, tools)
    }

    /// [`Self::resolve`] for `server`'s listed prompts.
    pub fn resolve_prompts(&self, server: &str, prompts: &[Value]) -> Vec<Value> {
        self.resolve_kind(Kind::Prompt, server, prompts)
    }

    fn resolve_kind(&self, kind: Kind, server: &str, items: &[Value]) -> Vec<Value> {
        let mut state = self.lock();
        let mut pinned_now = false;
        let mut served = Vec::with_capacity(items.len());
        let mut offered = Vec::with_capacity(items.len());
        let what = kind.as_str();
        for item in items {
            let Some(name) = item.get("name").and_then(Value::as_str) else { continue };
            let key = (server.to_string(), kind, name.to_string());
            offered.push(key.clone());
            let hash = kind.hash(item);
            match state.pins.get(&key) {
                None => {
                    let pin = Pin {
                        server: key.0.clone(),
                        kind,
                        name: key.2.clone(),
                        hash,
                        definition: Some(item.clone()),
                    };
                    tracing::info!(server, kind = what, name, hash = %pin.hash, "{what} definition pinned at first sight");
                    state.pins.insert(key, pin);
                    pinned_now = true;
                    served.push(item.clone());
                }
                Some(pin) if pin.hash == hash => {
                    if pin.definition.is_none() {
                        // A hash-only pin learns the definition it approves.
                        if let Some(pin) = state.pins.get_mut(&key) {
                            pin.definition = Some(item.clone());
                            pinned_now = true;
                        }
                    }
                    state.pending.remove(&key);
                    served.push(item.clone());
                }
                Some(pin) => {
                    let approved = pin.definition.clone();
                    let approved_hash = pin.hash.clone();
                    if state.pending.get(&key).is_none_or(|p| p.hash != hash) {
                        tracing::warn!(
                            server,
                            kind = what,
                            name,
                            approved = %approved_hash,
                            offered = %hash,
                            served = if approved.is_some() { "approved definition" } else { "nothing (hidden)" },
                            "{what} definition changed; not served until approved (mcp-gateway registry approve)"
                        );
                        let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                        state.pending.insert(key, Pending { hash, definition: item.clone(), since });
                    }
                    served.extend(approved);
                }
            }
        }
        // Something the server no longer offers has nothing pending.
        state.pending.retain(|key, _| key.0 != server || key.1 != kind || offered.contains(key));
        if pinned_now {
            self.save(&state);
        }
        served
    }

    /// The approved target origin of OpenAPI server `server`, if one is pinned.
    pub fn origin(&self, server: &str) -> Option<String> {
        let state = self.lock();
        let pin = state.pins.get(&(server.to_string(), Kind::Origin, ORIGIN_PIN.to_string()))?;
        pin.definition.as_ref()?["origin"].as_str().map(str::to_string)
    }

    /// Pins `origin` as OpenAPI server `server`'s approved target origin (saved to the pin file).
    pub fn pin_origin(&self, server: &str, origin: &str) {
        let mut state = self.lock();
        let definition = json!({"origin": origin});
        let key = (server.to_string(), Kind::Origin, ORIGIN_PIN.to_string());
        let hash = canonical_hash(&definition);
        if state.pins.get(&key).is_some_and(|pin| pin.hash == hash) {
            return;
        }
        let pin = Pin {
            server: key.0.clone(),
            kind: Kind::Origin,
            name: key.2.clone(),
            hash,
            definition: Some(definition),
        };
        state.pins.insert(key, pin);
        self.save(&state);
    }

    /// Pending changes, by server, kind and name (`"tool": NAME` or `"prompt": NAME`).
    pub fn pending(&self) -> Vec<Value> {
        let state = self.lock();
        state
            .pending
            .iter()
            .map(|(key, pending)| {
                let (server, kind, name) = key;
                let approved = state.pins.get(key);
                json!({
                    "server": server,
                    "kind": kind.as_str(),
                    kind.as_str(): name,
                    "approved_hash": approved.map(|p| p.hash.as_str()),
                    "pending_hash": pending.hash,
                    "approved_description": approved.and_then(|p| p.definition.as_ref()).and_then(|d| d.get("description")),
                    "pending_description": pending.definition.get("description"),
                    "since_epoch_secs": pending.since,
                    "serving": if approved.is_some_and(|p| p.definition.is_some()) { "approved" } else { "hidden" },
                })
            })
            .collect()
    }

    /// Pending changes of `kind`.
    pub fn pending_count(&self, kind: Kind) -> usize {
        self.lock().pending.keys().filter(|key| key.1 == kind).count()
    }

    /// Pins of `kind`.
    pub fn pinned_count(&self, kind: Kind) -> usize {
        self.lock().pins.keys().filter(|key| key.1 == kind).count()
    }

    /// Approves pending changes: all of them, or those of the tool or prompt `named` (its name
    /// on the server, or its namespaced `server__name` name), optionally only on `server`.
    pub fn approve(&self, named: Option<(Kind, &str)>, server: Option<&str>, all: bool) -> Approval {
        let mut state = self.lock();
        let matching: Vec<Key> = state
            .pending
            .keys()
            .filter(|(s, k, n)| {
                let server_ok = server.is_none_or(|wanted| wanted == s);
                let name_ok = all
                    || named.is_some_and(|(kind, wanted)| {
                        kind == *k && (wanted == n || wanted == super::catalog::namespaced(s, n))
                    });
                server_ok && name_ok
            })
            .cloned()
            .collect();
        if matching.is_empty() {
            return Approval::NothingPending;
        }
        if !all && server.is_none() {
            let mut servers: Vec<String> = matching.iter().map(|(s, _, _)| s.clone()).collect();
            servers.dedup();
            if servers.len() > 1 {
                return Approval::Ambiguous(servers);
            }
        }
        let mut approved = Vec::new();
        for key in matching {
            if let Some(pending) = state.pending.remove(&key) {
                let what = key.1.as_str();
                tracing::warn!(server = %key.0, kind = what, name = %key.2, hash = %pending.hash, "{what} definition change approved");
                approved.push(json!({"server": key.0, "kind": what, what: key.2, "hash": pending.hash}));
                let pin = Pin {
                    server: key.0.clone(),
                    kind: key.1,
                    name: key.2.clone(),
                    hash: pending.hash,
                    definition: Some(pending.definition),
                };
                state.pins.insert(key, pin);
            }
        }
        self.save(&state);
        Approval::Approved(approved)
    }

    /// Writes the pin file (atomically: a temporary file renamed over it). A failed write is
    /// logged; the pins in memory still apply.
    fn save(&self, state: &State) {
        let Some(path) = &self.file else { return };
        let file = PinFile { pins: state.pins.values().cloned().collect() };
        let written = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other).and_then(|bytes| {
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, bytes)?;
            std::fs::rename(&temporary, path)
        });
        if let Err(e) = written {
            tracing::error!(file = %path.display(), error = %e, "pin file not written; pins kept in memory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(description: &str) -> Value {
        json!({"name": "lookup", "description": description, "inputSchema": {"type": "object"}})
    }

    #[test]
    fn a_changed_definition_waits_for_approval_and_the_approved_one_is_served() {
        let pins = PinStore::load(None).unwrap();
        assert_eq!(pins.resolve("s", &[tool("v1")]), vec![tool("v1")], "pinned at first sight");
        assert_eq!(pins.resolve("s", &[tool("v2")]), vec![tool("v1")], "the approved one stays");
        assert_eq!(pins.pending_count(Kind::Tool), 1);
        assert!(matches!(pins.approve(Some((Kind::Tool, "other")), None, false), Approval::NothingPending));
        assert!(matches!(
            pins.approve(Some((Kind::Prompt, "lookup")), None, false),
            Approval::NothingPending
        ));
        assert!(matches!(
            pins.approve(Some((Kind::Tool, "s__lookup")), None, false),
            Approval::Approved(ref a) if a.len() == 1
        ));
        assert_eq!(pins.resolve("s", &[tool("v2")]), vec![tool("v2")]);
        assert_eq!(pins.pending_count(Kind::Tool), 0);
    }

    #[test]
    fn prompts_are_pinned_apart_from_tools_of_the_same_name() {
        let pins = PinStore::load(None).unwrap();
        let prompt = |description: &str| json!({"name": "lookup", "description": description, "arguments": [{"name": "q"}]});
        pins.resolve("s", &[tool("v1")]);
        assert_eq!(pins.resolve_prompts("s", &[prompt("p1")]), vec![prompt("p1")], "pinned at first sight");
        assert_eq!(pins.resolve_prompts("s", &[prompt("p2")]), vec![prompt("p1")], "the approved one stays");
        assert_eq!((pins.pending_count(Kind::Prompt), pins.pending_count(Kind::Tool)), (1, 0));
        // The tool's list does not clear the prompt's pending change, nor the other way round.
        pins.resolve("s", &[tool("v1")]);
        assert_eq!(pins.pending()[0]["prompt"], "lookup");
        assert_eq!(pins.pending()[0]["kind"], "prompt");
        assert!(matches!(pins.approve(Some((Kind::Tool, "lookup")), None, false), Approval::NothingPending));
        assert!(matches!(
            pins.approve(Some((Kind::Prompt, "lookup")), Some("s"), false),
            Approval::Approved(_)
        ));
        assert_eq!(pins.resolve_prompts("s", &[prompt("p2")]), vec![prompt("p2")]);
        assert_eq!(pins.pinned_count(Kind::Prompt), 1);
    }

    #[test]
    fn approvals_survive_a_restart_through_the_pin_file_and_hash_only_pins_hide() {
        let path = std::env::temp_dir().join(format!("mcp-gateway-pins-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let pins = PinStore::load(Some(path.clone())).unwrap();
        pins.resolve("s", &[tool("v1")]);
        let restarted = PinStore::load(Some(path.clone())).unwrap();
        assert_eq!(
            restarted.resolve("s", &[tool("v2")]),
            vec![tool("v1")],
            "the file's pin is not re-trusted"
        );
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["pins"][0]["tool"], "lookup", "the file's shape is unchanged for tools");
        assert!(saved["pins"][0].get("prompt").is_none());
        pins.pin_origin("api", "https://api.example.com:443");
        let restarted = PinStore::load(Some(path.clone())).unwrap();
        assert_eq!(
            restarted.origin("api").as_deref(),
            Some("https://api.example.com:443"),
            "origins survive"
        );
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(
            saved["pins"].as_array().unwrap().iter().any(|p| p["origin"] == "https://api.example.com:443")
        );
        let hash_only = json!({"pins": [{"server": "s", "tool": "lookup", "hash": "0000"}]});
        std::fs::write(&path, hash_only.to_string()).unwrap();
        let by_hand = PinStore::load(Some(path.clone())).unwrap();
        assert!(by_hand.resolve("s", &[tool("v1")]).is_empty(), "no approved definition known: hidden");
        assert_eq!(by_hand.pending()[0]["serving"], "hidden");
        let _ = std::fs::remove_file(&path);
    }
}
