//! The console's files, compiled in: `GET /ui/` is the page, `GET /ui/{file}` its modules and
//! style, `GET /` redirects to `/ui/`. Each answer is revalidated (`Cache-Control: no-cache`
//! with an `ETag` of its content, `304` to a matching `If-None-Match`), so a new binary's
//! files are used at once and an unchanged one costs a round trip and no body.
//!
//! Every answer of the admin listener carries [`hardening`]: no sniffing, no framing, no
//! referrer. The console's carry its Content-Security-Policy as well ([`CONSOLE_CSP`]): scripts
//! and styles from this origin only, none inline, requests to this origin only.

use std::sync::LazyLock;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use sha2::{Digest, Sha256};

/// The console's Content-Security-Policy.
pub const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The policy of every other answer of the admin listener (JSON, text): nothing loads.
const API_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// One file of the console.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// Declares the files of `aggregator/console/`, compiled in.
macro_rules! assets {
    ($($name:literal => $type:expr),+ $(,)?) => {
        &[$(Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../../console/", $name)),
        }),+]
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = assets![
    "index.html" => "text/html; charset=utf-8",
    "console.css" => "text/css; charset=utf-8",
    "app.js" => JS,
    "api.js" => JS,
    "dom.js" => JS,
    "overview.js" => JS,
    "grid.js" => JS,
    "pool.js" => JS,
    "events.js" => JS,
    "explain.js" => JS,
    "chart.js" => JS,
    "icon.svg" => "image/svg+xml",
];

/// Each asset's ETag: the first 16 bytes of its SHA-256, quoted.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body.as_bytes());
            format!("\"{}\"", meshlb_node::control::signing::hex(&digest[..16]))
        })
        .collect()
});

type Reply = Response<Full<Bytes>>;

/// The answer to `path` when it is the console's (`/`, `/ui`, `/ui/...`); `None` otherwise.
pub fn serve(path: &str, headers: &HeaderMap) -> Option<Reply> {
    let name = match path {
        "/" | "/ui" => return Some(redirect("/ui/")),
        // Browsers ask for it on their own; it is the console's icon.
        "/favicon.ico" => "icon.svg",
        "/ui/" => "index.html",
        _ => path.strip_prefix("/ui/")?,
    };
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        let mut r = Response::new(Full::new(Bytes::from_static(
            b"no such file of the console\n",
        )));
        *r.status_mut() = StatusCode::NOT_FOUND;
        return Some(r);
    };
    let (asset, etag) = (&ASSETS[i], &ETAGS[i]);
    let mut r = if holds(headers, etag) {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Full::new(Bytes::from_static(asset.body.as_bytes())));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        r
    };
    let h = r.headers_mut();
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(http::header::ETAG, v);
    }
    h.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONSOLE_CSP),
    );
    Some(r)
}

/// Whether the client's `If-None-Match` names `etag`: it holds that version.
pub fn holds(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(http::header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
}

fn redirect(to: &'static str) -> Reply {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::FOUND;
    r.headers_mut()
        .insert(http::header::LOCATION, HeaderValue::from_static(to));
    r
}

/// The headers every answer of the admin listener carries (a CSP of its own is kept).
pub fn hardening(headers: &mut HeaderMap) {
    for (name, value) in [
        (http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (http::header::X_FRAME_OPTIONS, "DENY"),
        (http::header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if !headers.contains_key(http::header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            http::header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(API_CSP),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, headers: &HeaderMap) -> Reply {
        serve(path, headers).unwrap_or_else(|| panic!("{path} is the console's"))
    }

    #[test]
    fn the_root_redirects_to_the_console() {
        let r = get("/", &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::FOUND);
        assert_eq!(r.headers()[http::header::LOCATION], "/ui/");
    }

    #[test]
    fn the_page_carries_its_policy_and_a_revalidated_etag() {
        let r = get("/ui/", &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        let h = r.headers();
        assert_eq!(h[http::header::CONTENT_SECURITY_POLICY], CONSOLE_CSP);
        assert_eq!(h[http::header::CACHE_CONTROL], "no-cache");
        let mut again = HeaderMap::new();
        again.insert(http::header::IF_NONE_MATCH, h[http::header::ETAG].clone());
        assert_eq!(get("/ui/", &again).status(), StatusCode::NOT_MODIFIED);
    }

    /// Whether `html` has an attribute such as `onclick=`.
    fn has_inline_handler(html: &str) -> bool {
        html.match_indices(" on").any(|(i, _)| {
            let rest = &html[i + 3..];
            let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
            !name.is_empty() && rest[name.len()..].starts_with('=')
        })
    }

    #[test]
    fn the_policy_allows_no_inline_script_or_foreign_origin() {
        assert!(!CONSOLE_CSP.contains("unsafe-inline"));
        assert!(!CONSOLE_CSP.contains("http"));
        for asset in ASSETS.iter() {
            if asset.name.ends_with(".html") {
                // Scripts are modules from this origin, never inline.
                assert!(!asset.body.contains("<script>"), "{}", asset.name);
                assert!(
                    !has_inline_handler(asset.body),
                    "no inline handler: {}",
                    asset.name
                );
            }
            assert!(
                !asset.body.contains("innerHTML"),
                "{} writes no markup",
                asset.name
            );
            assert!(
                !asset.body.contains("https://"),
                "{} loads nothing foreign",
                asset.name
            );
        }
    }

    #[test]
    fn an_unknown_file_is_404_and_other_paths_are_not_the_consoles() {
        assert_eq!(
            get("/ui/secret.toml", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
        assert!(serve("/status", &HeaderMap::new()).is_none());
    }

    #[test]
    fn every_answer_is_hardened_and_keeps_its_own_policy() {
        let mut h = HeaderMap::new();
        hardening(&mut h);
        assert_eq!(h[http::header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[http::header::CONTENT_SECURITY_POLICY], API_CSP);
        let mut page = get("/ui/", &HeaderMap::new());
        hardening(page.headers_mut());
        assert_eq!(
            page.headers()[http::header::CONTENT_SECURITY_POLICY],
            CONSOLE_CSP
        );
    }
}
