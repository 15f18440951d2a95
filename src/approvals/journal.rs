//! The approvals' journal (`[approvals] state_dir`): one JSON line per change, appended to
//! `approvals.jsonl`, so that a restart loses no approved call silently.
//!
//! At start the journal is read back: an approval whose last line is `approved` and whose
//! expiry has not passed is restored (its call, retried with the same arguments by the same
//! caller, passes — once); one still waiting for a decision is recorded as `lost` (its audit
//! line says so; the caller's retry asks anew); an approved one that expired meanwhile is
//! recorded as `expired`. Then the file is rewritten with what was restored. The lines hold
//! the binding (subject, endpoint, tool, server, the arguments' SHA-256), never the arguments
//! nor the page's secret: a restored approval shows no arguments, and its link is void.
//! An `approved` line is synced to disk before the decision is answered. The file is created
//! readable by the gateway's user only (0600). The file is compacted
//! (rewritten from what waits) past [`COMPACT_AFTER`] lines.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use super::store::{Approval, Binding, Event, Status};
use crate::config::Approver;

/// Lines appended before the journal is rewritten from the approvals that wait.
pub const COMPACT_AFTER: usize = 10_000;
/// Longest line read back (a longer one is skipped as damaged).
const MAX_LINE: usize = 16 * 1024;

pub struct Journal {
    path: PathBuf,
    file: Mutex<(Option<File>, usize)>,
}

impl Journal {
    /// The journal in `dir` (created when missing; a failure is logged, and the approvals
    /// then live in memory only).
    pub fn open(dir: &Path) -> Self {
        if let Err(e) = std::fs::create_dir_all(dir) {
            tracing::error!(dir = %dir.display(), error = %e, "cannot create approvals.state_dir");
        }
        Self { path: dir.join("approvals.jsonl"), file: Mutex::new((None, 0)) }
    }

    /// Reads the journal back: the approved calls to restore (with the time they have left),
    /// and the events of what the restart ended (`lost`, `expired`). Rewrites the file with
    /// the restored ones.
    pub fn recover(&self) -> (Vec<(Approval, Duration)>, Vec<Approval>) {
        let mut last: HashMap<String, Approval> = HashMap::new();
        let mut order = Vec::new();
        if let Ok(file) = File::open(&self.path) {
            for line in BufReader::new(file).lines() {
                let Ok(line) = line else { break };
                if line.len() > MAX_LINE {
                    continue;
                }
                let Some(approval) = serde_json::from_str::<Value>(&line).ok().and_then(|v| parse(&v)) else {
                    continue;
                };
                if !last.contains_key(&approval.id) {
                    order.push(approval.id.clone());
                }
                last.insert(approval.id.clone(), approval);
            }
        }
        let now = SystemTime::now();
        let (mut kept, mut ended) = (Vec::new(), Vec::new());
        for id in order {
            let Some(mut approval) = last.remove(&id) else { continue };
            match approval.status {
                Status::Approved => match approval.expires_at.duration_since(now) {
                    Ok(remaining) if !remaining.is_zero() => kept.push((approval, remaining)),
                    _ => {
                        approval.status = Status::Expired;
                        ended.push(approval);
                    }
                },
                Status::Pending => {
                    approval.status = Status::Lost;
                    ended.push(approval);
                }
                _ => {}
            }
        }
        self.rewrite(kept.iter().map(|(a, _)| a));
        (kept, ended)
    }

    /// Appends the line of `event` (`approved` lines synced before returning).
    pub fn append(&self, event: &Event) {
        let Ok(mut file) = self.file.lock() else { return };
        let (handle, lines) = &mut *file;
        if handle.is_none() {
            *handle = private(OpenOptions::new().create(true).append(true)).open(&self.path).ok();
        }
        let Some(open) = handle.as_mut() else {
            tracing::error!(path = %self.path.display(), "cannot open the approvals journal");
            return;
        };
        let mut line = line(&event.approval, event.what).to_string();
        line.push('\n');
        let written = open.write_all(line.as_bytes()).and_then(|()| match event.what {
            "approved" => open.sync_data(),
            _ => Ok(()),
        });
        if let Err(e) = written {
            tracing::error!(path = %self.path.display(), error = %e, "cannot write the approvals journal");
            *handle = None;
        }
        *lines += 1;
    }

    /// Whether the journal has grown past [`COMPACT_AFTER`] lines since it was last rewritten.
    pub fn wants_compaction(&self) -> bool {
        self.file.lock().is_ok_and(|f| f.1 > COMPACT_AFTER)
    }

    /// Rewrites the journal with `waiting` only (through a temporary file and a rename).
    pub fn rewrite<'a>(&self, waiting: impl Iterator<Item = &'a Approval>) {
        let Ok(mut file) = self.file.lock() else { return };
        let temporary = self.path.with_extension("jsonl.tmp");
        let written = (|| -> std::io::Result<()> {
            let mut out =
                private(OpenOptions::new().create(true).write(true).truncate(true)).open(&temporary)?;
            for approval in waiting {
                let what = if approval.status == Status::Approved { "approved" } else { "asked" };
                writeln!(out, "{}", line(approval, what))?;
            }
            out.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        })();
        if let Err(e) = written {
            tracing::error!(path = %self.path.display(), error = %e, "cannot rewrite the approvals journal");
        }
        *file = (None, 0);
    }
}

/// Opened for the gateway's user only (the journal names callers and what they called).
fn private(options: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn line(approval: &Approval, what: &str) -> Value {
    let b = &approval.binding;
    json!({
        "what": what,
        "id": approval.id,
        "subject": b.subject.as_deref(),
        "endpoint": b.endpoint.as_deref(),
        "tool": b.tool.as_ref(),
        "server": b.server.as_ref(),
        "args_sha256": b.args_sha256,
        "approver": approval.approver.as_str(),
        "rule": approval.rule,
        "asked_at_ms": millis(approval.asked_at),
        "expires_at_ms": millis(approval.expires_at),
        "decided_by": approval.decided_by,
        "decided_at_ms": approval.decided_at.map(millis),
    })
}

fn parse(v: &Value) -> Option<Approval> {
    let text = |key: &str| v.get(key).and_then(Value::as_str);
    let at = |key: &str| v.get(key).and_then(Value::as_u64).map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
    let status = match text("what")? {
        "asked" => Status::Pending,
        "approved" => Status::Approved,
        "denied" => Status::Denied,
        "used" => Status::Used,
        "expired" => Status::Expired,
        "lost" => Status::Lost,
        _ => return None,
    };
    Some(Approval {
        id: text("id")?.to_string(),
        binding: Binding {
            subject: text("subject").map(Into::into),
            endpoint: text("endpoint").map(Into::into),
            tool: text("tool")?.into(),
            server: text("server")?.into(),
            args_sha256: text("args_sha256")?.to_string(),
        },
        arguments: Value::Null,
        approver: Approver::parse(text("approver")?)?,
        rule: text("rule").unwrap_or_default().to_string(),
        status,
        asked_at: at("asked_at_ms")?,
        expires_at: at("expires_at_ms")?,
        decided_by: text("decided_by").map(str::to_string),
        decided_at: at("decided_at_ms"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(id: &str, status: Status, expires_in: i64) -> Approval {
        let now = SystemTime::now();
        let expires_at = if expires_in >= 0 {
            now + Duration::from_secs(expires_in as u64)
        } else {
            now - Duration::from_secs((-expires_in) as u64)
        };
        Approval {
            id: id.into(),
            binding: Binding {
                subject: Some("alice".into()),
                endpoint: None,
                tool: "refund".into(),
                server: "store".into(),
                args_sha256: "ab".into(),
            },
            arguments: json!({"order": 1}),
            approver: Approver::Operator,
            rule: "refunds".into(),
            status,
            asked_at: now,
            expires_at,
            decided_by: None,
            decided_at: None,
        }
    }

    #[test]
    fn a_restart_keeps_approved_calls_and_reports_the_rest() {
        let dir = std::env::temp_dir().join(format!("mcpgw-approvals-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journal = Journal::open(&dir);
        for (id, what, status, expires) in [
            ("a", "asked", Status::Pending, 60),
            ("a", "approved", Status::Approved, 60),
            ("b", "asked", Status::Pending, 60),
            ("c", "asked", Status::Pending, 60),
            ("c", "approved", Status::Approved, -1),
            ("d", "asked", Status::Pending, 60),
            ("d", "approved", Status::Approved, 60),
            ("d", "used", Status::Used, 60),
        ] {
            journal.append(&Event { what, approval: approval(id, status, expires) });
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("approvals.jsonl"))
            .unwrap()
            .write_all(b"{torn\n")
            .unwrap();
        let (kept, ended) = Journal::open(&dir).recover();
        assert_eq!(kept.iter().map(|(a, _)| a.id.as_str()).collect::<Vec<_>>(), ["a"]);
        assert_eq!(kept[0].0.arguments, Value::Null, "arguments are never journalled");
        let ended: Vec<(&str, Status)> = ended.iter().map(|a| (a.id.as_str(), a.status)).collect();
        assert_eq!(ended, [("b", Status::Lost), ("c", Status::Expired)]);
        // Rewritten with what was kept: a second restart finds the same approval only.
        let (kept, ended) = Journal::open(&dir).recover();
        assert_eq!((kept.len(), ended.len()), (1, 0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
