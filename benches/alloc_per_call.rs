//! Allocations and bytes allocated per call on the gateway's side of the whole in-process call
//! path: the inbound router (decode → dispatch → resolve → validate → forward through the
//! server's stack → classify → encode), driven on one current-thread runtime against the demo
//! MCP server running on another thread. A counting global allocator counts only the gateway's
//! thread, so the upstream's own work is not included; the pooled upstream HTTP connection is
//! (its tasks run on the gateway's runtime). The production JSON log layer is installed, writing
//! to a sink (one log line per call).
//!
//! Run: `cargo bench --bench alloc_per_call` (prints a table; no criterion, counts are exact).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::Arc,
};

use axum::body::Body;
use mcp_gateway::{
    config::{Config, TransportKind},
    gateway::{Gateway, refresh::Refresher},
    registry::catalog::ServerTools,
};
use serde_json::{Value, json};
use tower::ServiceExt;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
            let _ = BYTES.try_with(|b| b.set(b.get() + size as u64));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts what `f` allocates on this thread.
async fn counted<F: std::future::Future>(f: F) -> (F::Output, u64, u64) {
    ALLOCS.with(|a| a.set(0));
    BYTES.with(|b| b.set(0));
    COUNTING.with(|c| c.set(true));
    let out = f.await;
    COUNTING.with(|c| c.set(false));
    (out, ALLOCS.with(Cell::get), BYTES.with(Cell::get))
}

fn upstream() -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let addr = mcp_gateway::demo::http::spawn(([127, 0, 0, 1], 0).into(), Default::default())
                .await
                .expect("demo server");
            tx.send(addr).expect("send addr");
            std::future::pending::<()>().await;
        });
    });
    rx.recv().expect("demo address")
}

fn bulk_tools(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "name": format!("bulk_{i:05}"),
                "description": "A generated tool of a large catalogue.",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "annotations": {"readOnlyHint": true},
            })
        })
        .collect()
}

async fn post(router: &axum::Router, body: String) -> (u16, bytes::Bytes) {
    let request = axum::http::Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(body))
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    // Frames are read without being joined (joining would count the client's copy of a
    // large list as the gateway's); only the first frame is kept, for checks.
    let mut frames = response.into_body().into_data_stream();
    let mut first = bytes::Bytes::new();
    while let Some(frame) = futures_util::StreamExt::next(&mut frames).await {
        let frame = frame.expect("body");
        if first.is_empty() {
            first = frame;
        }
    }
    (status, first)
}

fn call_body(i: u64, modern: bool) -> String {
    let meta =
        if modern { r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"# } else { "" };
    format!(
        r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"price_lookup","arguments":{{"manga_id":"MNG-00000001","nonce":{i}}}{meta}}}}}"#
    )
}

fn list_body(modern: bool) -> String {
    let meta =
        if modern { r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"# } else { "" };
    format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{{meta}}}}}"#)
}

const CALLS: u64 = 2_000;

async fn measure(label: &str, router: &axum::Router, next: &mut u64) {
    for modern in [false, true] {
        // Warm: pooled connection, lazily built state.
        for _ in 0..50 {
            *next += 1;
            let (status, body) = post(router, call_body(*next, modern)).await;
            assert_eq!(status, 200);
            assert!(std::str::from_utf8(&body).unwrap_or_default().contains("retail_price"), "{body:?}");
        }
        let start = *next;
        let ((), allocs, bytes) = counted(async {
            for i in 0..CALLS {
                let _ = post(router, call_body(start + i + 1, modern)).await;
            }
        })
        .await;
        *next += CALLS;
        let era = if modern { "modern" } else { "legacy" };
        println!(
            "| tools/call ({era}), {label} | {:.1} | {:.0} |",
            allocs as f64 / CALLS as f64,
            bytes as f64 / CALLS as f64
        );
        let lists = 20;
        let ((), allocs, bytes) = counted(async {
            for _ in 0..lists {
                let (status, _) = post(router, list_body(modern)).await;
                assert_eq!(status, 200);
            }
        })
        .await;
        println!(
            "| tools/list ({era}), {label} | {:.1} | {:.0} |",
            allocs as f64 / lists as f64,
            bytes as f64 / lists as f64
        );
        // The list is pre-serialised and shared: answering it must not copy it (at 10,006
        // tools it is 2.1 MB; the answer's own envelope is a few KiB). This holds for clients
        // that also accept event streams (as this one does, like the SDKs).
        assert!(bytes / lists < 64 * 1024, "tools/list ({era}), {label}: {} bytes per list", bytes / lists);
    }
}

/// Every call's future is boxed once and its memory touched on every call: a rarely taken path
/// awaited inline (the registry tiers' lookups, the AWS SDK's configuration loading for a
/// registry-only Lambda server) would make it 14.7 KB in release; boxed, it is 1.5 KB.
fn call_future_stays_small(gateway: &Gateway) {
    let ctx = mcp_gateway::gateway::call::CallContext {
        request_id: "size".into(),
        jsonrpc_id: serde_json::Value::Null,
        deadline: None,
        notifications: Default::default(),
        cancelled: Default::default(),
        caller: Default::default(),
        session: None,
        owner: mcp_gateway::ownership::Owner::Nobody,
        apps: false,
    };
    let size = std::mem::size_of_val(&gateway.call_tool(None, &ctx));
    println!("the tools/call future: {size} bytes");
    assert!(
        size <= 4096,
        "the tools/call future grew to {size} bytes: box the rarely taken path that did it"
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run in both.
    let addr = upstream();
    let dir = std::env::temp_dir().join(format!("alloc-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, format!("[servers.demo]\ntransport = \"http\"\nurl = \"http://{addr}/mcp\"\n"))
        .expect("config");
    let config = Config::load(Some(&path), std::iter::empty()).expect("config");
    let _ = std::fs::remove_dir_all(&dir);

    {
        use tracing_subscriber::prelude::*;
        // The production JSON layer (`serve` installs the same one), writing to a sink.
        let json = mcp_gateway::telemetry::json_lines::JsonLines::new(std::io::sink);
        tracing_subscriber::registry().with(json).init();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let gateway: Arc<Gateway> = Gateway::new(config).await.expect("gateway");
        Refresher::new(gateway.clone()).refresh_all().await;
        let router = mcp_gateway::server::router(
            gateway.clone(),
            &mcp_gateway::server::admin::AdminAccess::disabled(),
        );
        call_future_stays_small(&gateway);
        println!("| path, catalogue | allocations per request | bytes allocated per request |");
        println!("|---|---:|---:|");
        let mut next = 0;
        measure("6 tools", &router, &mut next).await;
        let mut tools = mcp_gateway::demo::tools::definitions();
        tools.extend(bulk_tools(10_000));
        let demo = ServerTools {
            server: "demo".into(),
            transport: TransportKind::Http,
            tools: ServerTools::texts(&tools).into(),
        };
        gateway.catalog().rebuild(&[demo], &[]);
        let health = mcp_gateway::gateway::capabilities::server_health(&gateway);
        if !health.is_empty() {
            let report = mcp_gateway::gateway::capabilities::summarize(&gateway, &health, None).report;
            panic!("the gateway must be healthy (the fast path) before the 10k run: {report}");
        }
        measure("10,006 tools", &router, &mut next).await;
    });
}
