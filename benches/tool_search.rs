//! Tool search over a large catalogue: the store's six tools plus 10,000 generated ones (as
//! `tests/catalogue_scale.rs` and `demo-server --extra-tools` make them), searched through the
//! index the catalogue builds with its snapshot. Reports criterion's figures and, measured
//! here over 20,000 searches of a mixed query set, the p50/p99/max of one search (printed).
//! Run: `cargo bench --bench tool_search`.

use std::{collections::BTreeMap, hint::black_box, sync::Arc, time::Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mcp_gateway::{
    config::{SearchConfig, TransportKind},
    registry::{Catalog, catalog::ServerTools, search::SearchIndex},
};
use serde_json::json;

const EXTRA: usize = 10_000;

/// Queries a model would send, from one matching a handful of tools to one matching every tool.
const QUERIES: &[&str] = &[
    "check stock of a manga",
    "price of a manga volume with discounts",
    "add a book to my shopping cart",
    "recommend manga like One Piece",
    "search the catalog for Naruto volume 3",
    "pay for my order",
    "a generated tool",
    "bulk 04242",
];

fn catalog() -> Arc<Catalog> {
    let mut tools = mcp_gateway::demo::tools::definitions();
    tools.extend((0..EXTRA).map(|i| {
        json!({
            "name": format!("bulk_{i:05}"),
            "description": "A generated tool of a large catalogue.",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        })
    }));
    let search = SearchConfig { enabled: true, pinned: vec!["manga_search".into()], max_results: 5 };
    let catalog = Arc::new(Catalog::new(BTreeMap::new()).controlled(BTreeMap::new(), &search));
    catalog.rebuild(
        &[ServerTools {
            server: "demo".into(),
            transport: TransportKind::Http,
            tools: ServerTools::texts(&tools).into(),
        }],
        &[],
    );
    catalog
}

/// Searches timed for the percentiles: 20,000 under `cargo bench`; 200 when the test command
/// runs the benches once as tests (unoptimised there, 20,000 took minutes and measured nothing).
fn timed_searches() -> usize {
    if std::env::args().any(|a| a == "--bench") { 20_000 } else { 200 }
}

fn percentiles(index: &SearchIndex) {
    let rounds = timed_searches();
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let query = QUERIES[round % QUERIES.len()];
        let started = Instant::now();
        let found = index.ranked(black_box(query));
        black_box(found.first());
        samples.push(started.elapsed());
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "tool search over {} tools, {} searches: p50 {:?}, p99 {:?}, max {:?}",
        index.len(),
        samples.len(),
        at(0.50),
        at(0.99),
        samples[samples.len() - 1]
    );
}

fn search(c: &mut Criterion) {
    let started = Instant::now();
    let catalog = catalog();
    println!("catalogue of {} tools with its search index built in {:?}", EXTRA + 6, started.elapsed());
    let snapshot = catalog.snapshot();
    let index = snapshot.search_index().expect("search mode builds an index").clone();
    percentiles(&index);
    for query in ["check stock of a manga", "a generated tool"] {
        c.bench_function(&format!("search 10,006 tools: {query:?}"), |b| {
            b.iter(|| index.ranked(black_box(query)))
        });
    }
}

criterion_group!(benches, search);
criterion_main!(benches);
