//! Approvals: a call the policy allows only with a person's consent waits for it, and the
//! consent is bound to that exact call (see `docs/approvals.md`).
//!
//! Why here, apart from the policy: allow and deny are decided in microseconds from what the
//! caller is; an approval is a state that lives for minutes, is decided by someone else, is
//! used once, and must be recorded at each step. [`rules`] says which calls need one (with the
//! Cedar `@approval` annotation read by `crate::policy`), [`store`] holds them bound to the
//! call, [`journal`] keeps approved calls across a restart when a state directory is set. The
//! door (`gateway/door.rs`) asks after the arguments are final; the admin routes, the console
//! and the approval page (`server/approval_page.rs`) decide.

pub mod journal;
pub mod rules;
pub mod store;

use std::sync::Arc;

pub use rules::Requirement;
pub use store::{Approval, ApprovalStore, Binding, Event, Gate, Limits, Refused, Status};

use crate::{config::ApprovalsConfig, telemetry::metrics::Metrics};

/// The approvals of a gateway: the store, where its changes are journalled, and where they are
/// recorded (audit lines, metrics).
pub struct Approvals {
    pub store: ApprovalStore,
    journal: Option<journal::Journal>,
    audit: Option<Arc<crate::audit::Audit>>,
    metrics: Metrics,
}

impl Approvals {
    /// The approvals store; with `state_dir`, the journal is read back first: approved calls
    /// not yet sent come back, approvals that were still waiting are recorded as lost.
    pub fn start(
        config: &ApprovalsConfig,
        audit: Option<Arc<crate::audit::Audit>>,
        metrics: Metrics,
    ) -> Self {
        let store = ApprovalStore::default();
        let journal =
            config.state_dir.as_deref().map(|dir| journal::Journal::open(std::path::Path::new(dir)));
        let approvals = Self { store, journal: None, audit, metrics };
        let Some(journal) = journal else { return approvals };
        let (kept, lost) = journal.recover();
        for (approval, remaining) in kept {
            approvals.store.restore(approval, remaining);
        }
        let events: Vec<Event> = lost
            .into_iter()
            .map(|approval| {
                approvals.store.remember(approval.clone(), config.history);
                Event { what: approval.status.as_str(), approval }
            })
            .collect();
        let approvals = Self { journal: Some(journal), ..approvals };
        approvals.record(&events);
        approvals.metrics.approvals_waiting.set(approvals.store.waiting() as i64);
        approvals
    }

    /// Writes the audit line, the metric and the journal line of each event.
    pub fn record(&self, events: &[Event]) {
        for event in events {
            let approval = &event.approval;
            let binding = &approval.binding;
            let tool = self.metrics.tool_label(&binding.tool, &binding.server);
            self.metrics.approvals.with_label_values(&[tool, event.what]).inc();
            tracing::info!(
                approval = %approval.id,
                outcome = event.what,
                tool = %binding.tool,
                server = %binding.server,
                subject = binding.subject.as_deref().unwrap_or("anonymous"),
                args_sha256 = %binding.args_sha256,
                "approval {}",
                event.what
            );
            if let Some(audit) = &self.audit {
                let asked_at = store::rfc3339(approval.asked_at);
                let expires_at = store::rfc3339(approval.expires_at);
                let decided_at = approval.decided_at.map(store::rfc3339);
                audit.write_event(
                    "approval",
                    &[
                        ("outcome", Some(event.what)),
                        ("approval_id", Some(&approval.id)),
                        ("subject", binding.subject.as_deref()),
                        ("endpoint", binding.endpoint.as_deref()),
                        ("tool", Some(&binding.tool)),
                        ("server", Some(&binding.server)),
                        ("args_sha256", Some(&binding.args_sha256)),
                        ("approver", Some(approval.approver.as_str())),
                        ("rule", Some(&approval.rule)),
                        ("decided_by", approval.decided_by.as_deref()),
                        ("asked_at", Some(&asked_at)),
                        ("decided_at", decided_at.as_deref()),
                        ("expires_at", Some(&expires_at)),
                    ],
                );
            }
            if let Some(journal) = &self.journal {
                journal.append(event);
            }
        }
        if let Some(journal) = &self.journal
            && journal.wants_compaction()
        {
            journal.rewrite(self.store.snapshot().iter());
        }
        self.metrics.approvals_waiting.set(self.store.waiting() as i64);
    }

    /// Counts a refusal for the bounds (no approval was created, so nothing is audited).
    pub fn count_full(&self, tool: &str, server: &str) {
        let tool = self.metrics.tool_label(tool, server);
        self.metrics.approvals.with_label_values(&[tool, "refused_full"]).inc();
    }
}

/// The bounds in force (from the call's settings).
pub fn limits(config: &ApprovalsConfig) -> Limits {
    Limits {
        expiry: config.expiry(),
        max_pending: config.max_pending,
        max_pending_per_caller: config.max_pending_per_caller,
        history: config.history,
    }
}
