//! Per-tool result size budget: text content beyond `max_result_bytes` is cut at a UTF-8
//! boundary and an explicit notice appended, so the agent knows it saw part of the answer.
//! A cut result drops `structuredContent` (it no longer matches the text) and says so in
//! `_meta` (`truncated`, `omitted_bytes`).

use serde_json::{Value, json, value::RawValue};

/// Returns the cut result, or `None` when it fits (or cannot be read as a tool result).
pub fn truncate(raw: &RawValue, budget: usize) -> Option<Box<RawValue>> {
    if budget == 0 || raw.get().len() <= budget {
        return None;
    }
    let mut result: Value = serde_json::from_str(raw.get()).ok()?;
    let content = result.get_mut("content")?.as_array_mut()?;
    let total: usize = content.iter().filter_map(|c| c.get("text")?.as_str()).map(str::len).sum();
    if total <= budget {
        return None;
    }
    let mut left = budget;
    for block in content.iter_mut() {
        let Some(text) = block.get("text").and_then(Value::as_str) else { continue };
        let keep = floor_char_boundary(text, left);
        left -= keep;
        let cut = text[..keep].to_string();
        block["text"] = Value::String(cut);
    }
    content.retain(|b| b.get("text").and_then(Value::as_str) != Some(""));
    let omitted = total - (budget - left);
    content.push(json!({
        "type": "text",
        "text": format!("[truncated by mcp-gateway: {omitted} of {total} bytes omitted]"),
    }));
    if let Some(obj) = result.as_object_mut() {
        obj.remove("structuredContent");
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("truncated".into(), json!(true));
            meta.insert("omitted_bytes".into(), json!(omitted));
        }
    }
    serde_json::value::to_raw_value(&result).ok()
}

fn floor_char_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_a_utf8_boundary_with_a_notice() {
        let text = "ワンピース".repeat(10); // 3 bytes a character
        let raw = serde_json::value::to_raw_value(
            &json!({"content": [{"type": "text", "text": text}], "structuredContent": {}}),
        )
        .unwrap();
        let cut: Value = serde_json::from_str(truncate(&raw, 10).unwrap().get()).unwrap();
        assert_eq!(cut["content"][0]["text"], "ワンピ");
        assert!(cut["content"][1]["text"].as_str().unwrap().contains("141 of 150 bytes omitted"));
        assert_eq!(cut["_meta"]["truncated"], true);
        assert!(cut.get("structuredContent").is_none());
        assert!(truncate(&raw, 10_000).is_none());
    }
}
