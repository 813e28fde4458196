//! meshlb's own routes: `GET /config` (this node's part, the generation in force, the
//! primary) and the whole document as TOML at `/config/document`.

use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use lb_core::config::document::Document;
use serde_json::{json, Value};

use super::Served;
use crate::api::call::Call;
use crate::api::envelope::{self, code, Reply};
use crate::api::write::{document_refusal, refusal};
use meshlb_node::control::ControlPlane;

/// `GET /config`.
pub async fn state(call: Call<'_>) -> Served {
    Ok(envelope::ok(
        StatusCode::OK,
        config_state(call.plane),
        call.generation,
    ))
}

/// `GET /config/document`: the document in force, its generation the ETag.
pub async fn document(call: Call<'_>) -> Served {
    let current = call.plane.document.load_full();
    Ok(text_reply(&current.text, current.generation))
}

/// `PUT /config/document`: the body is the next document.
pub async fn replace_document(mut call: Call<'_>) -> Served {
    let bytes = call.bytes().await?;
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| {
        refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            "the document is not UTF-8",
        )
    })?;
    let (_, written, _) = call
        .write(|doc| {
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
