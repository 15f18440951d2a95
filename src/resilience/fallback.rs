//! Fallback results: how a degraded answer is marked, so the orchestrator (and the model)
//! can tell it apart from a live one. Which fallback applies is configured per tool
//! (`stale_fallback`, `fallback_tool`); every fallback served is counted in
//! `mcp_gateway_fallbacks_total{tool,kind}`.

use std::time::Duration;

use serde_json::{Value, json, value::RawValue};

/// Marks a last good result as stale: `_meta.degraded`, `_meta.stale`, `_meta.stale_age_ms`.
pub fn mark_stale(raw: &RawValue, age: Duration, reason: &str) -> Box<RawValue> {
    mark(
        raw,
        json!({"degraded": true, "stale": true, "stale_age_ms": age.as_millis() as u64, "degraded_reason": reason}),
    )
}

/// Marks an alternative tool's result: `_meta.degraded`, `_meta.fallback_tool`.
pub fn mark_alternative(raw: &RawValue, alternative: &str, reason: &str) -> Box<RawValue> {
    mark(raw, json!({"degraded": true, "fallback_tool": alternative, "degraded_reason": reason}))
}

fn mark(raw: &RawValue, fields: Value) -> Box<RawValue> {
    let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else {
        return raw.to_owned();
    };
    if let (Some(obj), Value::Object(fields)) = (result.as_object_mut(), fields) {
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.extend(fields);
        }
    }
    serde_json::value::to_raw_value(&result).unwrap_or_else(|_| raw.to_owned())
}
