//! The overhead benchmark's resource upstream (`bench/overhead.sh`: the `resources/read` rows
//! and `resources/list` over 10,000 resources): a stateless MCP server on streamable HTTP
//! (session era, JSON answers, no session id) whose catalogue is `--resources N` items
//! (`bench://item/00000` …), listed in pages of `--page-size P` with `nextCursor` as a real
//! server paginates, each readable as a small JSON text. It plays for resources the part the
//! demo server's `price_lookup` plays for tools: a trivial Rust upstream, so what the rows
//! compare is the path in front of it. One worker thread, like the forwarder.
//! Usage: `resource_server LISTEN [--resources N] [--page-size P]` (defaults 10000 and 100).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

const USAGE: &str = "usage: resource_server LISTEN [--resources N] [--page-size P]";
const PREFIX: &str = "bench://item/";
/// The session-era revisions it answers `initialize` in (the newest when asked for another).
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The catalogue: how many resources, and how many a page lists.
struct Catalogue {
    count: usize,
    page: usize,
}

impl Catalogue {
    fn definition(i: usize) -> Value {
        json!({
            "uri": format!("{PREFIX}{i:05}"),
            "name": format!("item-{i:05}"),
            "title": format!("Catalogue item {i}"),
            "description": format!("One manga volume of the benchmark's catalogue (item {i})"),
            "mimeType": "application/json",
        })
    }

    /// The page starting at `cursor` (an offset this server wrote; anything else is refused).
    fn list(&self, cursor: Option<&Value>) -> Result<Value, (i64, &'static str)> {
        let start = match cursor {
            None | Some(Value::Null) => 0,
            Some(Value::String(text)) => match text.parse::<usize>() {
                Ok(start) if start < self.count => start,
                _ => return Err((-32602, "Invalid cursor")),
            },
            Some(_) => return Err((-32602, "Invalid cursor")),
        };
        let end = (start + self.page).min(self.count);
        let mut result = json!({"resources": (start..end).map(Self::definition).collect::<Vec<_>>()});
        if end < self.count {
            result["nextCursor"] = json!(end.to_string());
        }
        Ok(result)
    }

    fn read(&self, uri: &str) -> Option<Value> {
        let i = uri.strip_prefix(PREFIX)?.parse::<usize>().ok().filter(|i| *i < self.count)?;
        let text = json!({"id": format!("MNG-{i:08}"), "title": format!("Volume {i}"), "retail_price": 528, "stock": i % 17})
            .to_string();
        Some(json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": text}]}))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args.next().ok_or(USAGE)?.parse()?;
    let mut catalogue = Catalogue { count: 10_000, page: 100 };
    while let Some(flag) = args.next() {
        let value: usize = args.next().ok_or(USAGE)?.parse()?;
        match flag.as_str() {
            "--resources" => catalogue.count = value,
            "--page-size" => catalogue.page = value.max(1),
            other => return Err(format!("unknown argument {other:?}; {USAGE}").into()),
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        println!(
            "serving {} resources, {} a page, on http://{}/mcp",
            catalogue.count,
            catalogue.page,
            listener.local_addr()?
        );
        let app = Router::new().route("/mcp", post(mcp)).with_state(Arc::new(catalogue));
        axum::serve(listener, app).await?;
        Ok(())
    })
}

async fn mcp(State(catalogue): State<Arc<Catalogue>>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return answer(
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
        );
    };
    // A notification (`notifications/initialized`): nothing to answer.
    let Some(id) = request.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
    let params = request.get("params").unwrap_or(&Value::Null);
    let result = match request["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let asked = params["protocolVersion"].as_str().unwrap_or_default();
            let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[0]);
            json!({
                "protocolVersion": version,
                "capabilities": {"resources": {}, "tools": {}},
                "serverInfo": {"name": "bench-resources", "version": "1.0.0"},
            })
        }
        "ping" => json!({}),
        // One tool, so a gateway in front counts the server as loaded (`ready_min_tools`).
        "tools/list" => json!({"tools": [{
            "name": "catalogue_size",
            "description": "How many items the catalogue holds.",
            "inputSchema": {"type": "object", "properties": {}},
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": catalogue.count.to_string()}]}),
        "resources/list" => match catalogue.list(params.get("cursor")) {
            Ok(page) => page,
            Err((code, message)) => return error(id, code, message),
        },
        "resources/templates/list" => json!({"resourceTemplates": []}),
        "resources/read" => match catalogue.read(params["uri"].as_str().unwrap_or_default()) {
            Some(contents) => contents,
            None => return error(id, -32002, "Resource not found"),
        },
        _ => return error(id, -32601, "Method not found"),
    };
    answer(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: Value, code: i64, message: &str) -> Response {
    answer(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn answer(message: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], message.to_string()).into_response()
}
