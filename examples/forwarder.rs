//! The overhead benchmark's floor: a bare HTTP forwarder with no MCP, no JSON, no
//! resilience — every request to `POST /…` goes, body streamed as it is, to the upstream URL
//! through a pooled hyper client, and the answer comes back the same way. One worker thread,
//! like the gateway's default. Usage: `forwarder LISTEN UPSTREAM_URL`
//! (e.g. `forwarder 127.0.0.1:9000 http://127.0.0.1:8081/mcp`).

use std::{convert::Infallible, net::SocketAddr};

use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo},
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        return Err("usage: forwarder LISTEN UPSTREAM_URL".into());
    };
    let listen: SocketAddr = listen.parse()?;
    let upstream: hyper::Uri = upstream.parse()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new()).build(connector);
        let listener = tokio::net::TcpListener::bind(listen).await?;
        println!("forwarding http://{} -> {upstream}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let (client, upstream) = (client.clone(), upstream.clone());
            tokio::spawn(async move {
                let service = service_fn(move |mut request: Request<Incoming>| {
                    let client = client.clone();
                    *request.uri_mut() = upstream.clone();
                    async move {
                        Ok::<_, Infallible>(match client.request(request).await {
                            Ok(response) => response.map(http_body_util_either::Either::Left),
                            Err(_) => {
                                let mut bad =
                                    Response::new(http_body_util_either::Either::Right(String::new()));
                                *bad.status_mut() = hyper::StatusCode::BAD_GATEWAY;
                                bad
                            }
                        })
                    }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

/// A body that is either the upstream's (streamed) or a local empty one.
mod http_body_util_either {
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    use bytes::Bytes;
    use http_body::{Body, Frame, SizeHint};
    use hyper::body::Incoming;

    pub enum Either {
        Left(Incoming),
        Right(String),
    }

    impl Body for Either {
        type Data = Bytes;
        type Error = hyper::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
            match self.get_mut() {
                Either::Left(body) => Pin::new(body).poll_frame(cx),
                Either::Right(text) if text.is_empty() => Poll::Ready(None),
                Either::Right(text) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(std::mem::take(text)))))),
            }
        }

        fn is_end_stream(&self) -> bool {
            match self {
                Either::Left(body) => body.is_end_stream(),
                Either::Right(text) => text.is_empty(),
            }
        }

        fn size_hint(&self) -> SizeHint {
            match self {
                Either::Left(body) => body.size_hint(),
                Either::Right(text) => SizeHint::with_exact(text.len() as u64),
            }
        }
    }
}
