//! The WebSocket and HTTP+SSE (2024-11-05) connectors against servers nobody here wrote: the
//! Python SDK 1.x WebSocket server, `server-everything` in its SSE mode and a Python SDK 2.x
//! SSE server. Each test opens a channel and speaks MCP by hand over it — `initialize`,
//! `notifications/initialized`, `tools/list`, `tools/call` — then checks what the connector
//! does with the odd cases: refused credentials, an answer over the size limit, a server that
//! hangs, a server that shuts down, an endpoint on another origin.
//!
//! Time limits here only stop a broken run from hanging (`HANG_GUARD`); no test checks a
//! duration.

use std::time::Duration;

use crate::common::*;
use mcp_gateway::upstream::{
    channel::{ChannelEnd, ConnectError, Connector, MessageChannel},
    legacy_sse::{LegacySseConnector, LegacySseSettings},
    websocket::{WebSocketConnector, WebSocketSettings},
};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

const HANG_GUARD: Duration = Duration::from_secs(60);
const LIMIT: usize = 64 * 1024;

fn ws(url: &str, headers: HeaderMap) -> WebSocketConnector {
    ws_with(url, headers, Duration::from_secs(30), Duration::from_secs(30))
}

fn ws_with(
    url: &str,
    headers: HeaderMap,
    ping_interval: Duration,
    pong_timeout: Duration,
) -> WebSocketConnector {
    WebSocketConnector::new(WebSocketSettings {
        url: url.parse().unwrap(),
        headers,
        connect_timeout: Duration::from_secs(10),
        max_message_bytes: LIMIT,
        ping_interval,
        pong_timeout,
    })
    .unwrap()
}

fn sse(url: &str, headers: HeaderMap) -> LegacySseConnector {
    LegacySseConnector::new(LegacySseSettings {
        url: url.parse().unwrap(),
        headers,
        connect_timeout: Duration::from_secs(10),
        post_timeout: Duration::from_secs(30),
        max_message_bytes: LIMIT,
    })
    .unwrap()
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}")).unwrap());
    headers
}

async fn connect(connector: &dyn Connector) -> MessageChannel {
    tokio::time::timeout(HANG_GUARD, connector.connect())
        .await
        .expect("connect returned")
        .unwrap_or_else(|e| panic!("connect to {} failed: {e}", connector.describe()))
}

async fn connect_error(connector: &dyn Connector) -> ConnectError {
    match tokio::time::timeout(HANG_GUARD, connector.connect()).await.expect("connect returned") {
        Ok(_) => panic!("connect to {} succeeded", connector.describe()),
        Err(e) => e,
    }
}

async fn send(channel: &MessageChannel, message: Value) {
    channel.outgoing.send(message.to_string()).await.expect("the channel takes a message");
}

/// The next message from the server that answers `id` (notifications and others skipped).
async fn answer(channel: &mut MessageChannel, id: u64) -> Value {
    loop {
        let text = tokio::time::timeout(HANG_GUARD, channel.incoming.recv())
            .await
            .expect("a message within the hang guard")
            .unwrap_or_else(|| panic!("the channel ended before answer {id}: {:?}", *channel.ended.borrow()));
        let message: Value = serde_json::from_str(&text).expect("a JSON message");
        if message["id"] == json!(id) {
            return message;
        }
    }
}

async fn request(channel: &mut MessageChannel, id: u64, method: &str, params: Value) -> Value {
    send(channel, json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    answer(channel, id).await
}

/// `initialize` then `notifications/initialized`; returns the `initialize` result.
async fn handshake(channel: &mut MessageChannel) -> Value {
    let params = json!({
        "protocolVersion": "2024-11-05",
        "capabilities": {},
        "clientInfo": {"name": "ws-sse-connector-test", "version": "1"},
    });
    let init = request(channel, 1, "initialize", params).await;
    assert!(init.get("error").is_none(), "initialize failed: {init}");
    send(channel, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    init["result"].clone()
}

/// [`odd_sse_hits`] off the runtime's threads (it is a blocking request).
async fn hits(addr: std::net::SocketAddr, path: &'static str) -> u64 {
    tokio::task::spawn_blocking(move || odd_sse_hits(addr, path)).await.unwrap()
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits for the channel to end; returns why.
async fn ended(channel: &mut MessageChannel) -> ChannelEnd {
    loop {
        match tokio::time::timeout(HANG_GUARD, channel.incoming.recv()).await.expect("the channel ends") {
            Some(_) => continue,
            None => return channel.ended.borrow().clone().expect("`ended` is set before `incoming` ends"),
        }
    }
}

/// `initialize` → `initialized` → `tools/list` → `tools/call add` and `shout`, by hand.
async fn speak_mcp(channel: &mut MessageChannel, server_name: &str) {
    let init = handshake(channel).await;
    assert_eq!(init["serverInfo"]["name"], server_name, "{init}");
    let list = request(channel, 2, "tools/list", json!({})).await;
    let names = tool_names(&list);
    for tool in ["add", "shout", "blob"] {
        assert!(names.iter().any(|n| n == tool), "tools/list lacks {tool}: {names:?}");
    }
    let sum =
        request(channel, 3, "tools/call", json!({"name": "add", "arguments": {"a": 20, "b": 22}})).await;
    assert_eq!(sum["result"]["structuredContent"]["result"], 42, "{sum}");
    let loud = request(channel, 4, "tools/call", json!({"name": "shout", "arguments": {"text": "ws"}})).await;
    assert_eq!(loud["result"]["content"][0]["text"], "WS", "{loud}");
}

// --- WebSocket: the Python SDK 1.x server --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_speaks_mcp_with_the_python_sdk_1x_server() {
    let port = free_port();
    let _server = python_ws_server(port, None);
    let connector = ws(&format!("ws://127.0.0.1:{port}/ws"), HeaderMap::new());
    let mut channel = connect(&connector).await;
    speak_mcp(&mut channel, "python-ws-peer").await;
    // Answers are matched by id, not by order: two requests in flight at once.
    send(&channel, json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}})).await;
    send(&channel, json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 2}}})).await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let text = tokio::time::timeout(HANG_GUARD, channel.incoming.recv()).await.unwrap().unwrap();
        let message: Value = serde_json::from_str(&text).unwrap();
        seen.push((
            message["id"].as_u64().unwrap(),
            message["result"]["structuredContent"]["result"].as_u64().unwrap(),
        ));
    }
    seen.sort();
    assert_eq!(seen, [(10, 2), (11, 4)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrade_refused_with_401_needs_auth_and_the_configured_header_is_sent() {
    let port = free_port();
    let _server = python_ws_server(port, Some("s3cret"));
    let url = format!("ws://127.0.0.1:{port}/ws");
    let refused = connect_error(&ws(&url, HeaderMap::new())).await;
    assert!(matches!(refused, ConnectError::NeedsAuth { status: 401 }), "{refused:?}");
    let refused = connect_error(&ws(&url, bearer("wrong"))).await;
    assert!(matches!(refused, ConnectError::NeedsAuth { status: 401 }), "{refused:?}");
    let mut channel = connect(&ws(&url, bearer("s3cret"))).await;
    speak_mcp(&mut channel, "python-ws-peer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_message_over_the_limit_ends_the_channel_as_too_large() {
    let port = free_port();
    let _server = python_ws_server(port, None);
    let mut channel = connect(&ws(&format!("ws://127.0.0.1:{port}/ws"), HeaderMap::new())).await;
    handshake(&mut channel).await;
    let small =
        request(&mut channel, 2, "tools/call", json!({"name": "blob", "arguments": {"size": LIMIT / 4}}))
            .await;
    assert_eq!(small["result"]["content"][0]["text"].as_str().unwrap().len(), LIMIT / 4);
    send(&channel, json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "blob", "arguments": {"size": LIMIT * 4}}})).await;
    assert_eq!(ended(&mut channel).await, ChannelEnd::MessageTooLarge { limit: LIMIT });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_server_that_stops_answering_pings_is_broken() {
    let port = free_port();
    let server = python_ws_server(port, None);
    let connector = ws_with(
        &format!("ws://127.0.0.1:{port}/ws"),
        HeaderMap::new(),
        Duration::from_millis(200),
        Duration::from_secs(3),
    );
    let mut channel = connect(&connector).await;
    speak_mcp(&mut channel, "python-ws-peer").await;
    // The process hangs: its kernel still keeps the TCP connection, only a ping finds out.
    // Nothing is sent after this point, so only the keepalive can end the channel.
    server.signal("STOP");
    let end = ended(&mut channel).await;
    server.signal("CONT");
    assert!(matches!(&end, ChannelEnd::Broken(why) if why.contains("no pong")), "{end:?}");
    // The server is fine again: a new connection works.
    let mut again = connect(&connector).await;
    speak_mcp(&mut again, "python-ws-peer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_server_shutdown_closes_the_channel_with_its_close_frame() {
    let port = free_port();
    let mut server = python_ws_server(port, None);
    let mut channel = connect(&ws(&format!("ws://127.0.0.1:{port}/ws"), HeaderMap::new())).await;
    speak_mcp(&mut channel, "python-ws-peer").await;
    server.terminate();
    let end = ended(&mut channel).await;
    // uvicorn closes its WebSockets with 1012 (service restart) when it shuts down.
    assert!(matches!(&end, ChannelEnd::Closed(why) if why.contains("1012")), "{end:?}");
    let refused = connect_error(&ws(&format!("ws://127.0.0.1:{port}/ws"), HeaderMap::new())).await;
    assert!(matches!(refused, ConnectError::Unreachable(_)), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_server_that_does_not_select_the_mcp_subprotocol_is_refused() {
    let (_server, addr) = odd_ws_server();
    let error = connect_error(&ws(&format!("ws://{addr}/ws"), HeaderMap::new())).await;
    assert!(matches!(&error, ConnectError::Protocol(why) if why.contains("`mcp` subprotocol")), "{error:?}");
}

// --- HTTP+SSE (2024-11-05): server-everything and the Python SDK 2.x -----------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_speaks_mcp_with_server_everything() {
    let port = free_port();
    let _server = everything_sse_server(port);
    let mut channel = connect(&sse(&format!("http://127.0.0.1:{port}/sse"), HeaderMap::new())).await;
    let init = handshake(&mut channel).await;
    assert!(init["serverInfo"]["name"].as_str().unwrap().contains("everything"), "{init}");
    let list = request(&mut channel, 2, "tools/list", json!({})).await;
    assert!(tool_names(&list).iter().any(|n| n == "echo"), "{list}");
    let echo =
        request(&mut channel, 3, "tools/call", json!({"name": "echo", "arguments": {"message": "over sse"}}))
            .await;
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: over sse", "{echo}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_speaks_mcp_with_the_python_sdk_2x_server() {
    let port = free_port();
    let _server = python_sse_server(port, None);
    let mut channel = connect(&sse(&format!("http://127.0.0.1:{port}/sse"), HeaderMap::new())).await;
    speak_mcp(&mut channel, "python-sse-peer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_stream_refused_with_401_needs_auth_and_the_configured_header_is_sent() {
    let port = free_port();
    let _server = python_sse_server(port, Some("s3cret"));
    let url = format!("http://127.0.0.1:{port}/sse");
    let refused = connect_error(&sse(&url, HeaderMap::new())).await;
    assert!(matches!(refused, ConnectError::NeedsAuth { status: 401 }), "{refused:?}");
    // The header goes on the GET and on every POST: the whole exchange works with it.
    let mut channel = connect(&sse(&url, bearer("s3cret"))).await;
    speak_mcp(&mut channel, "python-sse-peer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_message_over_the_limit_ends_the_channel_as_too_large() {
    let port = free_port();
    let _server = python_sse_server(port, None);
    let mut channel = connect(&sse(&format!("http://127.0.0.1:{port}/sse"), HeaderMap::new())).await;
    handshake(&mut channel).await;
    let small =
        request(&mut channel, 2, "tools/call", json!({"name": "blob", "arguments": {"size": LIMIT / 4}}))
            .await;
    assert_eq!(small["result"]["content"][0]["text"].as_str().unwrap().len(), LIMIT / 4);
    send(&channel, json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "blob", "arguments": {"size": LIMIT * 4}}})).await;
    assert_eq!(ended(&mut channel).await, ChannelEnd::MessageTooLarge { limit: LIMIT });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_server_shutdown_ends_the_stream_as_closed() {
    let port = free_port();
    let mut server = python_sse_server(port, None);
    let mut channel = connect(&sse(&format!("http://127.0.0.1:{port}/sse"), HeaderMap::new())).await;
    speak_mcp(&mut channel, "python-sse-peer").await;
    server.terminate();
    let end = ended(&mut channel).await;
    assert!(matches!(&end, ChannelEnd::Closed(_)), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_endpoint_on_another_origin_is_refused_and_never_posted_to() {
    let (_server, addr) = odd_sse_server();
    let error = connect_error(&sse(&format!("http://{addr}/foreign-endpoint"), bearer("s3cret"))).await;
    assert!(matches!(&error, ConnectError::Protocol(why) if why.contains("another origin")), "{error:?}");
    assert_eq!(hits(addr, "/foreign-endpoint").await, 1, "the stream was opened");
    assert_eq!(hits(addr, "/messages").await, 0, "nothing (no credentials) went to the other origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_post_refused_with_401_breaks_the_channel_and_the_next_connect_needs_auth() {
    let (_server, addr) = odd_sse_server();
    let connector = sse(&format!("http://{addr}/refuse-posts"), HeaderMap::new());
    let mut channel = connect(&connector).await;
    send(&channel, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    let end = ended(&mut channel).await;
    assert!(matches!(&end, ChannelEnd::Broken(why) if why.contains("401")), "{end:?}");
    assert_eq!(hits(addr, "/refuse").await, 1);
    let error = connect_error(&connector).await;
    assert!(matches!(error, ConnectError::NeedsAuth { status: 401 }), "{error:?}");
    assert_eq!(hits(addr, "/refuse-posts").await, 1, "needs_auth is reported without opening a stream");
    // Reported once: a later connect tries the server again.
    drop(connect(&connector).await);
    assert_eq!(hits(addr, "/refuse-posts").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_url_that_is_not_an_event_stream_is_a_protocol_error() {
    let (_server, addr) = odd_sse_server();
    let error = connect_error(&sse(&format!("http://{addr}/not-sse"), HeaderMap::new())).await;
    assert!(matches!(&error, ConnectError::Protocol(why) if why.contains("text/event-stream")), "{error:?}");
    let error = connect_error(&sse(&format!("http://{addr}/nothing-here"), HeaderMap::new())).await;
    assert!(matches!(&error, ConnectError::Protocol(why) if why.contains("404")), "{error:?}");
}
