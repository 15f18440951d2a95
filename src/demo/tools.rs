//! The six store tools over the fake catalogue. Business failures (an unknown product, no
//! stock) are `isError: true` results, as an MCP tool should report them.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::catalogue::{VOLUMES, Volume, by_id, by_isbn};

/// How many generated `bulk_NNNNN` tools the process offers besides the six (`--extra-tools`).
static EXTRA_TOOLS: AtomicUsize = AtomicUsize::new(0);

/// Offers `n` generated tools (a large catalogue for scale tests and benchmarks).
pub fn set_extra_tools(n: usize) {
    EXTRA_TOOLS.store(n, Ordering::Relaxed);
}

/// The name of the `i`-th generated tool.
pub fn bulk_name(i: usize) -> String {
    format!("bulk_{i:05}")
}

/// The tool definitions (`tools/list` entries), as shipped in `config/manga-tools.json`,
/// then the generated ones.
pub fn definitions() -> Vec<Value> {
    let doc: Value = serde_json::from_str(include_str!("../../config/manga-tools.json"))
        .expect("config/manga-tools.json is valid JSON (checked by tests)");
    let mut tools = match doc.get("tools") {
        Some(Value::Array(tools)) => tools.clone(),
        _ => Vec::new(),
    };
    tools.extend((0..EXTRA_TOOLS.load(Ordering::Relaxed)).map(|i| {
        json!({
            "name": bulk_name(i),
            "description": format!("Generated tool {i} of a large catalogue: echoes n."),
            "inputSchema": {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
            "annotations": {"readOnlyHint": true},
        })
    }));
    tools
}

/// A generated tool's answer, when `name` is one.
fn bulk(name: &str, args: &Value) -> Option<Result<Value, String>> {
    let i: usize = name.strip_prefix("bulk_")?.parse().ok()?;
    (i < EXTRA_TOOLS.load(Ordering::Relaxed) && bulk_name(i) == name)
        .then(|| Ok(json!({"tool": name, "n": args.get("n").cloned().unwrap_or(Value::Null)})))
}

/// Runs a tool. `None` when no tool has that name.
pub fn call(name: &str, args: &Value) -> Option<Value> {
    let result = match name {
        "manga_search" => manga_search(args),
        "price_lookup" => price_lookup(args),
        "inventory_check" => inventory_check(args),
        "add_to_cart" => add_to_cart(args),
        "checkout" => checkout(args),
        "manga_recommendations" => recommendations(args),
        other => bulk(other, args)?,
    };
    Some(match result {
        Ok(structured) => json!({
            "content": [{"type": "text", "text": structured.to_string()}],
            "structuredContent": structured,
            "isError": false,
        }),
        Err(message) => json!({
            "content": [{"type": "text", "text": message}],
            "isError": true,
        }),
    })
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn int_arg(args: &Value, key: &str, default: u64) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(default)
}

fn bool_arg(args: &Value, key: &str, default: bool) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(default)
}

fn summary(v: &Volume, language: &str) -> Value {
    let title = if language == "en" { v.title_en } else { v.title_ja };
    json!({
        "manga_id": v.id,
        "isbn": v.isbn,
        "title": format!("{title} {}", v.volume),
        "title_ja": v.title_ja,
        "title_en": v.title_en,
        "volume": v.volume,
        "genre": v.genre,
        "price_jpy": v.price_jpy,
        "in_stock": v.stock_tokyo + v.stock_osaka > 0,
        "cover_image": format!("https://images.mangaassist.example/covers/{}.jpg", v.id),
    })
}

fn manga_search(args: &Value) -> Result<Value, String> {
    let query = str_arg(args, "query").unwrap_or_default().to_lowercase();
    let language = str_arg(args, "language").unwrap_or("ja");
    let max = int_arg(args, "max_results", 5).clamp(1, 20) as usize;
    let genre = str_arg(args, "genre");
    let in_stock_only = bool_arg(args, "in_stock_only", false);
    let terms: Vec<&str> = query.split_whitespace().collect();
    let mut hits: Vec<(f64, &Volume)> = VOLUMES
        .iter()
        .filter(|v| genre.is_none_or(|g| v.genre == g))
        .filter(|v| !in_stock_only || v.stock_tokyo + v.stock_osaka > 0)
        .filter_map(|v| {
            let haystack =
                format!("{} {} {}巻 volume {}", v.title_ja, v.title_en, v.volume, v.volume).to_lowercase();
            // Every term must match; titles matching at the start rank first.
            let all = !terms.is_empty() && terms.iter().all(|t| haystack.contains(*t));
            let starts = terms.first().is_some_and(|t| haystack.starts_with(*t));
            all.then_some((if starts { 1.0 } else { 0.8 }, v))
        })
        .collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(b.1.id)));
    let results: Vec<Value> = hits
        .iter()
        .take(max)
        .map(|(score, v)| {
            let mut s = summary(v, language);
            s["relevance_score"] = json!((score * 1000.0).round() / 1000.0);
            s
        })
        .collect();
    Ok(json!({"query": query, "total": hits.len(), "results": results}))
}

fn find(args: &Value) -> Result<&'static Volume, String> {
    if let Some(id) = str_arg(args, "manga_id") {
        return by_id(id).ok_or_else(|| format!("No manga with product ID {id}"));
    }
    if let Some(isbn) = str_arg(args, "isbn") {
        return by_isbn(isbn).ok_or_else(|| format!("No manga with ISBN {isbn}"));
    }
    Err("Give a manga_id or an isbn".into())
}

fn price_lookup(args: &Value) -> Result<Value, String> {
    let v = find(args)?;
    let discount = if v.price_jpy > 600 { 10 } else { 0 };
    let mut out = json!({
        "manga_id": v.id,
        "isbn": v.isbn,
        "title": format!("{} {}", v.title_ja, v.volume),
        "currency": "JPY",
        "retail_price": v.price_jpy,
        "discount_percent": discount,
        "price": v.price_jpy * (100 - discount) / 100,
    });
    if bool_arg(args, "include_bundles", true) {
        out["bundles"] =
            json!([{"name": format!("{} 1-3巻セット", v.title_ja), "price": v.price_jpy * 3 * 90 / 100}]);
    }
    if bool_arg(args, "include_history", false) {
        out["history"] =
            json!((0..30).map(|day| json!({"days_ago": day, "price": v.price_jpy})).collect::<Vec<_>>());
    }
    Ok(out)
}

fn inventory_check(args: &Value) -> Result<Value, String> {
    let warehouse = str_arg(args, "warehouse").unwrap_or("all");
    let ids: Vec<&str> = args
        .get("manga_ids")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let items: Vec<Value> = ids
        .iter()
        .map(|id| match by_id(id) {
            None => json!({"manga_id": id, "found": false}),
            Some(v) => {
                let stock = match warehouse {
                    "tokyo" => v.stock_tokyo,
                    "osaka" => v.stock_osaka,
                    _ => v.stock_tokyo + v.stock_osaka,
                };
                json!({
                    "manga_id": v.id,
                    "found": true,
                    "warehouse": warehouse,
                    "stock": stock,
                    "locations": {"tokyo": v.stock_tokyo, "osaka": v.stock_osaka},
                    "restock_date": (stock == 0).then_some("2026-12-15"),
                })
            }
        })
        .collect();
    Ok(json!({"items": items}))
}

fn add_to_cart(args: &Value) -> Result<Value, String> {
    let v = find(args)?;
    let quantity = int_arg(args, "quantity", 1) as u32;
    let stock = v.stock_tokyo + v.stock_osaka;
    if stock < quantity {
        return Err(format!("{} {}: only {stock} in stock", v.title_ja, v.volume));
    }
    let subtotal = v.price_jpy * quantity;
    Ok(json!({
        "added": {"manga_id": v.id, "title": format!("{} {}", v.title_ja, v.volume), "quantity": quantity},
        "cart": {"items": 1, "subtotal_jpy": subtotal, "tax_jpy": subtotal / 10, "total_jpy": subtotal + subtotal / 10},
    }))
}

fn checkout(args: &Value) -> Result<Value, String> {
    let address = str_arg(args, "shipping_address_id").unwrap_or_default();
    let payment = str_arg(args, "payment_method_id").unwrap_or_default();
    if payment.starts_with("declined") {
        return Err("Payment method was declined".into());
    }
    let gift = bool_arg(args, "gift_wrap", false);
    // Deterministic order number derived from the inputs.
    let seed =
        address.bytes().chain(payment.bytes()).fold(17u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let subtotal = 1056u32;
    let total = subtotal + subtotal / 10 + if gift { 200 } else { 0 };
    Ok(json!({
        "order_id": format!("ORD-{:08}", seed % 100_000_000),
        "status": "confirmed",
        "total_jpy": total,
        "gift_wrap": gift,
        "estimated_delivery": "2026-11-26",
    }))
}

fn recommendations(args: &Value) -> Result<Value, String> {
    let user = str_arg(args, "user_id").unwrap_or_default();
    let genre = str_arg(args, "genre_preference").unwrap_or("any");
    let count = int_arg(args, "count", 5).clamp(1, 20) as usize;
    let offset = user.bytes().map(usize::from).sum::<usize>() % VOLUMES.len();
    let picks: Vec<Value> = VOLUMES
        .iter()
        .cycle()
        .skip(offset)
        .take(VOLUMES.len())
        .filter(|v| genre == "any" || v.genre == genre)
        .filter(|v| v.volume == 1)
        .take(count)
        .map(|v| {
            let mut s = summary(v, "ja");
            s["reason"] = json!(format!("{}が好きな読者に人気 / Popular with {} readers", v.genre, v.genre));
            s
        })
        .collect();
    Ok(json!({"user_id": user, "recommendations": picks}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_six_tools_are_defined_and_answer() {
        let names: Vec<String> =
            definitions().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names.len(), 6);
        let found = call("manga_search", &json!({"query": "ワンピース 100"})).unwrap();
        assert_eq!(found["structuredContent"]["results"][0]["manga_id"], "MNG-00000001");
        let en = call("manga_search", &json!({"query": "one piece", "language": "en"})).unwrap();
        assert_eq!(en["structuredContent"]["total"], 3);
        let missing = call("price_lookup", &json!({"manga_id": "MNG-99"})).unwrap();
        assert_eq!(missing["isError"], true);
        assert!(call("nope", &json!({})).is_none());
    }
}
