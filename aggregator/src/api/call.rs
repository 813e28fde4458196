//! One API request as its handler sees it: who is asking is settled (`super::handle`), the
//! route is found; what is left is the path's params, the query, the body and the config.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use lb_core::config::document::{Document, DocumentError, Kind};
use serde_json::Value;

use super::envelope::code;
use super::routes::Params;
use super::write::{document_refusal, refusal};
use crate::shared::Shared;
use meshlb_node::control::writes::{Refusal, Written};
use meshlb_node::control::ControlPlane;

/// Limits of the API's request bodies.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// The largest body (`--config-max-bytes`, as the document).
    pub max_bytes: usize,
    /// The longest a body may take to arrive (`--admin-body-timeout-ms`).
    pub timeout: Duration,
}

/// A request, routed.
pub struct Call<'a> {
    pub shared: &'a Shared,
    pub plane: &'a ControlPlane,
    /// The route's kind of resource (`routes::Route::kind`).
    pub kind: Option<Kind>,
    pub params: Params,
    pub query: String,
    /// What a write is logged with: `PUT /accounts/.../pools/eu`.
    pub why: String,
    /// The generation a write is based on (`If-Match`), when the client named one.
    pub based_on: Option<u64>,
    /// The generation in force when the request arrived.
    pub generation: u64,
    body: Option<Incoming>,
    limits: BodyLimits,
}

impl<'a> Call<'a> {
    pub(super) fn new(
        shared: &'a Shared,
        kind: Option<Kind>,
        params: Params,
        parts: &http::request::Parts,
        body: Incoming,
        limits: BodyLimits,
    ) -> Result<Call<'a>, Refusal> {
        let plane = &shared.control;
        Ok(Call {
            shared,
            plane,
            kind,
            params,
            query: parts.uri.query().unwrap_or("").to_string(),
            why: format!("{} {}", parts.method, parts.uri.path()),
            based_on: if_match(&parts.headers)?,
            generation: plane.generation(),
            body: Some(body),
            limits,
        })
    }

    /// The route's kind. Every route whose handler asks has one; the routes without are
    /// pinned by a test in `aggregator/src/api/routes.rs`.
    pub fn kind(&self) -> Kind {
        self.kind.unwrap_or(Kind::Pool)
    }

    /// The `{id}` of the path (empty for a route without one).
    pub fn id(&self) -> &str {
        self.params.id.as_deref().unwrap_or("")
    }

    /// The document in force.
    pub fn document(&self) -> Result<Document, Refusal> {
        Document::parse(&self.plane.document.load().text).map_err(|e| document_refusal(&e))
    }

    /// The 404 of the path's resource: no `{id}` of the route's kind.
    pub fn not_found(&self) -> Refusal {
        document_refusal(&DocumentError::NotFound {
            kind: self.kind(),
            id: self.id().to_string(),
        })
    }

    /// The body, within `--config-max-bytes` and `--admin-body-timeout-ms`.
    pub async fn bytes(&mut self) -> Result<Bytes, Refusal> {
        let Some(body) = self.body.take() else {
            return Ok(Bytes::new());
        };
        read_body(body, self.limits).await
    }

    /// The body as JSON.
    pub async fn json(&mut self) -> Result<Value, Refusal> {
        let bytes = self.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            refusal(
                StatusCode::BAD_REQUEST,
                code::INVALID,
                format!("the body is not JSON: {e}"),
            )
        })
    }

    /// `page` and `per_page` of the query.
    pub fn page(&self) -> Result<(usize, usize), Refusal> {
        page_args(&self.query)
    }

    /// `edit` applied to the document in force, checked, and made the next generation
    /// (`super::write::write`).
    pub async fn write<T>(
        &self,
        edit: impl Fn(&mut Document) -> Result<(T, Option<(Kind, String)>), Refusal>,
    ) -> Result<(T, Written, Document), Refusal> {
        super::write::write(
            self.shared,
            self.plane,
            self.why.clone(),
            self.based_on,
            edit,
        )
        .await
    }
}

async fn read_body(body: Incoming, limits: BodyLimits) -> Result<Bytes, Refusal> {
    let collect = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.timeout, collect).await {
        Err(_) => Err(refusal(
            StatusCode::REQUEST_TIMEOUT,
            code::INVALID,
            format!(
                "the body did not arrive within {} ms",
                limits.timeout.as_millis()
            ),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            code::TOO_LARGE,
            format!(
                "the body is larger than {} bytes (--config-max-bytes)",
                limits.max_bytes
            ),
        )),
        Ok(Err(e)) => Err(refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            format!("reading the body: {e}"),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// `If-Match`: a generation (`"7"`, `W/"7"` or `7`); `*` is any.
fn if_match(headers: &HeaderMap) -> Result<Option<u64>, Refusal> {
    let Some(v) = headers.get(http::header::IF_MATCH) else {
        return Ok(None);
    };
    let v = v.to_str().unwrap_or("").trim();
    if v == "*" {
        return Ok(None);
    }
    v.trim_start_matches("W/")
        .trim_matches('"')
        .parse()
        .map(Some)
        .map_err(|_| {
            refusal(
                StatusCode::BAD_REQUEST,
                code::INVALID,
                format!("If-Match: expected a generation (an ETag of this API), got `{v}`"),
            )
        })
}

fn page_args(query: &str) -> Result<(usize, usize), Refusal> {
    let (mut page, mut per_page) = (1, usize::MAX);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let n = || {
            v.parse::<usize>().map_err(|_| {
                refusal(
                    StatusCode::BAD_REQUEST,
                    code::INVALID,
                    format!("{k}: expected a number, got `{v}`"),
                )
            })
        };
        match &*k {
            "page" => page = n()?.max(1),
            "per_page" => per_page = n()?.max(1),
            _ => {}
        }
    }
    Ok((page, per_page))
}
