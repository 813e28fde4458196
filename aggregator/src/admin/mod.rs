//! The admin API (docs/design.md#the-admin-api), JSON over HTTP with an optional bearer token,
//! one file per resource:
//!
//! - `GET /status`: every load balancer, pool and endpoint with its state and the votes behind
//!   it (per region, per datacenter: healthy, RTT, code, reason — the shape of Cloudflare's
//!   pool health `pop_health`), EWMA RTTs, whether the aggregator is static.
//! - `GET /events?since=&until=&pool=&endpoint=`: health changes (unix ms bounds).
//! - `GET /members`: mesh members, their tags and liveness, config drift.
//! - `GET /explain?lb=NAME[&pop=REGION][&client=IP][&mode=dns|proxy]`: why a request from
//!   there goes where it goes, on the current snapshot (one steering decision, explained).
//! - `GET /metrics`: Prometheus text format, no token needed.
//! - `GET /healthz`: liveness of the aggregator itself, no token needed.
//! - `GET /readyz`: 200 once its answers can be trusted (every monitored endpoint has a
//!   verdict, or the warm-up timeout has passed), 503 before; no token needed.
//! - `POST /-/reload`: re-read the config file (as SIGHUP does); always needs the token.
//!
//! - The control-plane API (`crate::api`, docs/api.md): Cloudflare's monitors, monitor
//!   groups, pools and load balancers, their health and events, `/config`; and
//!   `GET /-/config/document`, the primary's document for the mesh (cluster-key signed).
//!
//! State-changing calls (`POST`/`DELETE /drain`, `POST /-/reload`, the API's writes) always
//! need the admin token and are refused from a browser's cross-site request; the read token
//! (`--admin-read-token-file`) reads only; request heads and bodies have deadlines; see
//! `guard.rs`.

mod drain;
mod events;
mod explain;

mod reload;
mod reply;
mod status;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use lb_tls::ReloadableServer;
use meshlb_node::control::serve;
use meshlb_node::credentials::AdminCredentials;
use meshlb_node::guard;
use tokio::net::TcpListener;

pub use crate::api::{Access, BodyLimits, Tokens};
use crate::shared::Shared;
use reply::{error, json, Reply};

/// Where a holder serves its document to the mesh (`meshlb_node::control::serve`).
pub const MESH_DOCUMENT: &str = serve::PATH;

/// The refusal of a state-changing call, when it is refused (`guard::mutation_allowed`).
fn mutation_refused(tokens: &Tokens, req: &Request<Incoming>) -> Option<Reply> {
    guard::mutation_allowed(tokens, req.headers(), guard::Node::Aggregator)
        .err()
        .map(|r| error(r.status, r.reason))
}

fn route(shared: &Shared, tokens: &Tokens, req: &Request<Incoming>) -> Reply {
    let path = req.uri().path();
    if path == "/healthz" {
        return json(StatusCode::OK, &serde_json::json!({ "ok": true }));
    }
    // For whatever routes clients here (a readiness probe, an anycast announcer): no secrets.
    if path == "/readyz" {
        let readiness = shared.readiness();
        let status = if readiness.ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return json(status, &readiness);
    }
    // Metrics carry states and counts, no secrets: scraped without the token.
    if path == "/metrics" {
        let text = shared
            .outputs
            .metrics
            .as_ref()
            .map_or_else(String::new, |h| h.render());
        let mut r = Response::new(Full::new(Bytes::from(text)));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; version=0.0.4"),
        );
        return r;
    }
    if tokens.access(req.headers()) == Access::None {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    if path == "/drain" {
        if req.method() != http::Method::GET {
            if let Some(refused) = mutation_refused(tokens, req) {
                return refused;
            }
        }
        return drain::drain(shared, req.method(), req.uri().query().unwrap_or(""));
    }
    if req.method() != http::Method::GET {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the admin API is read-only apart from /drain: use GET",
        );
    }
    if let Some(v) = crate::console::views::view(shared, path, req.uri().query().unwrap_or("")) {
        return console_view(v, req.headers());
    }
    match path {
        "/status" => json(StatusCode::OK, &status::status(shared)),
        "/members" => json(StatusCode::OK, &**shared.latest.members.load()),
        "/events" => events::events(shared, req.uri().query().unwrap_or("")),
        "/explain" => explain::explain(shared, req.uri().query().unwrap_or("")),
        _ => error(
            StatusCode::NOT_FOUND,
            "no such endpoint: /status, /events, /members, /explain, /healthz, /readyz, /-/reload, the console (/ui/, /console/...), and the API's (docs/api.md)",
        ),
    }
}

/// A console view as JSON; `304` when the client holds its version (`If-None-Match`).
fn console_view(v: crate::console::views::View, headers: &http::HeaderMap) -> Reply {
    let mut r = match &v.etag {
        Some(etag) if crate::console::assets::holds(headers, etag) => {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        }
        _ => json(v.status, &v.body),
    };
    if let Some(tag) = v.etag.and_then(|e| http::HeaderValue::from_str(&e).ok()) {
        r.headers_mut().insert(http::header::ETAG, tag);
    }
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    r
}

/// Serves the admin API on `listener` until the task is dropped, within `limits`, over `tls`
/// when given; `body` bounds the API's request bodies. The tokens in force are read from
/// `credentials` as each connection opens.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    credentials: Arc<AdminCredentials>,
    tls: Option<Arc<ReloadableServer>>,
    limits: guard::Limits,
    body: BodyLimits,
) {
    let mut backoff = guard::AcceptBackoff::new();
    let slots = limits.slots();
    let certified = tls.as_ref().is_some_and(|t| t.verifies_clients());
    loop {
        let (stream, _, slot) = guard::accept(&listener, &mut backoff, &slots).await;
        let shared = Arc::clone(&shared);
        let tokens = Arc::new(credentials.tokens().on_connection(certified));
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |req: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                let tokens = Arc::clone(&tokens);
                async move {
                    let path = req.uri().path();
                    if path == MESH_DOCUMENT {
                        let query = req.uri().query().unwrap_or("");
                        let mut r = serve::respond(&shared.control, req.headers(), query);
                        crate::console::assets::hardening(r.headers_mut());
                        return Ok::<_, Infallible>(r);
                    }
                    let mut response =
                        if let Some(page) = crate::console::assets::serve(path, req.headers()) {
                            page
                        } else if path == reload::PATH {
                            reload::reload(&shared, &tokens, &req).await
                        } else if let Some(m) = crate::api::find(path) {
                            crate::api::handle(&shared, &tokens, m, req, body).await
                        } else if crate::api::is_api_path(path) {
                            crate::api::unknown_path(&shared.control, path)
                        } else {
                            route(&shared, &tokens, &req)
                        };
                    crate::console::assets::hardening(response.headers_mut());
                    Ok::<_, Infallible>(response.map(serve::HeldBody::plain))
                }
            });
            guard::serve_connection(stream, tls.as_deref(), limits, service).await;
        });
    }
}

/// The admin listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for the admin API: {error}")]
pub struct BindError {
    pub addr: SocketAddr,
    error: std::io::Error,
}

/// Binds the admin listener (an error names the address).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| BindError { addr, error })
}
