//! The overhead benchmark's REST upstream (the `openapi` rows of `bench/overhead.sh`): the demo
//! server's `price_lookup` as a plain REST endpoint, `GET /prices/{manga_id}?nonce=N`, answering
//! the same JSON the demo tool returns as its structured content, so the REST rows and the MCP
//! rows move the same payload. `GET /openapi.json` serves the OpenAPI document that describes it
//! (`examples/rest_upstream.openapi.json`), which the gateway's `openapi` transport reads. One
//! worker thread, plain hyper, no framework: like the demo server, a trivial upstream whose own
//! cost stays small next to the paths measured in front of it.
//! Usage: `rest_upstream LISTEN` (e.g. `rest_upstream 127.0.0.1:9200`).

use std::{convert::Infallible, net::SocketAddr};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode, body::Incoming, header::CONTENT_TYPE, server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::TokioIo;

const USAGE: &str = "usage: rest_upstream LISTEN";
const DOCUMENT: &str = include_str!("rest_upstream.openapi.json");
/// The one volume the benchmark asks for; its answer is the demo tool's, byte for byte.
const KNOWN: &str = "MNG-00000001";
const PRICE: &str = r#"{"manga_id":"MNG-00000001","isbn":"9784088835457","title":"ワンピース 100","currency":"JPY","retail_price":528,"discount_percent":0,"price":528,"bundles":[{"name":"ワンピース 1-3巻セット","price":1425}]}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), None) = (args.next(), args.next()) else {
        return Err(USAGE.into());
    };
    let listen: SocketAddr = listen.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        println!("REST upstream on http://{}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service =
                    service_fn(
                        |request: Request<Incoming>| async move { Ok::<_, Infallible>(answer(&request)) },
                    );
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

/// The answer to one request: the price, the document, or a JSON 404/405.
fn answer(request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if request.method() != Method::GET {
        return json(StatusCode::METHOD_NOT_ALLOWED, r#"{"detail":"only GET"}"#.into());
    }
    if path == "/openapi.json" {
        return json(StatusCode::OK, DOCUMENT.into());
    }
    match path.strip_prefix("/prices/") {
        Some(KNOWN) => json(StatusCode::OK, PRICE.into()),
        Some(_) => json(StatusCode::NOT_FOUND, r#"{"detail":"no such manga_id"}"#.into()),
        None => json(StatusCode::NOT_FOUND, r#"{"detail":"no such path"}"#.into()),
    }
}

fn json(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}
