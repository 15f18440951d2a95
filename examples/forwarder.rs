//! The overhead benchmark's floor: a bare HTTP forwarder with no MCP, no JSON, no
//! resilience — every request to `POST /…` goes, body streamed as it is, to the upstream URL
//! through a pooled hyper client, and the answer comes back the same way. One worker thread,
//! like the gateway's default. Usage: `forwarder LISTEN UPSTREAM_URL [--read-json]`
//! (e.g. `forwarder 127.0.0.1:9000 http://127.0.0.1:8081/mcp`).
//!
//! `--read-json` adds the least any JSON-RPC-aware intermediary must do per call, and nothing
//! more: read the request whole and parse it (to learn the method and the tool it names),
//! forward the same bytes, read the answer whole and parse it (to check it is one JSON-RPC
//! response, for the request's id, before passing it on). No validation, no resilience, no
//! metrics, no log line. It measures what reading JSON alone costs a forwarder: the floor
//! under an MCP gateway's own cost.

use std::{borrow::Cow, convert::Infallible, net::SocketAddr};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode, Uri, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo},
};
use serde::Deserialize;

use body::Either;

const USAGE: &str = "usage: forwarder LISTEN UPSTREAM_URL [--read-json]";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        return Err(USAGE.into());
    };
    let read_json = match args.next().as_deref() {
        None => false,
        Some("--read-json") => true,
        Some(other) => return Err(format!("unknown argument {other:?}; {USAGE}").into()),
    };
    let listen: SocketAddr = listen.parse()?;
    let upstream: Uri = upstream.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let streaming: Client<HttpConnector, Incoming> =
            Client::builder(TokioExecutor::new()).build(connector.clone());
        let whole: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let mode = if read_json { " (reading JSON)" } else { "" };
        println!("forwarding http://{} -> {upstream}{mode}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let io = TokioIo::new(stream);
            if read_json {
                let (client, upstream) = (whole.clone(), upstream.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (client, upstream) = (client.clone(), upstream.clone());
                        async move { Ok::<_, Infallible>(forward_reading_json(request, &client, upstream).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(io, service).await;
                });
            } else {
                let (client, upstream) = (streaming.clone(), upstream.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |mut request: Request<Incoming>| {
                        let client = client.clone();
                        *request.uri_mut() = upstream.clone();
                        async move {
                            Ok::<_, Infallible>(match client.request(request).await {
                                Ok(response) => response.map(Either::Streamed),
                                Err(_) => status(StatusCode::BAD_GATEWAY),
                            })
                        }
                    });
                    let _ = http1::Builder::new().serve_connection(io, service).await;
                });
            }
        }
    })
}

/// What a JSON-RPC-aware forwarder must learn from a request: its id, method and tool name.
#[derive(Deserialize)]
struct Call<'a> {
    id: Option<serde_json::Value>,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// What it must check of an answer before passing it on: one JSON value (parsed whole, every
/// other member skipped but checked) with the request's id.
#[derive(Deserialize)]
struct Answer {
    id: Option<serde_json::Value>,
}

/// `--read-json`: parse the request, forward its bytes, parse the answer, pass its bytes on.
async fn forward_reading_json(
    request: Request<Incoming>,
    client: &Client<HttpConnector, Full<Bytes>>,
    upstream: Uri,
) -> Response<Either> {
    let (mut parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let Some(call) = read_call(&body) else {
        return status(StatusCode::BAD_REQUEST);
    };
    parts.uri = upstream;
    let Ok(response) = client.request(Request::from_parts(parts, Full::new(body.clone()))).await else {
        return status(StatusCode::BAD_GATEWAY);
    };
    let (parts, answer) = response.into_parts();
    let Ok(answer) = answer.collect().await.map(|b| b.to_bytes()) else {
        return status(StatusCode::BAD_GATEWAY);
    };
    if answers(&call, &answer) {
        Response::from_parts(parts, Either::Whole(Some(answer)))
    } else {
        status(StatusCode::BAD_GATEWAY)
    }
}

/// The request parsed whole, if it is a JSON-RPC request with a method, and a `tools/call`
/// names its tool.
fn read_call(body: &[u8]) -> Option<Call<'_>> {
    let names_its_tool = |call: &Call| call.params.as_ref().is_some_and(|p| p.name.is_some());
    serde_json::from_slice::<Call>(body)
        .ok()
        .filter(|call| !call.method.is_empty() && (call.method != "tools/call" || names_its_tool(call)))
}

/// Whether `answer`, parsed whole, is one JSON value carrying the call's id.
fn answers(call: &Call<'_>, answer: &[u8]) -> bool {
    serde_json::from_slice::<Answer>(answer).is_ok_and(|reply| reply.id == call.id)
}

/// An empty answer with `code`.
fn status(code: StatusCode) -> Response<Either> {
    let mut response = Response::new(Either::Whole(None));
    *response.status_mut() = code;
    response
}

/// A body that is either the upstream's, streamed, or one piece (none: empty).
mod body {
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    use bytes::Bytes;
    use http_body::{Body, Frame, SizeHint};
    use hyper::body::Incoming;

    pub enum Either {
        Streamed(Incoming),
        Whole(Option<Bytes>),
    }

    impl Body for Either {
        type Data = Bytes;
        type Error = hyper::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
            match self.get_mut() {
                Either::Streamed(body) => Pin::new(body).poll_frame(cx),
                Either::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            }
        }

        fn is_end_stream(&self) -> bool {
            match self {
                Either::Streamed(body) => body.is_end_stream(),
                Either::Whole(bytes) => bytes.is_none(),
            }
        }

        fn size_hint(&self) -> SizeHint {
            match self {
                Either::Streamed(body) => body.size_hint(),
                Either::Whole(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: &[u8] =
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"price_lookup","arguments":{}}}"#;

    #[test]
    fn a_call_is_read_for_its_method_and_tool() {
        let call = read_call(CALL).expect("a call");
        assert_eq!(
            (call.method.as_ref(), call.params.and_then(|p| p.name).as_deref()),
            ("tools/call", Some("price_lookup"))
        );
        assert!(read_call(b"not json").is_none());
        assert!(read_call(br#"{"jsonrpc":"2.0","id":1,"params":{"name":"x"}}"#).is_none(), "no method");
        assert!(
            read_call(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#).is_none(),
            "no tool"
        );
        assert!(
            read_call(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#).is_some()
        );
    }

    #[test]
    fn an_answer_passes_only_whole_and_for_the_same_id() {
        let call = read_call(CALL).expect("a call");
        assert!(answers(&call, br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#));
        assert!(!answers(&call, br#"{"jsonrpc":"2.0","id":8,"result":{"content":[]}}"#), "another id");
        assert!(!answers(&call, br#"{"jsonrpc":"2.0","id":7,"result":{"content":[}}"#), "broken deep inside");
        assert!(!answers(&call, br#"{"jsonrpc":"2.0","id":7,"result":{"#), "cut short");
    }
}
