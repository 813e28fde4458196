//! The answers the proxy makes itself: plain text (its 4xx and Cloudflare's 52x codes) and a
//! rule's fixed response.

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use lb_core::config::FixedResponse;

use crate::body::ProxyBody;

pub(super) fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::bytes(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Cloudflare's 52x codes (valid numbers, so this cannot fail).
pub(super) fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
}

pub(super) fn fixed(f: &FixedResponse) -> Response<ProxyBody> {
    let status = StatusCode::from_u16(f.status_code).unwrap_or(StatusCode::OK);
    let mut r = text(status, f.message_body.clone());
    if let Ok(v) = HeaderValue::from_str(&f.content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    if let Some(l) = f
        .location
        .as_deref()
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        r.headers_mut().insert(header::LOCATION, l);
    }
    r
}
