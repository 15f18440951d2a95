//! Calls over one open persistent connection, multiplexed by the gateway's own JSON-RPC ids,
//! unique per connection and never reused; a caller's id never reaches the server. An answer
//! whose id matches no call in flight (late, duplicated, invented) is dropped and counted
//! (`mcp_gateway_upstream_dropped_messages_total{reason="unknown_id"}`), as is a line that is
//! not JSON-RPC (`reason="invalid"`: the framing is intact, so the connection stays up and
//! only a call whose answer never comes times out). When the connection drops, every call in
//! flight fails with [`UpstreamError::Io`] (it may have been delivered). A call future dropped
//! before its answer (deadline, caller gone) sends `notifications/cancelled` for its id.
//!
//! Calls while the server is not `ready` fail at once with [`UpstreamError::NotConnected`]
//! (nothing sent), with one exception: calls made while the very first connection attempt is
//! still running wait for its outcome (bounded by their own timeout), so a gateway that just
//! started does not fail its first `tools/list` because a child process was still booting.
//!
//! Requests the server sends the gateway are answered at once so it never waits: `ping` with
//! `{}`, anything else (`roots/list`, `sampling/createMessage`, `elicitation/create`) with
//! `-32601`. `notifications/progress` carrying a call's progress token (the gateway's own,
//! set only when the call asked for progress) go to [`UpstreamRequest::progress`], rebuilt
//! from their validated fields ([`ProgressUpdate`]): nothing else in their params reaches the
//! caller. `notifications/tools/list_changed` is counted ([`super::Connection::list_changes`]):
//! the gateway then refreshes this server's tools, at a rate it bounds itself.
//! `notifications/resources/updated` is offered to the server's update feed
//! ([`super::Connection::resource_updates`]), rebuilt from its validated fields.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use prometheus::IntCounterVec;
use serde::Deserialize;
use serde_json::{Map, Value, json, value::RawValue};
use tokio::sync::{mpsc, oneshot, watch};

use super::{ConnectionState, Shared};
use crate::{
    backchannel::{
        ProgressSink,
        resource_updates::UpdateFeed,
        to_caller::{ProgressUpdate, ToCaller},
    },
    protocol::{jsonrpc::ErrorObject, mcp},
    upstream::{
        RawResult, UpstreamError, UpstreamReply, UpstreamRequest,
        channel::{ChannelEnd, MessageChannel},
    },
};

impl Shared {
    /// A ready connection, or why there is none.
    async fn ready_live(&self) -> Result<Arc<Live>, UpstreamError> {
        let mut status = self.status.subscribe();
        loop {
            {
                let current = status.borrow_and_update();
                if current.state == ConnectionState::Ready {
                    return self.live().ok_or(UpstreamError::NotConnected { state: "reconnecting" });
                }
                if current.first_attempt_done || current.state != ConnectionState::Connecting {
                    return Err(UpstreamError::NotConnected { state: current.state.as_str() });
                }
            }
            // The very first attempt is still running: its outcome decides.
            if status.changed().await.is_err() {
                return Err(UpstreamError::NotConnected { state: ConnectionState::Disabled.as_str() });
            }
        }
    }

    pub(super) async fn call(
        self: Arc<Self>,
        request: UpstreamRequest,
    ) -> Result<UpstreamReply, UpstreamError> {
        let live = self.ready_live().await?;
        let not_connected = || UpstreamError::NotConnected { state: ConnectionState::Reconnecting.as_str() };
        let id = self.next_id();
        let message = encode_call(id, &request);
        let answer = live.register(id, request.progress.clone()).ok_or_else(not_connected)?;
        let mut guard = CallGuard { live: &live, id, sent: false, done: false };
        if !live.send(message).await {
            return Err(not_connected());
        }
        guard.sent = true;
        let result = answer.await.unwrap_or_else(|_| Err(UpstreamError::Io("connection closed".into())));
        guard.done = true;
        result
    }
}

/// The request as sent: the gateway's id, the session-era shape, a progress token of the
/// gateway's own only when the call can receive progress (a caller's token never goes up), and
/// the attempt's trace context.
fn encode_call(id: u64, request: &UpstreamRequest) -> String {
    let mut params = Map::clone(&request.params);
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.remove("progressToken");
        if request.progress.is_some() {
            meta.insert("progressToken".into(), json!(id));
        }
        request.trace_patch().apply(meta);
    }
    if params.get("_meta").is_some_and(|m| m.as_object().is_some_and(Map::is_empty)) {
        params.remove("_meta");
    }
    json!({"jsonrpc": "2.0", "id": id, "method": request.method, "params": params}).to_string()
}

/// Takes a call out of the pending map when its future ends early, and tells the server.
struct CallGuard<'a> {
    live: &'a Arc<Live>,
    id: u64,
    sent: bool,
    done: bool,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let was_pending = self.live.unregister(self.id);
        if self.sent && was_pending {
            let params =
                json!({"requestId": self.id, "reason": "cancelled by the gateway (deadline or caller gone)"});
            let message =
                String::from_utf8(mcp::encode_notification("notifications/cancelled", Some(params)))
                    .unwrap_or_default();
            self.live.try_send(message);
        }
    }
}

/// One open connection: its pending calls and the task reading it.
pub(super) struct Live {
    server: Arc<str>,
    outgoing: Mutex<Option<mpsc::Sender<String>>>,
    pending: Mutex<Pending>,
    /// Tells the reader to stop (and drop the incoming side) when the gateway closes it.
    stop_reader: watch::Sender<bool>,
    /// Why the connection ended, set by the reader once every pending call has been failed.
    pub(super) done: watch::Sender<Option<String>>,
    /// The connector's own account of the end (set once the connection is really down).
    ended: watch::Receiver<Option<ChannelEnd>>,
    dropped: IntCounterVec,
    /// Counts the server's `notifications/tools/list_changed` (see [`super::Connection::list_changes`]).
    list_changed: Arc<watch::Sender<u64>>,
    /// The server's `notifications/resources/updated` (see [`super::Connection::resource_updates`]).
    updates: UpdateFeed,
}

#[derive(Default)]
struct Pending {
    closed: bool,
    calls: HashMap<u64, PendingCall>,
}

struct PendingCall {
    answer: oneshot::Sender<Result<UpstreamReply, UpstreamError>>,
    progress: Option<ProgressSink>,
}

/// The fields of any JSON-RPC message, the result kept raw.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

impl Live {
    pub(super) fn start(
        channel: MessageChannel,
        server: Arc<str>,
        dropped: IntCounterVec,
        list_changed: Arc<watch::Sender<u64>>,
        updates: UpdateFeed,
    ) -> Arc<Self> {
        let MessageChannel { outgoing, incoming, ended } = channel;
        let live = Arc::new(Self {
            server,
            outgoing: Mutex::new(Some(outgoing)),
            pending: Mutex::default(),
            stop_reader: watch::channel(false).0,
            done: watch::channel(None).0,
            ended,
            dropped,
            list_changed,
            updates,
        });
        tokio::spawn(read(live.clone(), incoming));
        live
    }

    pub(super) fn in_flight(&self) -> usize {
        self.pending.lock().map_or(0, |p| p.calls.len())
    }

    /// Adds a call to the pending map; `None` once the connection is closed.
    pub(super) fn register(
        &self,
        id: u64,
        progress: Option<ProgressSink>,
    ) -> Option<oneshot::Receiver<Result<UpstreamReply, UpstreamError>>> {
        let mut pending = self.pending.lock().ok()?;
        if pending.closed {
            return None;
        }
        let (answer, receiver) = oneshot::channel();
        pending.calls.insert(id, PendingCall { answer, progress });
        Some(receiver)
    }

    /// Removes a call; whether it was still waiting.
    fn unregister(&self, id: u64) -> bool {
        self.pending.lock().is_ok_and(|mut p| p.calls.remove(&id).is_some())
    }

    fn sender(&self) -> Option<mpsc::Sender<String>> {
        self.outgoing.lock().ok().and_then(|o| o.clone())
    }

    /// Queues a message; false when the connection is closed.
    pub(super) async fn send(&self, message: String) -> bool {
        match self.sender() {
            Some(sender) => sender.send(message).await.is_ok(),
            None => false,
        }
    }

    /// Queues a message without waiting (answers to the server, cancellations).
    fn try_send(&self, message: String) {
        if let Some(sender) = self.sender() {
            let _ = sender.try_send(message);
        }
    }

    /// Closes the connection from the gateway's side: the connector sees its senders gone.
    pub(super) fn close(&self) {
        if let Ok(mut outgoing) = self.outgoing.lock() {
            outgoing.take();
        }
        let _ = self.stop_reader.send(true);
    }

    /// Waits until the connector reports the connection down (for stdio: the child reaped).
    pub(super) async fn wait_closed(&self, within: Duration) {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(within, ended.wait_for(Option::is_some)).await;
    }

    /// Fails every call in flight and refuses new ones.
    fn fail_all(&self, end: Option<&ChannelEnd>) {
        let calls = match self.pending.lock() {
            Ok(mut pending) => {
                pending.closed = true;
                std::mem::take(&mut pending.calls)
            }
            Err(_) => return,
        };
        let single = calls.len() == 1;
        for (_, call) in calls {
            let error = match end {
                // With one call in flight, the oversized message was its answer.
                Some(ChannelEnd::MessageTooLarge { limit }) if single => {
                    UpstreamError::ResponseTooLarge { limit: *limit }
                }
                Some(end) => UpstreamError::Io(format!("connection lost: {}", describe_end(end))),
                None => UpstreamError::Io("connection closed".into()),
            };
            let _ = call.answer.send(Err(error));
        }
    }

    fn drop_message(&self, reason: &'static str) {
        self.dropped.with_label_values(&[&self.server, reason]).inc();
    }

    /// Handles one incoming text: a message or a batch.
    fn dispatch(&self, text: &str) {
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            match serde_json::from_str::<Vec<&RawValue>>(trimmed) {
                Ok(items) => items.iter().for_each(|item| self.dispatch_one(item.get())),
                Err(_) => self.invalid(text),
            }
        } else {
            self.dispatch_one(text);
        }
    }

    fn invalid(&self, text: &str) {
        self.drop_message("invalid");
        let mut end = text.len().min(200);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        tracing::debug!(server = %self.server, line = &text[..end], "upstream sent something that is not JSON-RPC; ignored");
    }

    fn dispatch_one(&self, text: &str) {
        let Ok(message) = serde_json::from_str::<Incoming>(text) else {
            return self.invalid(text);
        };
        let id = message.id.filter(|id| id.get() != "null");
        match (message.method.as_deref(), id) {
            (Some(method), Some(id)) => self.answer_server_request(method, id),
            (Some("notifications/progress"), None) => self.progress(message.params),
            // Only counted: the gateway refreshes this server's tools (rate-limited there);
            // nothing of the notification reaches a caller.
            (
                Some(
                    "notifications/tools/list_changed"
                    | "notifications/resources/list_changed"
                    | "notifications/prompts/list_changed",
                ),
                None,
            ) => {
                self.list_changed.send_modify(|n| *n = n.wrapping_add(1));
            }
            (Some("notifications/resources/updated"), None) => {
                let params =
                    message.params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p.get()).ok());
                if !self.updates.offer(params.as_ref()) {
                    self.drop_message("invalid");
                }
            }
            (Some(_), None) => {}
            (None, Some(id)) => {
                let reply = match (message.result, message.error) {
                    (_, Some(error)) => Ok(UpstreamReply::Error(error)),
                    (Some(result), None) => Ok(UpstreamReply::Result(RawResult::new(result.to_owned()))),
                    (None, None) => {
                        Err(UpstreamError::Protocol("response has neither result nor error".into()))
                    }
                };
                let call = serde_json::from_str::<u64>(id.get())
                    .ok()
                    .and_then(|id| self.pending.lock().ok().and_then(|mut p| p.calls.remove(&id)));
                match call {
                    Some(call) => {
                        let _ = call.answer.send(reply);
                    }
                    None => {
                        self.drop_message("unknown_id");
                        tracing::debug!(server = %self.server, id = id.get(), "answer to no call in flight; dropped");
                    }
                }
            }
            (None, None) => self.invalid(text),
        }
    }

    /// Answers a request from the server at once, so it never waits on the gateway.
    fn answer_server_request(&self, method: &str, id: &RawValue) {
        let id: Value = serde_json::from_str(id.get()).unwrap_or(Value::Null);
        let answer = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": format!("the gateway does not serve {method} to upstream servers"),
            }})
        };
        self.try_send(answer.to_string());
    }

    fn progress(&self, params: Option<&RawValue>) {
        let Some(params) = params.and_then(|p| serde_json::from_str::<Map<String, Value>>(p.get()).ok())
        else {
            return self.drop_message("invalid");
        };
        let sink = params.get("progressToken").and_then(Value::as_u64).and_then(|token| {
            self.pending.lock().ok().and_then(|p| p.calls.get(&token).and_then(|c| c.progress.clone()))
        });
        // Only the validated fields go on, never the upstream's params as they came.
        let Some(update) = ProgressUpdate::from_params(&params) else {
            return self.drop_message("invalid");
        };
        match sink {
            Some(sink) => {
                if sink.try_send(ToCaller::Progress(update)).is_err() {
                    self.drop_message("progress_overflow");
                }
            }
            None => self.drop_message("unknown_id"),
        }
    }
}

/// Reads the connection until it ends or the gateway closes it.
async fn read(live: Arc<Live>, mut incoming: mpsc::Receiver<String>) {
    let mut stop = live.stop_reader.subscribe();
    loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(text) => live.dispatch(&text),
                None => break,
            },
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    drop(incoming);
    let end = live.ended.borrow().clone();
    live.fail_all(end.as_ref());
    let reason = end.as_ref().map_or_else(|| "closed by the gateway".to_string(), describe_end);
    let _ = live.done.send(Some(reason));
}

fn describe_end(end: &ChannelEnd) -> String {
    match end {
        ChannelEnd::Closed(why) => format!("closed: {why}"),
        ChannelEnd::Broken(why) => format!("broken: {why}"),
        ChannelEnd::MessageTooLarge { limit } => format!("a message exceeded the {limit}-byte limit"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tower::Service;

    use super::*;
    use crate::{
        config::ReconnectSettings,
        upstream::{
            channel::{ConnectError, Connector},
            connection::{Connection, ConnectionSettings, test_families as families},
        },
    };

    #[test]
    fn the_progress_token_is_the_gateways_own_and_only_when_progress_is_wanted() {
        let mut params = Map::new();
        params.insert("name".into(), json!("echo"));
        params.insert("_meta".into(), json!({"progressToken": "callers-token", "k": 1}));
        let mut request = UpstreamRequest::new("tools/call", params);
        let sent: Value = serde_json::from_str(&encode_call(7, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"], json!({"k": 1}));
        assert_eq!(sent["id"], 7);
        request.progress = Some(mpsc::channel(1).0.into());
        let sent: Value = serde_json::from_str(&encode_call(8, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"]["progressToken"], 8);
    }

    #[test]
    fn the_attempts_trace_context_is_written_over_the_callers() {
        const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut params = Map::new();
        params.insert("_meta".into(), json!({"traceparent": "callers", "tracestate": "c=1", "k": 1}));
        let mut request = UpstreamRequest::new("tools/call", params);
        let sent: Value = serde_json::from_str(&encode_call(1, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"]["traceparent"], "callers", "no context: as the caller sent it");
        request.outbound.traceparent = Some(TP.into());
        let sent: Value = serde_json::from_str(&encode_call(2, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"], json!({"traceparent": TP, "k": 1}));
        request.outbound.tracestate = Some("g=2".into());
        let sent: Value = serde_json::from_str(&encode_call(3, &request)).unwrap();
        assert_eq!(sent["params"]["_meta"], json!({"traceparent": TP, "tracestate": "g=2", "k": 1}));
        assert_eq!(request.params["_meta"]["traceparent"], "callers", "the shared params are not changed");
    }

    /// An in-process peer: answers `initialize`, and each `tools/call` with a progress
    /// notification for its token, one for a token nobody holds, then the result.
    struct ScriptedPeer;

    impl Connector for ScriptedPeer {
        fn connect(
            &self,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<MessageChannel, ConnectError>> + Send>>
        {
            Box::pin(async {
                let (outgoing, mut from_gateway) = mpsc::channel::<String>(8);
                let (to_gateway, incoming) = mpsc::channel::<String>(8);
                let (_ended_tx, ended) = watch::channel(None);
                tokio::spawn(async move {
                    let _ended_tx = _ended_tx;
                    while let Some(text) = from_gateway.recv().await {
                        let message: Value = serde_json::from_str(&text).unwrap();
                        let id = message["id"].clone();
                        let answers = match message["method"].as_str() {
                            Some("initialize") => vec![json!({"jsonrpc": "2.0", "id": id, "result": {
                                "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "p", "version": "1"}}})],
                            Some("tools/call") => {
                                let token = message["params"]["_meta"]["progressToken"].clone();
                                vec![
                                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}}),
                                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 999_999, "progress": 1}}),
                                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}),
                                ]
                            }
                            _ => vec![],
                        };
                        for answer in answers {
                            let _ = to_gateway.send(answer.to_string()).await;
                        }
                    }
                });
                Ok(MessageChannel { outgoing, incoming, ended })
            })
        }

        fn describe(&self) -> String {
            "scripted".into()
        }
    }

    #[tokio::test]
    async fn progress_reaches_the_call_that_asked_for_it_by_the_gateways_token() {
        let metrics = families();
        let settings = ConnectionSettings {
            server: "p".into(),
            transport: "stdio",
            reconnect: ReconnectSettings {
                initial: Duration::from_millis(10),
                max: Duration::from_millis(10),
                give_up_after: Duration::from_secs(60),
                slow_retry: Duration::from_secs(60),
            },
            handshake_timeout: Duration::from_secs(5),
        };
        let mut connection = Connection::start(Box::new(ScriptedPeer), settings, &metrics);
        let (sink, mut progress) = mpsc::channel(4);
        let mut request = UpstreamRequest::new("tools/call", Map::new());
        request.progress = Some(sink.into());
        let reply = connection.call(request).await.unwrap();
        assert!(matches!(reply, UpstreamReply::Result(_)));
        let Ok(ToCaller::Progress(update)) = progress.try_recv() else { panic!("the progress notification") };
        assert_eq!(update.progress(), 1.0);
        assert!(progress.try_recv().is_err(), "another call's token reached this call");
        assert_eq!(metrics.dropped.with_label_values(&["p", "unknown_id"]).get(), 1);
        assert_eq!(connection.state(), ConnectionState::Ready);
        connection.shutdown(Duration::from_secs(5)).await;
        assert_eq!(connection.state(), ConnectionState::Disabled);
    }
}
