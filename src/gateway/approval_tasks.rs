//! Tasks that wait for an approval: a 2025-11-25 caller that asked for a task (`params.task`)
//! and whose call needs a person's approval gets a task of the gateway's own at once, instead
//! of `approval_required`. The task is `working` while the approval waits; once approved, the
//! gateway makes the call itself — through the whole door again, as the same caller, where
//! the approval is used — and the task completes with its result; denied or expired, it fails
//! with `approval_denied` / `approval_required`. `tasks/get`, `tasks/result` and
//! `tasks/cancel` (which denies the approval) answer it; its id (`mcpgw-approval-task-…`, 128
//! random bits) routes here, and only its owner reaches it ([`crate::ownership`]).
//!
//! Bounded: a task per waiting approval at most (`approvals.max_pending` entries); a finished
//! task is kept for its `ttl` (`tasks.max_ttl_ms` at most). In memory: a restart ends them
//! (the approval itself follows `approvals.state_dir`, and the caller's retry passes).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use serde_json::{Map, Value, json};

use super::{Gateway, call::CallContext, outbound::Released, tasks::TaskCall};
use crate::{
    approvals::{Status, store::rfc3339},
    error::{Category, GatewayError},
    ownership::Owner,
};

/// The prefix of an approval task's id.
pub const ID_PREFIX: &str = "mcpgw-approval-task-";

#[derive(Clone)]
enum State {
    Working,
    Done(Result<Value, GatewayError>),
    Cancelled,
}

struct Entry {
    owner: Owner,
    approval: String,
    created: SystemTime,
    ttl: Duration,
    expires: Instant,
    state: tokio::sync::watch::Sender<State>,
}

/// The approval tasks of a gateway.
#[derive(Default)]
pub struct ApprovalTasks {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

impl Gateway {
    /// Starts an approval task for the call `params` (its `task` taken out) of `ctx`'s caller,
    /// waiting on `approval`: the `CreateTaskResult` to answer.
    pub(super) fn start_approval_task(
        &self,
        mut params: Map<String, Value>,
        ctx: &CallContext,
        approval: &str,
    ) -> Result<Value, GatewayError> {
        let Some(gateway) = self.me.get().and_then(std::sync::Weak::upgrade) else {
            return Err(GatewayError::new(Category::Internal, "the gateway is stopping"));
        };
        let settings = self.settings();
        let requested = params.remove("task");
        let max_ttl = settings.config.tasks.max_ttl();
        let ttl = requested
            .as_ref()
            .and_then(|t| t.get("ttl"))
            .and_then(Value::as_u64)
            .map_or(max_ttl, |ms| Duration::from_millis(ms).min(max_ttl));
        let id = format!(
            "{ID_PREFIX}{}",
            crate::backchannel::caller::mint_id("t").rsplit('-').next().unwrap_or_default()
        );
        let (state, _) = tokio::sync::watch::channel(State::Working);
        let entry = Arc::new(Entry {
            owner: ctx.owner.clone(),
            approval: approval.to_string(),
            created: SystemTime::now(),
            ttl,
            expires: Instant::now() + ttl,
            state,
        });
        {
            let Ok(mut entries) = self.approval_tasks.entries.lock() else {
                return Err(GatewayError::new(Category::Internal, "the approval task table is unusable"));
            };
            let now = Instant::now();
            entries.retain(|_, e| e.expires > now);
            let limit = settings.config.approvals.max_pending;
            if entries.len() >= limit {
                return Err(GatewayError::new(
                    Category::Overloaded,
                    format!("{limit} approval tasks already exist (approvals.max_pending)"),
                )
                .with_limit("approvals.max_pending", limit as u64));
            }
            entries.insert(id.clone(), entry.clone());
        }
        let background = CallContext {
            deadline: None,
            notifications: Default::default(),
            cancelled: Arc::default(),
            ..ctx.clone()
        };
        let approval = approval.to_string();
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(async move {
            let status = gateway.approval_decided(&approval).await;
            if matches!(*entry.state.borrow(), State::Cancelled) {
                return;
            }
            let outcome = match status {
                Status::Approved => gateway
                    .call_tool(Some(Value::Object(params)), &background)
                    .await
                    .map(|released| serde_json::from_str(released.into_inner().get()).unwrap_or(Value::Null)),
                Status::Denied => Err(GatewayError::new(
                    Category::ApprovalDenied,
                    format!("the approval {approval} was denied; nothing was sent"),
                )),
                _ => Err(GatewayError::new(
                    Category::ApprovalRequired,
                    format!("the approval {approval} expired undecided; nothing was sent"),
                )),
            };
            entry.state.send_replace(State::Done(outcome));
        });
        tokio::spawn(run);
        Ok(json!({"task": task_json(&id, &State::Working, &self.approval_tasks_entry(&id))}))
    }

    /// Waits until `approval` is decided (or gone): its status then.
    async fn approval_decided(&self, approval: &str) -> Status {
        loop {
            let changed = self.approvals.store.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(now) = self.approvals.store.status(approval) else { return Status::Expired };
            if now.status != Status::Pending {
                return now.status;
            }
            let left = now.expires_at.duration_since(SystemTime::now()).unwrap_or_default();
            if tokio::time::timeout(left, changed).await.is_err() {
                // Its time is up: expired by the sweep (and audited) now.
                let settings = self.settings();
                let mut events = Vec::new();
                self.approvals.store.sweep(crate::approvals::limits(&settings.config.approvals), &mut events);
                self.approvals.record(&events);
            }
        }
    }

    fn approval_tasks_entry(&self, id: &str) -> Option<Arc<Entry>> {
        self.approval_tasks.entries.lock().ok()?.get(id).cloned()
    }

    /// Answers `tasks/get`, `tasks/result` or `tasks/cancel` of an approval task; `None` when
    /// `id` is not one.
    pub(super) async fn approval_task_method(
        &self,
        method: &str,
        id: &str,
        call: &TaskCall,
    ) -> Option<Result<Released<Value>, GatewayError>> {
        if !id.starts_with(ID_PREFIX) {
            return None;
        }
        let unknown =
            || GatewayError::new(Category::BadInput, "no such task (unknown, expired or not yours)");
        let entry = match self.approval_tasks_entry(id) {
            Some(entry) if call.owner.may_use_by_id(&entry.owner) && entry.expires > Instant::now() => entry,
            _ => return Some(Err(unknown())),
        };
        let answer = match method {
            "tasks/get" => Ok(task_json(id, &entry.state.borrow().clone(), &Some(entry.clone()))),
            "tasks/cancel" => {
                if matches!(*entry.state.borrow(), State::Working) {
                    entry.state.send_replace(State::Cancelled);
                    let _ = self.decide_approval(&entry.approval, false, "caller:cancelled", None);
                }
                Ok(task_json(id, &entry.state.borrow().clone(), &Some(entry.clone())))
            }
            "tasks/result" => {
                let mut watch = entry.state.subscribe();
                let timeout = call.deadline.map_or(self.settings().config.tasks.result_timeout(), |d| {
                    d.saturating_duration_since(Instant::now())
                });
                let done =
                    tokio::time::timeout(timeout, watch.wait_for(|s| !matches!(s, State::Working))).await;
                match done.ok().and_then(Result::ok).map(|s| s.clone()) {
                    Some(State::Done(Ok(result))) => {
                        Ok(crate::protocol::tasks::with_related_task(result, id))
                    }
                    Some(State::Done(Err(error))) => Err(error),
                    Some(_) => Err(GatewayError::new(Category::Cancelled, "the task was cancelled")),
                    None => Err(GatewayError::new(
                        Category::Timeout,
                        "the task is still waiting for its approval",
                    )),
                }
            }
            other => {
                Err(GatewayError::new(Category::MethodNotFound, other.chars().take(64).collect::<String>()))
            }
        };
        Some(answer.map(Released::gateways_own))
    }
}

/// The task as `tasks/get` and `CreateTaskResult` show it (2025-11-25).
fn task_json(id: &str, state: &State, entry: &Option<Arc<Entry>>) -> Value {
    let (status, message) = match state {
        State::Working => ("working", "waiting for a person's approval".to_string()),
        State::Done(Ok(_)) => ("completed", "approved and run".to_string()),
        State::Done(Err(error)) => ("failed", error.category.as_str().to_string()),
        State::Cancelled => ("cancelled", "cancelled by its caller; the approval was denied".to_string()),
    };
    let mut task = json!({"taskId": id, "status": status, "statusMessage": message, "pollInterval": 1000});
    if let (Some(entry), Some(object)) = (entry, task.as_object_mut()) {
        object.insert("createdAt".into(), json!(rfc3339(entry.created)));
        object.insert("ttl".into(), json!(entry.ttl.as_millis() as u64));
    }
    task
}
