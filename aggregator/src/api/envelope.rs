//! Cloudflare's response envelope: `success`, `errors` (each with `code`, `message` and, for a
//! field, `source.pointer`), `messages`, `result`, and `result_info` for lists. Every answer
//! carries the generation in force as its `ETag`, for a later write's `If-Match`.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{json, Value};

use meshlb_node::control::writes::{FieldError, Refusal};

pub type Reply = Response<Full<Bytes>>;

pub use meshlb_node::control::writes::code;

/// How long a client waits before it tries again a write that found no primary (`Retry-After`).
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// Whether a client should try again what answered `status` (Cloudflare's SDKs read
/// `x-should-retry`, and without it retry 408, 409, 429 and 5xx twice): a request that was
/// malformed, unauthorised, forbidden, aimed at nothing, a conflict of generations or a
/// document that does not validate will fail the same way again.
fn retry_can_help(status: StatusCode) -> bool {
    !matches!(
        status,
        StatusCode::BAD_REQUEST
            | StatusCode::UNAUTHORIZED
            | StatusCode::FORBIDDEN
            | StatusCode::NOT_FOUND
            | StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::CONFLICT
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::UNPROCESSABLE_ENTITY
    )
}

fn reply(status: StatusCode, body: &Value, generation: u64) -> Reply {
    let body = serde_json::to_vec_pretty(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Ok(tag) = http::HeaderValue::from_str(&format!("\"{generation}\"")) {
        headers.insert(http::header::ETAG, tag);
    }
    if !retry_can_help(status) {
        headers.insert("x-should-retry", http::HeaderValue::from_static("false"));
    }
    if status == StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(http::header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
    }
    r
}

/// A successful answer holding `result`.
pub fn ok(status: StatusCode, result: Value, generation: u64) -> Reply {
    reply(
        status,
        &json!({ "success": true, "errors": [], "messages": [], "result": result }),
        generation,
    )
}

/// A successful answer holding `result`, with `messages` (Cloudflare's `{code, message}`
/// items, code 1000) beside it.
pub fn ok_with_messages(
    status: StatusCode,
    result: Value,
    messages: &[String],
    generation: u64,
) -> Reply {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| json!({ "code": code::UNAVAILABLE, "message": m }))
        .collect();
    reply(
        status,
        &json!({ "success": true, "errors": [], "messages": messages, "result": result }),
        generation,
    )
}

/// Page `page` of `items` (`per_page` each) and Cloudflare's `result_info` for it.
fn paged(items: Vec<Value>, page: usize, per_page: usize) -> (Vec<Value>, Value) {
    let total = items.len();
    let per_page = per_page.max(1);
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page.max(1) - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    // Without `per_page` every item is on one page, whose size is the count.
    let per_page_shown = if per_page == usize::MAX {
        total.max(1)
    } else {
        per_page
    };
    let info = json!({
        "page": page.max(1),
        "per_page": per_page_shown,
        "count": shown.len(),
        "total_count": total,
        "total_pages": total.div_ceil(per_page).max(1),
    });
    (shown, info)
}

/// A list, with Cloudflare's `result_info`.
pub fn list(items: Vec<Value>, page: usize, per_page: usize, generation: u64) -> Reply {
    let (shown, info) = paged(items, page, per_page);
    reply(
        StatusCode::OK,
        &json!({ "success": true, "errors": [], "messages": [], "result": shown, "result_info": info }),
        generation,
    )
}

/// Search results: Cloudflare's documented `result.resources`, and the same page as the one
/// item of `result.items`, which is where the SDKs' paginated search reads it (an empty page
/// has no item, which ends their pagination).
pub fn search(found: Vec<Value>, page: usize, per_page: usize, generation: u64) -> Reply {
    let (shown, info) = paged(found, page, per_page);
    let items = if shown.is_empty() {
        json!([])
    } else {
        json!([{ "resources": shown }])
    };
    reply(
        StatusCode::OK,
        &json!({ "success": true, "errors": [], "messages": [],
                 "result": { "resources": shown, "items": items }, "result_info": info }),
        generation,
    )
}

/// `a[1].b` as a JSON pointer, `/a/1/b`.
pub fn pointer(path: &str) -> String {
    let mut out = String::new();
    for part in path.split('.') {
        let (name, indices) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push('/');
            out.push_str(&name.replace('~', "~0").replace('/', "~1"));
        }
        for index in indices.split('[') {
            let index = index.trim_end_matches(']');
            if !index.is_empty() {
                out.push('/');
                out.push_str(index);
            }
        }
    }
    out
}

fn field_error(code: u32, e: &FieldError) -> Value {
    let message = if e.path.is_empty() {
        e.reason.clone()
    } else {
        format!("{}: {}", e.path, e.reason)
    };
    json!({ "code": code, "message": message, "source": { "pointer": pointer(&e.path) } })
}

/// A refusal: one error, or one per field.
pub fn refused(r: &Refusal, generation: u64) -> Reply {
    let errors: Vec<Value> = if r.errors.is_empty() {
        vec![json!({ "code": r.code, "message": r.message })]
    } else {
        r.errors.iter().map(|e| field_error(r.code, e)).collect()
    };
    let messages: Vec<Value> = if r.errors.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "code": r.code, "message": r.message })]
    };
    reply(
        r.status,
        &json!({ "success": false, "errors": errors, "messages": messages, "result": null }),
        generation,
    )
}

/// A refusal from a status, a code and a message.
pub fn error(status: StatusCode, code: u32, message: impl Into<String>, generation: u64) -> Reply {
    refused(&Refusal::new(status, code, message), generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(r: &Reply, name: &str) -> Option<String> {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    #[test]
    fn a_conflict_and_a_missing_resource_say_a_retry_cannot_help() {
        for status in [
            StatusCode::CONFLICT,
            StatusCode::NOT_FOUND,
            StatusCode::UNPROCESSABLE_ENTITY,
        ] {
            let r = error(status, code::CONFLICT, "no", 3);
            assert_eq!(
                header(&r, "x-should-retry").as_deref(),
                Some("false"),
                "{status}"
            );
        }
    }

    #[test]
    fn an_answer_a_retry_can_help_carries_no_such_header() {
        let r = ok(StatusCode::OK, json!({}), 3);
        assert_eq!(header(&r, "x-should-retry"), None);
        let r = error(StatusCode::GATEWAY_TIMEOUT, code::UNAVAILABLE, "later", 3);
        assert_eq!(header(&r, "x-should-retry"), None);
    }

    #[test]
    fn an_unavailable_primary_says_when_to_try_again() {
        let r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            code::NOT_PRIMARY,
            "no primary",
            3,
        );
        assert_eq!(header(&r, "retry-after").as_deref(), Some("5"));
        assert_eq!(header(&r, "x-should-retry"), None);
    }

    #[test]
    fn field_paths_become_json_pointers() {
        assert_eq!(
            pointer("origins[0].virtual_network_id"),
            "/origins/0/virtual_network_id"
        );
        assert_eq!(pointer("pools[2].origins[10]"), "/pools/2/origins/10");
        assert_eq!(pointer("header.a/b"), "/header/a~1b");
        assert_eq!(pointer(""), "");
    }
}
