//! The `/metrics` listener of a prober (an aggregator serves `/metrics` on its admin API):
//! `GET /metrics` without a token, and `POST /-/reload` with the admin token.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::control::serve::HeldBody;
use crate::credentials::{AdminCredentials, Tokens};
use crate::guard;

/// The listener could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for /metrics: {source}")]
pub struct ListenError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// Where a prober's `POST /-/reload` goes (the reload task), and the control plane whose
/// document its `GET /-/config/document` relays to the mesh (`control/serve.rs`).
#[derive(Clone)]
pub struct ReloadEndpoint {
    pub requests: tokio::sync::mpsc::Sender<crate::reload::Request>,
    pub plane: Option<Arc<crate::control::ControlPlane>>,
}

fn answer(status: hyper::StatusCode, body: String, json: bool) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let kind = if json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    r
}

/// `POST /-/reload` on a prober, as on the aggregator's admin API (`aggregator/src/admin/reload.rs`).
async fn reload(
    endpoint: &ReloadEndpoint,
    tokens: &Tokens,
    req: &hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    use hyper::StatusCode;
    let error = |status: StatusCode, why: &str| {
        answer(
            status,
            serde_json::json!({ "error": why }).to_string(),
            true,
        )
    };
    if let Err(r) = guard::mutation_allowed(tokens, req.headers(), guard::Node::Prober) {
        return error(r.status, r.reason);
    }
    if req.method() != hyper::Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "/-/reload takes POST");
    }
    match crate::reload::ask(&endpoint.requests, "POST /-/reload").await {
        Ok(o) => answer(
            o.status(),
            serde_json::to_string(&o).unwrap_or_default(),
            true,
        ),
        Err(e) => error(e.status, e.reason),
    }
}

/// Serves `GET /metrics` on `addr` (no token), and `POST /-/reload` when `reloads` is given,
/// within `limits` (`guard.rs`), over TLS when `credentials` have it.
pub async fn serve(
    addr: SocketAddr,
    handle: PrometheusHandle,
    reloads: Option<ReloadEndpoint>,
    credentials: Arc<AdminCredentials>,
    limits: guard::Limits,
) -> Result<(), ListenError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError { addr, source })?;
    let mut backoff = guard::AcceptBackoff::new();
    let slots = limits.slots();
    loop {
        let (stream, _, slot) = guard::accept(&listener, &mut backoff, &slots).await;
        let handle = handle.clone();
        let reloads = reloads.clone();
        let credentials = Arc::clone(&credentials);
        tokio::spawn(async move {
            let _slot = slot;
            let tls = credentials.tls();
            let tokens = Arc::new(
                credentials
                    .tokens()
                    .on_connection(tls.is_some_and(|t| t.verifies_clients())),
            );
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let handle = handle.clone();
                let reloads = reloads.clone();
                let tokens = Arc::clone(&tokens);
                async move {
                    let path = req.uri().path();
                    if let (crate::control::serve::PATH, Some(plane)) =
                        (path, reloads.as_ref().and_then(|r| r.plane.as_ref()))
                    {
                        let query = req.uri().query().unwrap_or("");
                        let r = crate::control::serve::respond(plane, req.headers(), query);
                        return Ok::<_, Infallible>(r);
                    }
                    let response = match (path, &reloads) {
                        ("/metrics", _) => {
                            let mut r = answer(hyper::StatusCode::OK, handle.render(), false);
                            r.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                hyper::header::HeaderValue::from_static(
                                    "text/plain; version=0.0.4",
                                ),
                            );
                            r
                        }
                        ("/-/reload", Some(endpoint)) => reload(endpoint, &tokens, &req).await,
                        _ => answer(
                            hyper::StatusCode::NOT_FOUND,
                            "not found: /metrics, /-/reload\n".into(),
                            false,
                        ),
                    };
                    Ok::<_, Infallible>(response.map(HeldBody::plain))
                }
            });
            guard::serve_connection(stream, tls.map(|t| &**t), limits, service).await;
        });
    }
}
