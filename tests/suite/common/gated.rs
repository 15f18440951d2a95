//! The gated server (`tests/peers/servers/gated_server.py`, the Python SDK as a session-era
//! server) and what it recorded: every request with its JSON-RPC method, tool and session, the
//! sessions it issued, and its `hold` calls' starts and releases, in the order they happened.
//! Its `hold` tool blocks until the test releases it, and its `tools/list` can be held too.

use serde_json::Value;

use super::{Proc, TempFile, free_port, gated_server, http_server};

/// The gated server and what it recorded.
pub struct Gated {
    _proc: Proc,
    port: u16,
    events: TempFile,
    release: TempFile,
    list_gate: TempFile,
}

impl Gated {
    pub fn start() -> Self {
        let (port, events, release, list_gate) = (
            free_port(),
            TempFile::new("gated.events"),
            TempFile::new("gated.release"),
            TempFile::new("gated.list-gate"),
        );
        let proc = gated_server(port, events.arg(), release.arg(), Some(list_gate.arg()));
        Self { _proc: proc, port, events, release, list_gate }
    }

    /// From now on, a `tools/list` waits at the server until [`Gated::open_lists`].
    pub fn hold_lists(&self) {
        std::fs::write(self.list_gate.path(), b"held").unwrap();
    }

    /// Lets the held `tools/list` requests answer.
    pub fn open_lists(&self) {
        std::fs::remove_file(self.list_gate.path()).unwrap();
    }

    /// Its `[servers.gated]` table, with `extra` lines.
    pub fn table(&self, extra: &str) -> String {
        format!("{}{extra}\n", http_server("gated", &format!("http://127.0.0.1:{}/mcp", self.port)))
    }

    /// Every event recorded so far, in order (a line still being written is left for later).
    pub fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.events.path()).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("gated event is not JSON ({e}): {l}")))
            .collect()
    }

    /// Where the first event `what` accepts is in the record.
    pub fn position(&self, what: impl Fn(&Value) -> bool) -> Option<usize> {
        self.events().iter().position(what)
    }

    /// Whether the `hold` call tagged `tag` reached the tool.
    pub fn started(&self, tag: &str) -> bool {
        self.position(|e| e["event"] == "hold_started" && e["tag"] == tag).is_some()
    }

    /// Lets every `hold` call answer.
    pub fn release(&self) {
        std::fs::write(self.release.path(), b"go").unwrap();
    }

    /// The session the `tools/call` of `tool` (the first one) came with.
    pub fn call_session(&self, tool: &str) -> String {
        let events = self.events();
        let call = events
            .iter()
            .find(|e| e["rpc"] == "tools/call" && e["tool"] == tool)
            .unwrap_or_else(|| panic!("the server never saw a call of {tool}: {events:?}"));
        call["session"].as_str().unwrap_or_else(|| panic!("a call without a session: {call}")).to_string()
    }

    /// How many `initialize` requests (new sessions asked for) the server received.
    pub fn initializes(&self) -> usize {
        self.events().iter().filter(|e| e["rpc"] == "initialize").count()
    }

    /// The `DELETE`s (sessions ended) it received: where in the record, and which session.
    pub fn deletes(&self) -> Vec<(usize, String)> {
        self.events()
            .iter()
            .enumerate()
            .filter(|(_, e)| e["http"] == "DELETE")
            .map(|(i, e)| (i, e["session"].as_str().unwrap_or_default().to_string()))
            .collect()
    }
}
