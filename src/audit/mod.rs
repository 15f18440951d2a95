//! The audit trail: one JSON line per `tools/call` decision, in a sink of its own.
//!
//! Who called which tool on which server, whether the gateway let the call through and which
//! rule decided it, and how the call ended — enough to answer "who did what" after the fact,
//! apart from the operational logs (which may be sampled, filtered or lost with a log level).
//! A line never holds the arguments, a token or a session id: the arguments appear as the same
//! hash the call log line carries (`args_sha256`, correlatable, not reversible for arguments
//! with enough entropy).
//!
//! Lines go through the lossy writer of the logs ([`crate::telemetry::lossy`]), bounded in
//! bytes (`audit.queue_bytes`): a slow or stuck sink never stalls a call. Lines that cannot be
//! queued, or that the sink fails to take, are counted (`mcp_gateway_audit_lines_dropped_total`)
//! and the next line written says how many were lost just before it (`"dropped_before": N`), so
//! a gap is visible in the trail itself. With `sink = "off"` nothing is formatted.

use std::{
    fs::File,
    io::Write,
    path::PathBuf,
    sync::{Arc, LazyLock, Mutex},
    time::{Duration, SystemTime},
};

use crate::{
    config::{AuditConfig, AuditSinkKind},
    telemetry::lossy::{self, DroppedLines, Guard, LossyWriter},
};

/// The rule named when no tool policy is configured.
pub const NO_POLICY: &str = "no_policy";

static NO_POLICY_RULE: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(NO_POLICY));

/// What the gateway decided about a call, and the rule that decided it: the policy's (allow or
/// deny, with the rule's id), or a quota's denial (with the quota's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: Arc<str>,
}

impl Decision {
    /// Allowed because no policy is configured.
    pub fn no_policy() -> Self {
        Self { allowed: true, rule: NO_POLICY_RULE.clone() }
    }

    /// Denied by the quota named `quota`.
    pub fn denied_by_quota(quota: &Arc<str>) -> Self {
        Self { allowed: false, rule: quota.clone() }
    }

    pub fn as_str(&self) -> &'static str {
        if self.allowed { "allow" } else { "deny" }
    }
}

/// The facts of one audit line, taken when the call ends.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    pub at: SystemTime,
    pub request_id: Arc<str>,
    pub trace_id: Option<String>,
    /// `None` for an anonymous caller.
    pub subject: Option<Arc<str>>,
    /// The method when it is not `tools/call` (`resources/read`, `prompts/get`,
    /// `completion/complete`; `tool` is then the URI, redacted, or the prompt's name).
    pub method: Option<&'static str>,
    /// The tool as resolved, or the (length-bounded) name asked for when it did not resolve.
    pub tool: Option<Arc<str>>,
    /// The name the caller asked for, when it is not `tool`: an export alias, or the tool a
    /// fallback's alternative stood in for (`tool` is then the alternative, which really ran).
    pub requested_tool: Option<Arc<str>>,
    pub server: Option<Arc<str>>,
    /// The endpoint the request came through (`/mcp/NAME`; `None`: the plain `/mcp`).
    pub endpoint: Option<Arc<str>>,
    pub decision: Decision,
    /// The call's outcome label (`success` is written `ok`).
    pub outcome: &'static str,
    pub args_sha256: Option<String>,
    pub latency_us: u64,
    /// The guardrail hooks' decisions on the call, in the order they ran (written only when
    /// a hook ran; never what a rule matched).
    pub guardrails: Vec<crate::guardrail::Mark>,
}

/// The audit sink of a gateway.
pub struct Audit {
    writer: LossyWriter,
    dropped: DroppedLines,
    guard: Mutex<Option<Guard>>,
}

impl Audit {
    /// The sink `config` describes (`None` when the audit trail is off).
    pub fn start(config: &AuditConfig) -> Option<Arc<Self>> {
        let (writer, dropped, guard) = match (config.sink, &config.file) {
            (AuditSinkKind::Off, _) => return None,
            (AuditSinkKind::Stdout, _) => {
                lossy::writer_bounded(std::io::stdout(), "audit-writer", usize::MAX, config.queue_bytes)
            }
            (AuditSinkKind::File, Some(path)) => lossy::writer_bounded(
                AppendFile { path: path.clone(), file: None },
                "audit-writer",
                usize::MAX,
                config.queue_bytes,
            ),
            (AuditSinkKind::File, None) => return None, // refused by validation
        };
        Some(Arc::new(Self { writer, dropped, guard: Mutex::new(Some(guard)) }))
    }

    /// Queues the line of `entry`, or counts it as dropped when the queue is full (then
    /// returns `false`).
    pub fn write(&self, entry: &AuditEntry) -> bool {
        let body = format_body(entry);
        self.writer.push_line(&body, |line, lost| {
            if lost > 0 {
                line.extend_from_slice(b",\"dropped_before\":");
                line.extend_from_slice(lost.to_string().as_bytes());
            }
            line.extend_from_slice(b"}\n");
        })
    }

    /// Queues a line that is not a call's: `{"ts", "log": "audit", "event": event, fields…}`
    /// (string fields, `None` written as null). The approvals' lines are these.
    pub fn write_event(&self, event: &str, fields: &[(&str, Option<&str>)]) -> bool {
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"{\"ts\":\"");
        crate::telemetry::json_lines::timestamp(&mut line, SystemTime::now());
        line.extend_from_slice(b"\",\"log\":\"audit\",\"event\":");
        let _ = serde_json::to_writer(&mut line, event);
        for (name, value) in fields {
            line.push(b',');
            let _ = serde_json::to_writer(&mut line, name);
            line.push(b':');
            let _ = serde_json::to_writer(&mut line, value);
        }
        self.writer.push_line(&line, |line, lost| {
            if lost > 0 {
                line.extend_from_slice(b",\"dropped_before\":");
                line.extend_from_slice(lost.to_string().as_bytes());
            }
            line.extend_from_slice(b"}\n");
        })
    }

    /// Lines lost so far (queue full, or the sink failing).
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// The counter of lost lines, for the metrics.
    pub fn dropped_lines(&self) -> DroppedLines {
        self.dropped.clone()
    }

    /// Writes what is queued and stops the writer, waiting at most `within` (a stuck sink
    /// must not hold the process at exit).
    pub fn close(&self, within: Duration) {
        let Some(guard) = self.guard.lock().ok().and_then(|mut g| g.take()) else { return };
        let (done, wait) = std::sync::mpsc::channel();
        let closer = std::thread::Builder::new().name("audit-close".into()).spawn(move || {
            drop(guard);
            let _ = done.send(());
        });
        if closer.is_ok() && wait.recv_timeout(within).is_err() {
            tracing::warn!("the audit sink did not take the last lines before exit");
        }
    }
}

/// The line without its closing brace (the writer adds `dropped_before` and the end).
fn format_body(entry: &AuditEntry) -> Vec<u8> {
    let mut line = Vec::with_capacity(384);
    line.extend_from_slice(b"{\"ts\":\"");
    crate::telemetry::json_lines::timestamp(&mut line, entry.at);
    line.extend_from_slice(b"\",\"log\":\"audit\"");
    let mut field = |name: &str, value: Option<&str>| {
        line.extend_from_slice(b",\"");
        line.extend_from_slice(name.as_bytes());
        line.extend_from_slice(b"\":");
        match value {
            Some(text) => {
                let _ = serde_json::to_writer(&mut line, text);
            }
            None => line.extend_from_slice(b"null"),
        }
    };
    field("request_id", Some(&entry.request_id));
    field("trace_id", entry.trace_id.as_deref());
    field("subject", entry.subject.as_deref());
    if let Some(method) = entry.method {
        field("method", Some(method));
    }
    field("tool", entry.tool.as_deref());
    if let Some(requested) = entry.requested_tool.as_deref() {
        field("requested_tool", Some(requested));
    }
    field("server", entry.server.as_deref());
    if let Some(endpoint) = entry.endpoint.as_deref() {
        field("endpoint", Some(endpoint));
    }
    field("decision", Some(entry.decision.as_str()));
    field("rule", Some(&entry.decision.rule));
    field("outcome", Some(if entry.outcome == "success" { "ok" } else { entry.outcome }));
    field("args_sha256", entry.args_sha256.as_deref());
    line.extend_from_slice(b",\"latency_us\":");
    line.extend_from_slice(entry.latency_us.to_string().as_bytes());
    if !entry.guardrails.is_empty() {
        line.extend_from_slice(b",\"guardrails\":");
        let marks: Vec<serde_json::Value> = entry
            .guardrails
            .iter()
            .map(|m| serde_json::json!({"hook": m.hook.as_ref(), "phase": m.phase.as_str(), "decision": m.decision}))
            .collect();
        let _ = serde_json::to_writer(&mut line, &marks);
    }
    line
}

/// A file opened for appending on the first write (and again after a failure), so that the
/// writer thread, not the gateway's start, waits for a slow file system or a pipe.
struct AppendFile {
    path: PathBuf,
    file: Option<File>,
}

impl Write for AppendFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.file.is_none() {
            self.file = Some(std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?);
        }
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("audit file not open"))?;
        let written = file.write(buf);
        if written.is_err() {
            self.file = None;
        }
        written
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(outcome: &'static str) -> AuditEntry {
        AuditEntry {
            at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_466_313),
            request_id: "req-1".into(),
            trace_id: None,
            subject: Some("alice \"a\"".into()),
            method: None,
            tool: Some("price_lookup".into()),
            requested_tool: None,
            endpoint: None,
            server: Some("catalog".into()),
            decision: Decision::no_policy(),
            outcome,
            args_sha256: Some("00ff".into()),
            latency_us: 42,
            guardrails: Vec::new(),
        }
    }

    #[test]
    fn a_line_is_json_with_every_field_and_reports_the_gap_before_it() {
        let path = std::env::temp_dir().join(format!("mcp-gateway-audit-unit-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let config = AuditConfig { sink: AuditSinkKind::File, file: Some(path.clone()), queue_bytes: 1024 };
        let audit = Audit::start(&config).unwrap();
        // Far more than 1 KiB at once: most are dropped (the writer wakes every few ms).
        for _ in 0..100 {
            audit.write(&entry("success"));
        }
        assert!(audit.dropped() > 0);
        let mut denied = entry("rate_limited");
        denied.decision = Decision::denied_by_quota(&Arc::from("per-tool"));
        // Once the writer has made room, the next line gets in and reports the gap.
        let mut attempts = 1;
        while !audit.write(&denied) {
            attempts += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        audit.close(Duration::from_secs(5));
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len() as u64 + audit.dropped(), 100 + attempts, "{text}");
        let first = &lines[0];
        assert_eq!(first["ts"], "2026-11-23T20:38:33.000000Z");
        assert_eq!(first["log"], "audit");
        assert_eq!(first["subject"], "alice \"a\"");
        assert_eq!(first["outcome"], "ok");
        assert_eq!(first["decision"], "allow");
        assert_eq!(first["rule"], "no_policy");
        assert_eq!(first["latency_us"], 42);
        assert!(first["trace_id"].is_null());
        let last = lines.last().unwrap();
        assert_eq!((last["decision"].as_str(), last["rule"].as_str()), (Some("deny"), Some("per-tool")));
        let reported: u64 = lines.iter().filter_map(|l| l["dropped_before"].as_u64()).sum();
        assert_eq!(reported, audit.dropped(), "every drop is reported by the next line: {text}");
    }
}
