//! A hyper origin with one route per behaviour a monitor must tell apart.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

type Body = BoxBody<Bytes, Infallible>;

fn full(status: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r
}

async fn route(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let host = req
        .headers()
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    let ua = req
        .headers()
        .get("user-agent")
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    Ok(match req.uri().path() {
        "/ok" => full(200, "All Systems OK"),
        "/503" => full(503, "down for maintenance"),
        "/204" => full(204, ""),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            full(200, "too late")
        }
        "/redirect" => {
            let mut r = full(301, "");
            r.headers_mut()
                .insert("location", http::HeaderValue::from_static("/ok"));
            r
        }
        "/redirect-loop" => {
            let mut r = full(302, "");
            r.headers_mut()
                .insert("location", http::HeaderValue::from_static("/redirect-loop"));
            r
        }
        // The expected string beyond the first 10 KiB: must not match.
        "/needle-late" => full(200, format!("{}NEEDLE", "x".repeat(20 * 1024))),
        // Within the first 10 KiB, followed by much more.
        "/needle-early" => full(
            200,
            format!("{}NeEdLe{}", "x".repeat(9 * 1024), "y".repeat(64 * 1024)),
        ),
        // An endless body (~1 GiB): the probe must read only its head.
        "/endless" => {
            let chunk = Bytes::from(vec![b'z'; 64 * 1024]);
            let stream = futures::stream::iter(
                (0..16_384).map(move |_| Ok::<_, Infallible>(Frame::data(chunk.clone()))),
            );
            Response::new(StreamBody::new(stream).boxed())
        }
        "/host" if host == "good.example" => full(200, "right host"),
        "/host" => full(421, format!("wrong host {host}")),
        "/headers"
            if req.headers().get("x-probe").is_some_and(|v| v == "yes")
                && ua.contains("meshlb")
                && ua.contains("pool p") =>
        {
            full(200, "headers ok")
        }
        "/headers" => full(400, format!("missing headers, ua {ua}")),
        _ => full(404, "not found"),
    })
}

/// Serves the routes on 127.0.0.1, over TLS when a config is given. Runs until the test ends.
pub async fn spawn(tls: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tls.map(TlsAcceptor::from);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let service = service_fn(route);
                let builder = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    Some(a) => {
                        // A failed handshake (the probe rejected our certificate) just ends.
                        if let Ok(tls) = a.accept(stream).await {
                            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                        }
                    }
                }
            });
        }
    });
    addr
}
