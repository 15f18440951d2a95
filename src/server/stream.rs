//! The event-stream answer of a `tools/call` whose caller sent a `progressToken` and accepts
//! `text/event-stream`: the upstream's `notifications/progress` as they come (the gateway's
//! token replaced by the caller's), then the JSON-RPC response as the last event.
//!
//! The call runs in its own task, owned by the response body: a caller that goes away drops the
//! body, which aborts the task and so drops the call (the usual cancellation path, the
//! `caller_disconnected` log line). A caller that stays connected but stops reading does not
//! stall the call: it runs on, its progress overflows the bounded channel and is dropped, and
//! its deadline ends it as for a JSON answer. Errors are
//! JSON-RPC error events like any other answer; a call cancelled by `notifications/cancelled`
//! ends the stream with no response event (a cancelled request gets no response). Progress
//! never extends the call: deadlines and timeouts run inside the call as for a JSON answer.
//! Progress that does not increase (an attempt retried from zero) is dropped, because the
//! protocol requires progress to increase with each notification.
//!
//! Upstream log entries (`notifications/message`) come through the same channel, so they keep
//! their order relative to progress, and so do server→client requests relayed to a
//! back-channel caller (`backchannel::relay`). Every item is typed ([`ToCaller`]) and written from
//! its validated fields: progress under the caller's own token, log entries as `level`,
//! `logger`, `data`, and requests only as the relay made them. Nothing an upstream sent is
//! written as it came (see `backchannel::to_caller` for why).

use std::{convert::Infallible, future::Future, pin::Pin};

use axum::{
    body::{Body, Bytes},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::Value;
use tokio::sync::mpsc::Receiver;

use super::dispatch::is_cancelled;
use crate::{
    backchannel::ToCaller,
    error::{Category, GatewayError},
    protocol::jsonrpc,
};

/// The call running inside a streamed answer.
pub type Call = Pin<Box<dyn Future<Output = Option<jsonrpc::Response>> + Send>>;

/// The call's task; dropping it (the body dropped: the caller went away) aborts the call.
struct Running(tokio::task::JoinHandle<Option<jsonrpc::Response>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct State {
    call: Option<Running>,
    progress: Receiver<ToCaller>,
    caller_token: Option<Value>,
    last: Option<f64>,
    /// A notification received before the stream was committed, written first.
    first: Option<ToCaller>,
    /// Whether the call ended; its answer is written after the progress still buffered.
    finished: bool,
    answer: Option<jsonrpc::Response>,
}

/// A `200 text/event-stream` response running `call` and relaying what `progress` receives
/// (progress under `caller_token`, and log entries), starting with `first`.
pub fn response(
    call: Call,
    progress: Receiver<ToCaller>,
    caller_token: Option<Value>,
    first: Option<ToCaller>,
) -> Response {
    let state = State {
        call: Some(Running(tokio::spawn(call))),
        progress,
        caller_token,
        last: None,
        first,
        finished: false,
        answer: None,
    };
    let events = futures_util::stream::unfold(state, |mut state| async move {
        let bytes = state.next_event().await?;
        Some((Ok::<_, Infallible>(bytes), state))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(events),
    )
        .into_response()
}

impl State {
    async fn next_event(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take()
            && let Some(event) = self.progress_event(first)
        {
            return Some(event);
        }
        loop {
            if self.finished {
                // Progress sent before the answer goes out before it.
                while let Ok(params) = self.progress.try_recv() {
                    if let Some(event) = self.progress_event(params) {
                        return Some(event);
                    }
                }
                let answer = self.answer.take()?;
                return if is_cancelled(&answer) { None } else { Some(message_event(&answer)) };
            }
            let call = self.call.as_mut()?;
            tokio::select! {
                biased;
                Some(params) = self.progress.recv() => {
                    if let Some(event) = self.progress_event(params) {
                        return Some(event);
                    }
                }
                joined = &mut call.0 => {
                    self.call = None;
                    self.finished = true;
                    self.answer = joined.unwrap_or_else(|e| {
                        // Only a panic can end the task otherwise (it is aborted only when
                        // the body, and so this stream, is gone).
                        let err = GatewayError::new(Category::Internal, format!("the call failed: {e}"));
                        Some(jsonrpc::Response::error(Value::Null, &err))
                    });
                }
            }
        }
    }

    /// The event for one item of the call's channel (`None`: dropped).
    fn progress_event(&mut self, item: ToCaller) -> Option<Bytes> {
        match item {
            ToCaller::Request(request) => Some(event_bytes(&request.to_message())),
            ToCaller::Log(entry) => Some(event_bytes(&entry.to_notification())),
            ToCaller::Progress(update) => {
                let token = self.caller_token.as_ref()?;
                let progress = update.progress();
                if self.last.is_some_and(|last| progress <= last) {
                    return None;
                }
                self.last = Some(progress);
                Some(event_bytes(&update.to_notification(token)))
            }
        }
    }
}

fn message_event(answer: &jsonrpc::Response) -> Bytes {
    event_bytes(answer)
}

fn event_bytes<T: serde::Serialize>(message: &T) -> Bytes {
    let data = serde_json::to_string(message).unwrap_or_default();
    Bytes::from(format!("event: message\ndata: {data}\n\n"))
}

/// An event stream that ends without an event: the answer to a request whose caller
/// cancelled it and can read an event stream.
pub fn empty() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::empty(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn body_text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    fn progress(value: Value) -> ToCaller {
        let params = value.as_object().cloned().expect("an object");
        ToCaller::Progress(
            crate::backchannel::to_caller::ProgressUpdate::from_params(&params).expect("valid"),
        )
    }

    fn log(value: Value) -> ToCaller {
        let params = value.as_object().cloned().expect("an object");
        ToCaller::Log(crate::backchannel::to_caller::LogEntry::from_params(&params).expect("valid"))
    }

    #[tokio::test]
    async fn progress_keeps_its_order_drops_what_does_not_increase_and_precedes_the_answer() {
        let (sink, received) = crate::backchannel::progress_channel();
        let call: Call = Box::pin(async move {
            for p in [1, 2, 1, 3] {
                let _ = sink.send(progress(json!({"progressToken": "mcp-gateway-1", "progress": p}))).await;
            }
            let _ = sink.send(log(json!({"level": "info", "data": "x"}))).await;
            Some(jsonrpc::Response::result_value(json!(9), &json!({"ok": true})))
        });
        let text = body_text(response(call, received, Some(json!("mine")), None)).await;
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let progress: Vec<&Value> = events.iter().filter_map(|e| e["params"].get("progress")).collect();
        assert_eq!(progress, [&json!(1), &json!(2), &json!(3)], "{text}");
        assert!(
            events
                .iter()
                .filter(|e| e["params"].get("progress").is_some())
                .all(|e| e["params"]["progressToken"] == "mine")
        );
        assert_eq!(events[3]["method"], "notifications/message", "{text}");
        assert_eq!(events.last().unwrap()["id"], 9, "{text}");
        assert_eq!(events.len(), 5);
    }

    #[tokio::test]
    async fn a_cancelled_call_ends_the_stream_without_a_response() {
        let (sink, received) = crate::backchannel::progress_channel();
        let call: Call = Box::pin(async move {
            let _ = sink.send(progress(json!({"progressToken": "g", "progress": 1}))).await;
            let err = crate::error::GatewayError::new(crate::error::Category::Cancelled, "cancelled");
            Some(jsonrpc::Response::error(json!(1), &err))
        });
        let text = body_text(response(call, received, Some(json!(5)), None)).await;
        assert_eq!(text.matches("data: ").count(), 1, "only the progress: {text}");
        assert!(!text.contains("\"id\""), "{text}");
    }
}
