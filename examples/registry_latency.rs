//! Registry resolution latency per tier: memory (the catalogue), Redis, DynamoDB.
//! Run by `bench/registry.sh`, which starts redis-server and DynamoDB Local and registers
//! `manga_search` in both. Usage: registry_latency REDIS_URL DYNAMODB_ENDPOINT

use std::{collections::BTreeMap, sync::Arc, time::Duration, time::Instant};

use mcp_gateway::{
    config::TransportKind,
    registry::{Catalog, Registry, catalog::ServerTools, dynamodb::DynamoStore, redis_tier::RedisStore},
};

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

fn show(tier: &str, n: usize, (p50, p99): (Duration, Duration)) {
    println!("| {tier} | {n} | {:.3} | {:.3} |", p50.as_secs_f64() * 1e6, p99.as_secs_f64() * 1e6);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (redis_url, dynamo_endpoint) = (&args[1], &args[2]);
    let tools: serde_json::Value = serde_json::from_str(include_str!("../config/manga-tools.json")).unwrap();
    let catalog = Arc::new(Catalog::new(BTreeMap::new()));
    catalog.rebuild(
        &[ServerTools {
            server: "catalog".into(),
            transport: TransportKind::Http,
            tools: ServerTools::texts(tools["tools"].as_array().unwrap()).into(),
        }],
        &[],
    );
    println!("| tier | lookups | p50 (µs) | p99 (µs) |\n|---|---:|---:|---:|");

    // Memory: timed in batches of 100 (Instant costs about as much as a lookup).
    let n = 1_000_000;
    let mut samples = Vec::with_capacity(n / 100);
    for _ in 0..n / 100 {
        let started = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(catalog.get(std::hint::black_box("manga_search")));
        }
        samples.push(started.elapsed() / 100);
    }
    show("memory (catalogue hash lookup)", n, percentiles(samples));

    let registry = Registry::new(catalog.clone(), None);
    let mut samples = Vec::with_capacity(100_000);
    for _ in 0..100_000 {
        let started = Instant::now();
        std::hint::black_box(registry.resolve("manga_search").await);
        samples.push(started.elapsed());
    }
    show("memory (Registry::resolve, async)", 100_000, percentiles(samples));

    let redis = RedisStore::new(
        mcp_gateway::redis_link::RedisLink::new(redis_url, None, false).unwrap(),
        "mcp:tool:",
        Duration::from_secs(600),
        Duration::from_millis(50),
    );
    let mut samples = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let started = Instant::now();
        let found = redis.get("manga_search").await.expect("Redis answers");
        samples.push(started.elapsed());
        assert!(found.is_some(), "manga_search must be in Redis");
    }
    show("Redis (GET + JSON decode)", 10_000, percentiles(samples));

    let dynamo = DynamoStore::connect(
        "mcp-tool-registry",
        Some(dynamo_endpoint),
        Some("us-east-1"),
        Duration::from_secs(5),
        1,
    )
    .await;
    let mut samples = Vec::with_capacity(2_000);
    for _ in 0..2_000 {
        let started = Instant::now();
        let found = dynamo.get("manga_search").await.expect("DynamoDB Local answers");
        samples.push(started.elapsed());
        assert!(found.is_some(), "manga_search must be in DynamoDB");
    }
    show("DynamoDB Local (consistent GetItem)", 2_000, percentiles(samples));
}
