//! Reading what the gateway answers: JSON-RPC results and errors, event streams, and the
//! Prometheus text of `/metrics`.

use std::collections::BTreeSet;

use serde_json::Value;

/// The `Accept` of a caller that takes a JSON answer or an event stream.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// The structured content of a `tools/call` result.
pub fn structured(response: &Value) -> &Value {
    &response["result"]["structuredContent"]
}

/// The text blocks of a `tools/call` result's content, joined.
pub fn result_text(answer: &Value) -> String {
    answer["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {answer}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

/// Asserts a JSON-RPC error with `code` and `category`, returning its `data`.
pub fn expect_error<'a>(response: &'a Value, code: i64, category: &str) -> &'a Value {
    let error = &response["error"];
    assert_eq!(error["code"], code, "unexpected answer: {response}");
    assert_eq!(error["data"]["category"], category, "unexpected answer: {response}");
    for key in ["retryable", "tool", "server", "attempts"] {
        assert!(error["data"].get(key).is_some(), "error.data lacks {key}: {response}");
    }
    &error["data"]
}

/// The JSON messages of an event stream's `data:` lines (one per event here).
pub fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {d}")))
        .collect()
}

/// Sums a metric's samples whose lines contain every `filter` (label fragments).
pub fn metric(metrics: &str, name: &str, filters: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The distinct values of `label` among the samples of `name`.
pub fn distinct_label_values(metrics: &str, name: &str, label: &str) -> BTreeSet<String> {
    let needle = format!("{label}=\"");
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter_map(|l| {
            let start = l.find(&needle)? + needle.len();
            let end = l[start..].find('"')?;
            Some(l[start..start + end].to_string())
        })
        .collect()
}
