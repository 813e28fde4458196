//! The control-plane API on the admin listener (docs/api.md): Cloudflare's Load Balancing
//! resources — monitors, monitor groups, pools, load balancers — listed, read, created,
//! replaced, patched and deleted, in Cloudflare's paths, field names and envelope; the pool
//! health and events views; and meshlb's whole-document `/config/document`.
//!
//! A request is routed by `routes::ROUTES` (one line per method and path) to its handler in
//! `handlers/`, after [`handle`] has settled who may ask. Reads answer from the document in
//! force on any aggregator. Writes are the config primary's alone (`write`): each is checked
//! as `meshlb check` checks a file, with every error's field path, then handed to the
//! primary's config task, which makes it the next generation. Tokens: the admin token reads
//! and writes; the read token (`--admin-read-token-file`) only reads.

pub mod call;
pub mod convert;
#[cfg(test)]
mod doc_tests;
pub mod envelope;
pub mod handlers;
pub mod health;
pub mod preview;
pub mod query;
pub mod regions;
pub mod routes;
pub mod search;
pub mod write;

use http::{Method, StatusCode};
use hyper::body::Incoming;

use crate::shared::Shared;
use envelope::{code, Reply};
use meshlb_node::control::writes::Refusal;
use meshlb_node::control::ControlPlane;
use meshlb_node::guard;

pub use call::BodyLimits;
pub use handlers::config::config_state;
pub use meshlb_node::credentials::{Access, Tokens};
pub use routes::{find, is_api_path, Matched};

/// A path under the API that it does not serve (any method): Cloudflare's envelope, saying
/// what is served.
pub fn unknown_path(plane: &ControlPlane, path: &str) -> Reply {
    envelope::error(
        StatusCode::NOT_FOUND,
        code::NOT_FOUND,
        format!(
            "meshlb's API serves no {path}; it serves {} (docs/api.md)",
            routes::served()
        ),
        plane.generation(),
    )
}

/// Serves an API request to a path the API serves (`matched`, from [`find`]); `tokens` say
/// who may do what.
pub async fn handle(
    shared: &Shared,
    tokens: &Tokens,
    matched: Matched,
    req: http::Request<Incoming>,
    limits: BodyLimits,
) -> Reply {
    let plane = &shared.control;
    let generation = plane.generation();
    match serve(shared, tokens, matched, req, limits).await {
        Ok(reply) => reply,
        Err(r) => envelope::refused(&r, plane.generation().max(generation)),
    }
}

async fn serve(
    shared: &Shared,
    tokens: &Tokens,
    matched: Matched,
    req: http::Request<Incoming>,
    limits: BodyLimits,
) -> Result<Reply, Refusal> {
    let (parts, body) = req.into_parts();
    let route = matched.for_method(&parts.method);
    allowed(tokens, &parts, route.is_some_and(reveals_secrets))?;
    let Some(route) = route else {
        return Err(Refusal::new(
            StatusCode::METHOD_NOT_ALLOWED,
            code::METHOD,
            format!("{} takes {}", parts.uri.path(), matched.allowed()),
        ));
    };
    let call = call::Call::new(shared, route.kind, matched.params, &parts, body, limits)?;
    (route.handler)(call).await
}

/// Reads whose answer holds secrets (tunnel secrets, in a tunnel's token and in the config
/// file): the admin token's alone, as writes are.
fn reveals_secrets(route: &routes::Route) -> bool {
    route.path == "/config/document" || route.path.ends_with("/cfd_tunnel/{id}/token")
}

/// Whether the request's token may do what it asks: any token reads (but what reveals
/// secrets), the admin token writes, and a browser's cross-site request changes nothing.
fn allowed(tokens: &Tokens, parts: &http::request::Parts, secret: bool) -> Result<(), Refusal> {
    let reading = (parts.method == Method::GET || parts.method == Method::HEAD) && !secret;
    match tokens.access(&parts.headers) {
        Access::None => {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                code::AUTH,
                "missing or wrong bearer token",
            ))
        }
        Access::Read if !reading => {
            let reason = if tokens.write.is_none() {
                "writes need the admin token: start the aggregator with --admin-token-file (or MESHLB_ADMIN_TOKEN)"
            } else {
                "this token reads only: writes, the config file and tunnel tokens need the admin token"
            };
            return Err(Refusal::new(StatusCode::FORBIDDEN, code::AUTH, reason));
        }
        _ => {}
    }
    if !reading && guard::cross_site(&parts.headers) {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            code::AUTH,
            "a browser's cross-site request (Origin, Sec-Fetch-Site or a form content type) cannot change state",
        ));
    }
    Ok(())
}
