//! Monitors, monitor groups, pools and load balancers: listed, created, read, replaced,
//! patched and deleted, in Cloudflare's shapes (`super::super::convert`).

use http::StatusCode;
use lb_core::config::document::{Document, Kind};
use serde_json::{json, Value};

use super::Served;
use crate::api::call::Call;
use crate::api::convert;
use crate::api::envelope::{self, code, Reply};
use crate::api::write::{document_refusal, refusal};
use meshlb_node::control::writes::{FieldError, Refusal};

/// `GET` a collection: the zone's load balancers, or the pools that use `?monitor=`.
pub async fn list(call: Call<'_>) -> Served {
    let kind = call.kind();
    let doc = call.document()?;
    let zones: Vec<String> = doc
        .list_top("zones")
        .into_iter()
        .filter_map(|t| {
            t.get("name")
                .and_then(toml::Value::as_str)
                .map(str::to_string)
        })
        .collect();
    let zone = call
        .params
        .zone
        .as_deref()
        .filter(|z| zones.iter().any(|n| n.eq_ignore_ascii_case(z)));
    let monitor = monitor_filter(kind, &call.query);
    let items = doc
        .list(kind)
        .into_iter()
        .filter(|t| {
            zone.is_none_or(|z| {
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
    let (page, per_page) = call.page()?;
    Ok(envelope::list(items, page, per_page, call.generation))
}

/// `POST` a collection: a new resource, its id made here unless the body names one.
pub async fn create(mut call: Call<'_>) -> Served {
    let kind = call.kind();
    let body = call.json().await?;
    let table = convert::body(&body).map_err(not_a_resource)?;
    let fresh = fresh_id();
    let (id, written, doc) = call
        .write(|doc| {
            let id = doc
                .create(kind, table.clone(), &fresh)
                .map_err(|e| document_refusal(&e))?;
            Ok((id.clone(), Some((kind, id))))
        })
        .await?;
    Ok(as_written(&doc, kind, &id, written.generation))
}

/// `PATCH .../pools`: `notification_email` set on every pool.
pub async fn patch_every_pool(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let email = bulk_notification_email(&body)?;
    let (_, written, doc) = call
        .write(|doc| {
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

/// `GET` one resource.
pub async fn get(call: Call<'_>) -> Served {
    let doc = call.document()?;
    let t = doc
        .get(call.kind(), call.id())
        .ok_or_else(|| call.not_found())?;
    Ok(envelope::ok(
        StatusCode::OK,
        convert::resource(t),
        call.generation,
    ))
}

/// `PUT` one resource: the body replaces it.
pub async fn replace(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let replacement = convert::body(&body).map_err(not_a_resource)?;
    change(&call, |_| Ok(replacement.clone())).await
}

/// `PATCH` one resource: the body's fields replace the resource's.
pub async fn patch(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    change(&call, |current| {
        convert::patch(current, &body).map_err(not_a_resource)
    })
    .await
}

/// The resource `{id}` written as `next` makes it from the one in force.
async fn change(
    call: &Call<'_>,
    next: impl Fn(&toml::Table) -> Result<toml::Table, Refusal>,
) -> Served {
    let (kind, id) = (call.kind(), call.id().to_string());
    let (_, written, doc) = call
        .write(|doc| {
            let current = doc.get(kind, &id).ok_or_else(|| call.not_found())?;
            let next = next(current)?;
            doc.replace(kind, &id, next)
                .map_err(|e| document_refusal(&e))?;
            Ok(((), Some((kind, id.clone()))))
        })
        .await?;
    Ok(as_written(&doc, kind, &id, written.generation))
}

/// `DELETE` one resource. The answer is the resource deleted, `id` included: Cloudflare
/// answers a monitor group's DELETE so, and `{ "id" }` for the others, which it contains.
pub async fn delete(call: Call<'_>) -> Served {
    let (kind, id) = (call.kind(), call.id().to_string());
    let (deleted, written, _) = call
        .write(|doc| {
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

/// The answer to a write of one resource: the resource as the new generation holds it.
fn as_written(doc: &Document, kind: Kind, id: &str, generation: u64) -> Reply {
    let result = doc
        .get(kind, id)
        .map(convert::resource)
        .unwrap_or(Value::Null);
    envelope::ok(StatusCode::OK, result, generation)
}

fn not_a_resource(errors: Vec<FieldError>) -> Refusal {
    Refusal {
        errors,
        ..refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            "the body is not a config resource",
        )
    }
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
