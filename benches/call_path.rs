//! Micro-benchmarks of the per-call pieces of a `tools/call`: parse the inbound request,
//! resolve the tool (memory tier, 6 and 10,000 tools), validate the arguments, classify the
//! upstream's answer, encode the answer. Run: `cargo bench --bench call_path`.

use std::{collections::BTreeMap, hint::black_box, sync::Arc};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use mcp_gateway::{
    config::TransportKind,
    protocol::{jsonrpc, mcp},
    registry::{Catalog, Registry, catalog::ServerTools},
    resilience::classify::Outcome,
    upstream::{RawResult, UpstreamReply},
};
use serde_json::{Value, json, value::RawValue};

const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"price_lookup","arguments":{"manga_id":"MNG-00000001","nonce":7}}}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"{\"manga_id\":\"MNG-00000001\",\"retail_price\":528,\"currency\":\"JPY\",\"tax_included\":true}"}],"structuredContent":{"manga_id":"MNG-00000001","retail_price":528,"currency":"JPY","tax_included":true},"isError":false}"#;

fn registry(extra: usize) -> Registry {
    let mut tools = mcp_gateway::demo::tools::definitions();
    tools.extend((0..extra).map(|i| {
        json!({
            "name": format!("bulk_{i:05}"),
            "description": "A generated tool of a large catalogue.",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        })
    }));
    let catalog = Arc::new(Catalog::new(BTreeMap::new()));
    catalog.rebuild(
        &[ServerTools {
            server: "demo".into(),
            transport: TransportKind::Http,
            tools: ServerTools::texts(&tools).into(),
        }],
        &[],
    );
    Registry::new(catalog, None)
}

fn pieces(c: &mut Criterion) {
    c.bench_function("parse tools/call request", |b| b.iter(|| jsonrpc::decode(black_box(REQUEST))));

    for (label, extra) in [("6 tools", 0), ("10,006 tools", 10_000)] {
        let registry = registry(extra);
        c.bench_function(&format!("resolve (memory tier, {label})"), |b| {
            b.iter(|| registry.resolve(black_box("price_lookup")).now_or_never().flatten().expect("resolves"))
        });
    }

    let registry = registry(0);
    let tool = registry.resolve("price_lookup").now_or_never().flatten().expect("resolves");
    let arguments: Value = json!({"manga_id": "MNG-00000001", "nonce": 7});
    c.bench_function("validate arguments (price_lookup)", |b| {
        b.iter_batched(
            || arguments.clone(),
            |mut args| tool.schema.check(&mut args).map(|_| args),
            BatchSize::SmallInput,
        )
    });

    c.bench_function("classify a result", |b| {
        b.iter_batched(
            || Ok(UpstreamReply::Result(RawResult::new(RawValue::from_string(RESULT.into()).expect("json")))),
            |reply| Outcome::of(&reply, true),
            BatchSize::SmallInput,
        )
    });

    c.bench_function("encode the answer (legacy)", |b| {
        b.iter_batched(
            || RawValue::from_string(RESULT.into()).expect("json"),
            |raw| serde_json::to_vec(&jsonrpc::Response::result(json!(42), raw)),
            BatchSize::SmallInput,
        )
    });
    c.bench_function("encode the answer (modern)", |b| {
        b.iter_batched(
            || RawValue::from_string(RESULT.into()).expect("json"),
            |raw| serde_json::to_vec(&jsonrpc::Response::result(json!(42), mcp::with_result_type(raw))),
            BatchSize::SmallInput,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = pieces
}
criterion_main!(benches);
