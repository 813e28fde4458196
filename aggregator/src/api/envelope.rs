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

fn reply(status: StatusCode, body: &Value, generation: u64) -> Reply {
    let body = serde_json::to_vec_pretty(body).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    if let Ok(tag) = http::HeaderValue::from_str(&format!("\"{generation}\"")) {
        r.headers_mut().insert(http::header::ETAG, tag);
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

/// A list, with Cloudflare's `result_info`.
pub fn list(items: Vec<Value>, page: usize, per_page: usize, generation: u64) -> Reply {
    let total = items.len();
    let per_page = per_page.max(1);
    let shown: Vec<Value> = items
        .into_iter()
        .skip((page.max(1) - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    let info = json!({
        "page": page.max(1),
        "per_page": per_page,
        "count": shown.len(),
        "total_count": total,
        "total_pages": total.div_ceil(per_page).max(1),
    });
    reply(
        StatusCode::OK,
        &json!({ "success": true, "errors": [], "messages": [], "result": shown, "result_info": info }),
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
