//! Prometheus metrics for meshlb processes: the recorder, and a tiny `/metrics` server for
//! probers (aggregators serve it on their admin API).

use std::convert::Infallible;
use std::net::SocketAddr;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Installs the global recorder with node labels; `None` if one is already installed.
pub fn install(labels: &[(&str, &str)]) -> Option<PrometheusHandle> {
    let mut builder = PrometheusBuilder::new();
    for (k, v) in labels {
        builder = builder.add_global_label(*k, *v);
    }
    builder.install_recorder().ok()
}

/// Serves `GET /metrics` (anything else: 404) until the task is dropped.
pub async fn serve(addr: SocketAddr, handle: PrometheusHandle) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for /metrics"))?;
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let response = if req.uri().path() == "/metrics" {
                    let mut r = hyper::Response::new(Full::new(Bytes::from(handle.render())));
                    r.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
                    );
                    r
                } else {
                    let mut r = hyper::Response::new(Full::new(Bytes::from_static(
                        b"not found: /metrics\n",
                    )));
                    *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                    r
                };
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
