//! `POST /-/reload`: re-read the config file, as SIGHUP does (Prometheus's own endpoint has
//! the same path). It changes what every frontend of this node serves, so it always needs
//! the bearer token: with none configured it is refused (`meshlb_node::guard::mutation_allowed`). The answer says whether the file
//! was taken, and if not, every error in it.

use http::StatusCode;
use hyper::body::Incoming;

use super::reply::{error, json, Reply};
use crate::shared::Shared;

pub(super) const PATH: &str = "/-/reload";

pub(super) async fn reload(
    shared: &Shared,
    tokens: &super::Tokens,
    req: &http::Request<Incoming>,
) -> Reply {
    if let Some(refused) = super::mutation_refused(tokens, req) {
        return refused;
    }
    if req.method() != http::Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "/-/reload takes POST");
    }
    match meshlb_node::reload::ask(&shared.reload_requests, "POST /-/reload").await {
        Ok(outcome) => json(outcome.status(), &outcome),
        Err(e) => error(e.status, e.reason),
    }
}
