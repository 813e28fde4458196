//! The control-plane API on the admin listener (docs/api.md): Cloudflare's Load Balancing
//! resources — monitors, monitor groups, pools, load balancers — listed, read, created,
//! replaced, patched and deleted, in Cloudflare's paths, field names and envelope; the pool
//! health and events views; and meshlb's whole-document `/config/document`.
//!
//! Reads answer from the document in force on any aggregator. Writes are the config
//! primary's alone (`control`): each is checked as `meshlb check` checks a file, with every
//! error's field path, then handed to the primary's config task, which makes it the next
//! generation. Tokens: the admin token reads and writes; the read token (`--admin-read-token-file`)
//! only reads.

pub mod convert;
#[cfg(test)]
mod doc_tests;
pub mod envelope;
pub mod health;
pub mod path;
pub mod preview;
pub mod regions;
pub mod search;

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use lb_core::config::document::{Document, DocumentError, Kind};
use serde_json::{json, Value};

use crate::shared::Shared;
use envelope::{code, Reply};
use meshlb_node::control::writes::{self, FieldError, Refusal, Written};
use meshlb_node::control::ControlPlane;
use meshlb_node::guard;
pub use path::{is_api_path, route, Route};

/// The name validation errors of an API write give the document.
const DOCUMENT_NAME: &str = "the written config";

pub use meshlb_node::credentials::{Access, Tokens};

/// Limits of the API's request bodies.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// The largest body (`--config-max-bytes`, as the document).
    pub max_bytes: usize,
    /// The longest a body may take to arrive (`--admin-body-timeout-ms`).
    pub timeout: Duration,
}

fn refusal(status: StatusCode, code: u32, message: impl Into<String>) -> Refusal {
    Refusal::new(status, code, message)
}

fn document_refusal(e: &DocumentError) -> Refusal {
    let (status, c) = match e {
        DocumentError::NotFound { .. } => (StatusCode::NOT_FOUND, code::NOT_FOUND),
        DocumentError::Exists { .. } => (StatusCode::CONFLICT, code::EXISTS),
        _ => (StatusCode::BAD_REQUEST, code::INVALID),
    };
    refusal(status, c, e.to_string())
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

fn json_body(bytes: &[u8]) -> Result<Value, Refusal> {
    serde_json::from_slice(bytes).map_err(|e| {
        refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            format!("the body is not JSON: {e}"),
        )
    })
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

/// Why this aggregator takes no writes, naming the primary when one is live.
fn not_primary(plane: &ControlPlane) -> Refusal {
    match &**plane.primary.load() {
        Some(p) => refusal(
            StatusCode::MISDIRECTED_REQUEST,
            code::NOT_PRIMARY,
            format!(
                "this aggregator is not the config primary: write to {} ({}), which holds generation {}",
                p.node_id, p.announcement.url, p.announcement.generation
            ),
        ),
        None => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::NOT_PRIMARY,
            "this aggregator is not the config primary, and no live node of the mesh is (writes wait until the one started with --config-primary is back)",
        ),
    }
}

/// A document's validation errors, with paths within the written resource when they are in
/// it (`origins[0].weight`), else within the document (`load_balancers[2].default_pools[0]`).
fn field_errors(errors: &lb_core::ConfigErrors, within: Option<(Kind, usize)>) -> Vec<FieldError> {
    let prefix = within.map(|(k, i)| format!("{}[{i}]", k.key()));
    errors
        .0
        .iter()
        .map(|e| {
            let path = match &prefix {
                Some(p) if e.path == *p => String::new(),
                Some(p) => e
                    .path
                    .strip_prefix(p.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .map_or_else(|| e.path.clone(), str::to_string),
                None => e.path.clone(),
            };
            FieldError {
                path,
                reason: e.reason.clone(),
            }
        })
        .collect()
}

/// Checks a document's text as `meshlb check` checks a file.
pub fn check(shared: &Shared, text: &str, within: Option<(Kind, usize)>) -> Result<(), Refusal> {
    shared
        .setup
        .parser
        .parse(DOCUMENT_NAME, text, &shared.setup.regions)
        .map(|_| ())
        .map_err(|errors| Refusal {
            errors: field_errors(&errors, within),
            ..refusal(
                StatusCode::BAD_REQUEST,
                code::INVALID,
                "the config would not be valid: nothing was changed",
            )
        })
}

/// A write: `edit` applied to the document in force, checked, and handed to the primary's
/// config task; retried on a newer generation when the client named none (`If-Match`).
async fn write<T>(
    shared: &Shared,
    plane: &ControlPlane,
    why: String,
    based_on: Option<u64>,
    edit: impl Fn(&mut Document) -> Result<(T, Option<(Kind, String)>), Refusal>,
) -> Result<(T, Written, Document), Refusal> {
    if !plane.role.takes_writes() {
        return Err(not_primary(plane));
    }
    let Some(writes) = plane.writes.as_ref() else {
        return Err(refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            "the primary's config task is not running",
        ));
    };
    // An If-Match may carry another store-connected aggregator's ETag, written a moment ago
    // and not yet brought here by the watch: wait for it (a bounded while) rather than call
    // the client stale.
    if let Some(g) = based_on {
        plane.caught_up(g).await;
    }
    for _ in 0..3 {
        let current = plane.document.load_full();
        if let Some(g) = based_on.filter(|&g| g != current.generation) {
            return Err(Refusal::stale(g, current.generation));
        }
        let mut doc = Document::parse(&current.text).map_err(|e| document_refusal(&e))?;
        let (value, target) = edit(&mut doc)?;
        let text = doc.to_text();
        let within = target.and_then(|(k, id)| doc.position(k, &id).map(|i| (k, i)));
        check(shared, &text, within)?;
        match writes::submit(writes, why.clone(), current.generation, text).await {
            Err(r) if r.status == StatusCode::CONFLICT && based_on.is_none() => continue,
            Err(r) => return Err(r),
            Ok(written) => return Ok((value, written, doc)),
        }
    }
    Err(refusal(
        StatusCode::CONFLICT,
        code::CONFLICT,
        "the config kept changing under this write: try again",
    ))
}

fn fresh_id() -> String {
    let bytes: [u8; 16] = rand::random();
    meshlb_node::control::signing::hex(&bytes)
}

/// Whether the load balancer `name` is in `zone` (a `[[zones]]` name).
fn in_zone(name: &str, zone: &str) -> bool {
    let (n, z) = (
        name.trim_end_matches('.').to_ascii_lowercase(),
        zone.trim_end_matches('.').to_ascii_lowercase(),
    );
    n == z || n.ends_with(&format!(".{z}"))
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

/// Cloudflare's `resource_type` of a kind.
pub(crate) fn resource_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Monitor => "monitor",
        Kind::MonitorGroup => "monitor_group",
        Kind::Pool => "pool",
        Kind::LoadBalancer => "load_balancer",
    }
}

/// A reference in Cloudflare's shape (ids are names: `resource_name` is the id).
pub(crate) fn reference(r: &lb_core::config::references::Reference) -> Value {
    json!({
        "reference_type": r.direction.name(),
        "resource_id": r.id,
        "resource_name": r.id,
        "resource_type": resource_type(r.kind),
    })
}

/// `GET pools?monitor={id}`: only the pools that use that monitor (none for other kinds).
fn monitor_filter(kind: Kind, query: &str) -> Option<String> {
    if kind != Kind::Pool {
        return None;
    }
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "monitor")
        .map(|(_, v)| v.into_owned())
}

/// The body of a bulk `PATCH .../pools`: `notification_email` alone, a string (`""`
/// removes it from every pool) or null.
fn bulk_notification_email(body: &Value) -> Result<Option<String>, Refusal> {
    let invalid = |path: &str, reason: &str| Refusal {
        errors: vec![FieldError {
            path: path.to_string(),
            reason: reason.to_string(),
        }],
        ..refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            "a bulk PATCH of pools sets `notification_email` on every pool, and nothing else",
        )
    };
    let Value::Object(map) = body else {
        return Err(invalid("", "the body must be a JSON object"));
    };
    if let Some(other) = map.keys().find(|k| *k != "notification_email") {
        return Err(invalid(
            other,
            "a bulk PATCH of pools takes only notification_email",
        ));
    }
    match map.get("notification_email") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid("notification_email", "expected a string")),
    }
}

/// A path under the API that it does not serve (any method): Cloudflare's envelope, saying
/// what is served.
pub fn unknown_path(plane: &ControlPlane, path: &str) -> Reply {
    envelope::error(
        StatusCode::NOT_FOUND,
        code::NOT_FOUND,
        format!(
            "meshlb's API serves no {path}; it serves {} (docs/api.md)",
            path::served()
        ),
        plane.generation(),
    )
}

/// Serves an API request (`route` is its path's); `tokens` say who may do what.
pub async fn handle(
    shared: &Shared,
    tokens: &Tokens,
    route: Route,
    req: http::Request<Incoming>,
    limits: BodyLimits,
) -> Reply {
    let plane = &shared.control;
    let generation = plane.generation();
    match serve(shared, plane, tokens, route, req, limits).await {
        Ok(reply) => reply,
        Err(r) => envelope::refused(&r, plane.generation().max(generation)),
    }
}

async fn serve(
    shared: &Shared,
    plane: &ControlPlane,
    tokens: &Tokens,
    route: Route,
    req: http::Request<Incoming>,
    limits: BodyLimits,
) -> Result<Reply, Refusal> {
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let reading = method == Method::GET || method == Method::HEAD;
    match tokens.access(&parts.headers) {
        Access::None => {
            return Err(refusal(
                StatusCode::UNAUTHORIZED,
                code::AUTH,
                "missing or wrong bearer token",
            ))
        }
        Access::Read if !reading => {
            let reason = if tokens.write.is_none() {
                "writes need the admin token: start the aggregator with --admin-token-file (or MESHLB_ADMIN_TOKEN)"
            } else {
                "this token reads only: writes need the admin token"
            };
            return Err(refusal(StatusCode::FORBIDDEN, code::AUTH, reason));
        }
        _ => {}
    }
    if !reading && guard::cross_site(&parts.headers) {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            code::AUTH,
            "a browser's cross-site request (Origin, Sec-Fetch-Site or a form content type) cannot change state",
        ));
    }
    let based_on = if_match(&parts.headers)?;
    let query = parts.uri.query().unwrap_or("");
    let why = format!("{method} {}", parts.uri.path());
    let generation = plane.generation();
    let document =
        || Document::parse(&plane.document.load().text).map_err(|e| document_refusal(&e));
    let method_not_allowed = |allowed: &str| {
        refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            code::METHOD,
            format!("{} takes {allowed}", parts.uri.path()),
        )
    };
    match route {
        Route::Collection { kind, zone } => match method {
            Method::GET => {
                let doc = document()?;
                let zones: Vec<String> = doc
                    .list_top("zones")
                    .into_iter()
                    .filter_map(|t| {
                        t.get("name")
                            .and_then(toml::Value::as_str)
                            .map(str::to_string)
                    })
                    .collect();
                let zone = zone.filter(|z| zones.iter().any(|n| n.eq_ignore_ascii_case(z)));
                let monitor = monitor_filter(kind, query);
                let items = doc
                    .list(kind)
                    .into_iter()
                    .filter(|t| {
                        zone.as_deref().is_none_or(|z| {
                            t.get("name")
                                .and_then(toml::Value::as_str)
                                .is_some_and(|n| in_zone(n, z))
                        })
                    })
                    .filter(|t| {
                        monitor.as_deref().is_none_or(|m| {
                            lb_core::config::references::named(kind, t)
                                .iter()
                                .any(|(k, n)| *k == Kind::Monitor && n == m)
                        })
                    })
                    .map(convert::resource)
                    .collect();
                let (page, per_page) = page_args(query)?;
                Ok(envelope::list(items, page, per_page, generation))
            }
            Method::POST => {
                let body = json_body(&read_body(body, limits).await?)?;
                let table = convert::body(&body).map_err(|errors| Refusal {
                    errors,
                    ..refusal(
                        StatusCode::BAD_REQUEST,
                        code::INVALID,
                        "the body is not a config resource",
                    )
                })?;
                let fresh = fresh_id();
                let (id, written, doc) = write(shared, plane, why, based_on, |doc| {
                    let id = doc
                        .create(kind, table.clone(), &fresh)
                        .map_err(|e| document_refusal(&e))?;
                    Ok((id.clone(), Some((kind, id))))
                })
                .await?;
                let result = doc
                    .get(kind, &id)
                    .map(convert::resource)
                    .unwrap_or(Value::Null);
                Ok(envelope::ok(StatusCode::OK, result, written.generation))
            }
            Method::PATCH if kind == Kind::Pool => {
                let body = json_body(&read_body(body, limits).await?)?;
                let email = bulk_notification_email(&body)?;
                let (_, written, doc) = write(shared, plane, why, based_on, |doc| {
                    doc.set_in_every(
                        Kind::Pool,
                        "notification_email",
                        email.clone().map(toml::Value::String),
                    );
                    Ok(((), None))
                })
                .await?;
                let items = doc
                    .list(Kind::Pool)
                    .into_iter()
                    .map(convert::resource)
                    .collect();
                Ok(envelope::list(items, 1, usize::MAX, written.generation))
            }
            _ if kind == Kind::Pool => Err(method_not_allowed("GET, POST or PATCH")),
            _ => Err(method_not_allowed("GET or POST")),
        },
        Route::Item { kind, id } => match method {
            Method::GET => {
                let doc = document()?;
                let t = doc.get(kind, &id).ok_or_else(|| {
                    document_refusal(&DocumentError::NotFound {
                        kind,
                        id: id.clone(),
                    })
                })?;
                Ok(envelope::ok(
                    StatusCode::OK,
                    convert::resource(t),
                    generation,
                ))
            }
            Method::PUT | Method::PATCH => {
                let body = json_body(&read_body(body, limits).await?)?;
                let patching = method == Method::PATCH;
                let invalid = |errors| Refusal {
                    errors,
                    ..refusal(
                        StatusCode::BAD_REQUEST,
                        code::INVALID,
                        "the body is not a config resource",
                    )
                };
                let replacement = if patching {
                    None
                } else {
                    Some(convert::body(&body).map_err(invalid)?)
                };
                let (_, written, doc) = write(shared, plane, why, based_on, |doc| {
                    let next = match &replacement {
                        Some(t) => t.clone(),
                        None => {
                            let current = doc.get(kind, &id).ok_or_else(|| {
                                document_refusal(&DocumentError::NotFound {
                                    kind,
                                    id: id.clone(),
                                })
                            })?;
                            convert::patch(current, &body).map_err(invalid)?
                        }
                    };
                    doc.replace(kind, &id, next)
                        .map_err(|e| document_refusal(&e))?;
                    Ok(((), Some((kind, id.clone()))))
                })
                .await?;
                let result = doc
                    .get(kind, &id)
                    .map(convert::resource)
                    .unwrap_or(Value::Null);
                Ok(envelope::ok(StatusCode::OK, result, written.generation))
            }
            Method::DELETE => {
                // The answer is the resource deleted, `id` included: Cloudflare answers a
                // monitor group's DELETE so, and `{ "id" }` for the others, which it contains.
                let (deleted, written, _) = write(shared, plane, why, based_on, |doc| {
                    let deleted = doc.get(kind, &id).map(convert::resource);
                    doc.delete(kind, &id).map_err(|e| document_refusal(&e))?;
                    Ok((deleted, None))
                })
                .await?;
                Ok(envelope::ok(
                    StatusCode::OK,
                    deleted.unwrap_or_else(|| json!({ "id": id })),
                    written.generation,
                ))
            }
            _ => Err(method_not_allowed("GET, PUT, PATCH or DELETE")),
        },
        Route::PoolHealth { id } => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let result = health::pool_health(shared, &id).ok_or_else(|| {
                document_refusal(&DocumentError::NotFound {
                    kind: Kind::Pool,
                    id: id.clone(),
                })
            })?;
            Ok(envelope::ok(StatusCode::OK, result, generation))
        }
        Route::References { kind, id } => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let doc = document()?;
            if doc.get(kind, &id).is_none() {
                return Err(document_refusal(&DocumentError::NotFound { kind, id }));
            }
            let items = lb_core::config::references::references(&doc, kind, &id)
                .into_iter()
                .map(|r| reference(&r))
                .collect();
            Ok(envelope::ok(
                StatusCode::OK,
                Value::Array(items),
                generation,
            ))
        }
        Route::Preview { kind, id } => {
            if method != Method::POST {
                return Err(method_not_allowed("POST"));
            }
            let body = json_body(&read_body(body, limits).await?)?;
            let monitor = convert::body(&body).map_err(|errors| Refusal {
                errors,
                ..refusal(
                    StatusCode::BAD_REQUEST,
                    code::INVALID,
                    "the body is not a monitor",
                )
            })?;
            let result = preview::start(shared, kind, &id, monitor).await?;
            Ok(envelope::ok(StatusCode::OK, result, generation))
        }
        Route::PreviewResult { id } => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let (result, messages) = preview::result(shared, &id).await?;
            Ok(envelope::ok_with_messages(
                StatusCode::OK,
                result,
                &messages,
                generation,
            ))
        }
        Route::Search => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let args = search::Search::parse(query)
                .map_err(|m| refusal(StatusCode::BAD_REQUEST, code::INVALID, m))?;
            let found = search::search(&document()?, &args);
            let (page, per_page) = page_args(query)?;
            Ok(envelope::search(found, page, per_page, generation))
        }
        Route::Regions { region } => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let only = match region.as_deref().map(str::parse::<lb_core::Region>) {
                None => None,
                Some(Ok(r)) => Some(r),
                Some(Err(e)) => {
                    return Err(refusal(
                        StatusCode::NOT_FOUND,
                        code::NOT_FOUND,
                        e.to_string(),
                    ))
                }
            };
            let country = regions::country_arg(query);
            let result = regions::regions(&shared.setup.regions, only, country.as_deref());
            Ok(envelope::ok(StatusCode::OK, result, generation))
        }
        Route::Events => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            let items = health::events(shared, query)
                .map_err(|m| refusal(StatusCode::BAD_REQUEST, code::INVALID, m))?;
            Ok(envelope::list(items, 1, usize::MAX, generation))
        }
        Route::Config => {
            if method != Method::GET {
                return Err(method_not_allowed("GET"));
            }
            Ok(envelope::ok(
                StatusCode::OK,
                config_state(plane),
                generation,
            ))
        }
        Route::Document => match method {
            Method::GET => {
                let current = plane.document.load_full();
                Ok(text_reply(&current.text, current.generation))
            }
            Method::PUT => {
                let bytes = read_body(body, limits).await?;
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
                    refusal(
                        StatusCode::BAD_REQUEST,
                        code::INVALID,
                        "the document is not UTF-8",
                    )
                })?;
                let (_, written, _) = write(shared, plane, why, based_on, |doc| {
                    *doc = Document::parse(&text).map_err(|e| document_refusal(&e))?;
                    Ok(((), None))
                })
                .await?;
                Ok(envelope::ok(
                    StatusCode::OK,
                    json!({ "generation": written.generation, "changed": written.changed }),
                    written.generation,
                ))
            }
            _ => Err(method_not_allowed("GET or PUT")),
        },
    }
}

/// What `GET /config` shows: this node's part, the generation in force, the primary.
pub fn config_state(plane: &ControlPlane) -> Value {
    let document = plane.document.load();
    let primary = plane.primary.load();
    json!({
        "role": plane.role.name(),
        "generation": document.generation,
        "sha256": document.sha256,
        "size": document.text.len(),
        "primary": match &**primary {
            Some(p) => json!({
                "node_id": p.node_id,
                "url": p.announcement.url,
                "generation": p.announcement.generation,
                "primaries": p.count,
            }),
            None => Value::Null,
        },
        "refused": plane.refused(),
    })
}

fn text_reply(text: &str, generation: u64) -> Reply {
    let mut r = http::Response::new(Full::new(Bytes::from(text.to_string())));
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/toml"),
    );
    if let Ok(tag) = http::HeaderValue::from_str(&format!("\"{generation}\"")) {
        headers.insert(http::header::ETAG, tag);
    }
    r
}
