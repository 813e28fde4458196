//! Serving the document to the mesh (`GET /-/config/document`), on every node that holds a
//! generation — the primary or a store-connected aggregator, and any follower with a listener,
//! as a relay — so that followers spread their fetches over the holders instead of all taking
//! it from one machine:
//!
//! - a fetch is signed with the cluster key (`signing.rs`), as before;
//! - at most `--config-serve-max` fetches are served at once (each holds a slot until its body
//!   is handed to the connection, `HeldBody`); beyond, 503 with `Retry-After: 1`, and the
//!   follower tries another holder; a follower that stops reading is cut by the listener's
//!   send timeout (`guard.rs`), which frees its slot;
//! - the document travels compressed with zstd when the follower accepts it, compressed once
//!   per generation; a follower one generation behind (`?from=GENERATION&base=SHA256`, the
//!   document it runs) gets a delta: the document compressed with the one before as zstd's
//!   dictionary, a few hundred bytes for a small change;
//! - the answer carries the writer's signature (`writer_key.rs`) and the cluster-key HMAC of
//!   generation and hash, so a relay can pass a document on but never alter it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use tokio::sync::OwnedSemaphorePermit;

use super::signing::{
    GENERATION_HEADER, NODE_HEADER, SHA256_HEADER, SIGNATURE_HEADER, TIME_HEADER,
};
use super::{ControlPlane, Versioned};

/// Where a holder serves the document.
pub const PATH: &str = "/-/config/document";
/// The writer's Ed25519 signature of the document (base64).
pub const WRITER_SIGNATURE_HEADER: &str = "x-meshlb-writer-signature";
/// Present on a delta: the generation it applies to.
pub const DELTA_FROM_HEADER: &str = "x-meshlb-delta-from";
/// The document's size before compression (what the writer's signature covers).
pub const SIZE_HEADER: &str = "x-meshlb-size";
/// zstd's level: fast to make, a tenth or less of a config's size.
const LEVEL: i32 = 3;

/// The compressed forms of the document in force, made on first demand.
#[derive(Default)]
pub struct Packed {
    /// (generation, the document compressed).
    full: Option<(u64, Bytes)>,
    /// (from, to, the document compressed with generation `from` as the dictionary).
    delta: Option<(u64, u64, Bytes)>,
}

/// The frames a served document is handed to the connection in. hyper takes a body's frame
/// into its write queue whole and drops the body once the last frame is taken, so a document
/// sent as one frame would free its slot before a byte of it reached the follower; in frames,
/// the slot is held until all but hyper's write buffer (about 400 KB) has gone to the socket.
const FRAME: usize = 64 * 1024;

/// A body that holds a serving slot until its last frame is handed to the connection (or it is
/// dropped, as when `--admin-send-timeout-ms` cuts a follower that stopped reading).
pub struct HeldBody {
    kind: Kind,
}

enum Kind {
    /// Every other answer of a listener.
    Plain(Full<Bytes>),
    /// A served document: what is left to hand over, and the slot it holds meanwhile.
    Held {
        rest: Bytes,
        slot: Option<OwnedSemaphorePermit>,
    },
}

impl HeldBody {
    /// A body holding no slot (every other answer of a listener).
    pub fn plain(inner: Full<Bytes>) -> HeldBody {
        HeldBody {
            kind: Kind::Plain(inner),
        }
    }

    fn held(body: Bytes, slot: OwnedSemaphorePermit) -> HeldBody {
        HeldBody {
            kind: Kind::Held {
                rest: body,
                slot: Some(slot),
            },
        }
    }
}

impl hyper::body::Body for HeldBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().kind {
            Kind::Plain(inner) => Pin::new(inner).poll_frame(cx),
            Kind::Held { rest, slot } => {
                if rest.is_empty() {
                    slot.take();
                    return Poll::Ready(None);
                }
                let frame = rest.split_to(rest.len().min(FRAME));
                Poll::Ready(Some(Ok(hyper::body::Frame::data(frame))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Plain(inner) => inner.is_end_stream(),
            Kind::Held { rest, .. } => rest.is_empty(),
        }
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        match &self.kind {
            Kind::Plain(inner) => inner.size_hint(),
            Kind::Held { rest, .. } => hyper::body::SizeHint::with_exact(rest.len() as u64),
        }
    }
}

/// The document's text as a body's bytes, without a copy per fetch.
struct Text(std::sync::Arc<str>);

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

fn answer(status: StatusCode, text: &str) -> Response<HeldBody> {
    let mut r = Response::new(HeldBody::plain(Full::new(Bytes::from(format!(
        "{{\"error\": \"{text}\"}}\n"
    )))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn served(kind: &'static str) {
    metrics::counter!("meshlb_config_fetches_served_total", "sent" => kind).increment(1);
}

/// Whether the follower takes zstd (`Accept-Encoding`).
fn takes_zstd(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.trim().split(';').next() == Some("zstd"))
}

/// `?from=N&base=SHA256` of the query: the generation and hash of the document the follower
/// runs, which a delta must be made against.
fn delta_from(query: &str) -> Option<(u64, &str)> {
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
    };
    Some((param("from")?.parse().ok()?, param("base")?))
}

impl ControlPlane {
    /// The document compressed (made once per generation).
    fn packed_full(&self, doc: &Versioned) -> Option<Bytes> {
        let mut packed = self.packed.lock().ok()?;
        if let Some((g, bytes)) = &packed.full {
            if *g == doc.generation {
                return Some(bytes.clone());
            }
        }
        let bytes = Bytes::from(zstd::bulk::compress(doc.text.as_bytes(), LEVEL).ok()?);
        packed.full = Some((doc.generation, bytes.clone()));
        Some(bytes)
    }

    /// The document compressed against generation `from` of hash `base`, when that is the one
    /// before.
    fn packed_delta(&self, doc: &Versioned, from: u64, base: &str) -> Option<Bytes> {
        let previous = self.previous.load_full();
        let before = (*previous)
            .as_ref()
            .filter(|p| p.generation == from && p.sha256.eq_ignore_ascii_case(base))?;
        let mut packed = self.packed.lock().ok()?;
        if let Some((f, t, bytes)) = &packed.delta {
            if (*f, *t) == (from, doc.generation) {
                return Some(bytes.clone());
            }
        }
        let mut compressor =
            zstd::bulk::Compressor::with_dictionary(LEVEL, before.text.as_bytes()).ok()?;
        let bytes = Bytes::from(compressor.compress(doc.text.as_bytes()).ok()?);
        packed.delta = Some((from, doc.generation, bytes.clone()));
        Some(bytes)
    }
}

/// The answer to `GET /-/config/document` with `headers` and `query`.
pub fn respond(plane: &ControlPlane, headers: &HeaderMap, query: &str) -> Response<HeldBody> {
    let get = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !plane.key.verify_fetch(
        get(NODE_HEADER),
        get(TIME_HEADER),
        get(http::header::AUTHORIZATION.as_str()),
        lb_core::clock::unix_secs(),
    ) {
        metrics::counter!("meshlb_config_fetches_refused_total").increment(1);
        return answer(
            StatusCode::UNAUTHORIZED,
            "a config fetch is signed with the cluster key (and a clock within 300 s)",
        );
    }
    let doc = plane.document.load_full();
    let relayable = doc.generation > 0
        && (plane.role.takes_writes() || plane.role.file_is_kept())
        && plane.writer_signed(
            doc.generation,
            &doc.sha256,
            doc.size(),
            doc.signature.as_deref(),
        );
    if !relayable {
        return answer(
            StatusCode::NOT_FOUND,
            "this node holds no generation of the mesh's config to serve",
        );
    }
    let Ok(slot) = std::sync::Arc::clone(&plane.serving).try_acquire_owned() else {
        served("busy");
        let mut r = answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node serves as many fetches as --config-serve-max allows: try another holder",
        );
        r.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let zstd = takes_zstd(headers);
    let delta = zstd
        .then(|| delta_from(query))
        .flatten()
        .and_then(|(from, base)| Some((from, plane.packed_delta(&doc, from, base)?)));
    let full = || zstd.then(|| plane.packed_full(&doc)).flatten();
    let (body, encoded, from) = match delta {
        Some((from, bytes)) => (bytes, true, Some(from)),
        None => match full() {
            Some(bytes) => (bytes, true, None),
            None => (Bytes::from_owner(Text(doc.text.clone())), false, None),
        },
    };
    served(if from.is_some() { "delta" } else { "full" });
    metrics::counter!("meshlb_config_document_bytes_sent_total").increment(body.len() as u64);
    let mut r = Response::new(HeldBody::held(body, slot));
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/toml"),
    );
    if encoded {
        h.insert(
            http::header::CONTENT_ENCODING,
            HeaderValue::from_static("zstd"),
        );
    }
    let hmac = plane.key.sign_document(doc.generation, &doc.sha256);
    let mut pairs = vec![
        (GENERATION_HEADER, doc.generation.to_string()),
        (SHA256_HEADER, doc.sha256.clone()),
        (SIGNATURE_HEADER, hmac),
        (SIZE_HEADER, doc.size().to_string()),
    ];
    if let Some(s) = &doc.signature {
        pairs.push((WRITER_SIGNATURE_HEADER, s.to_string()));
    }
    if let Some(f) = from {
        pairs.push((DELTA_FROM_HEADER, f.to_string()));
    }
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{ConfigRole, ControlKey, DocumentSettings};
    use http_body_util::BodyExt;

    fn plane(serve_max: usize) -> ControlPlane {
        let documents = DocumentSettings {
            serve_max,
            ..DocumentSettings::default()
        };
        let key = ControlKey::new("a cluster key, long enough", None);
        let doc = Versioned::new(3, "a = 1\n");
        ControlPlane::new(ConfigRole::Primary, doc, key, 1 << 20, documents).0
    }

    /// A follower's signed fetch, taking zstd when `zstd`.
    fn fetch(plane: &ControlPlane, zstd: bool) -> HeaderMap {
        let now = lb_core::clock::unix_secs();
        let mut h = HeaderMap::new();
        h.insert(NODE_HEADER, HeaderValue::from_static("f"));
        h.insert(
            TIME_HEADER,
            HeaderValue::from_str(&now.to_string()).expect("time"),
        );
        let auth = plane.key.sign_fetch("f", now);
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&auth).expect("auth"),
        );
        if zstd {
            h.insert(
                http::header::ACCEPT_ENCODING,
                HeaderValue::from_static("zstd"),
            );
        }
        h
    }

    async fn body(r: Response<HeldBody>) -> Vec<u8> {
        r.into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec()
    }

    #[tokio::test]
    async fn fetches_beyond_serve_max_are_refused_until_a_body_is_sent() {
        let plane = plane(1);
        let first = respond(&plane, &fetch(&plane, false), "");
        assert_eq!(first.status(), StatusCode::OK);
        let second = respond(&plane, &fetch(&plane, false), "");
        assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(second.headers().contains_key(http::header::RETRY_AFTER));
        assert_eq!(body(first).await, b"a = 1\n");
        assert_eq!(
            respond(&plane, &fetch(&plane, false), "").status(),
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn a_follower_one_behind_gets_a_delta_and_others_the_whole_compressed() {
        let plane = plane(4);
        plane.applied(Versioned::new(4, "a = 2\n"));
        let base = Versioned::new(3, "a = 1\n").sha256;
        let delta = respond(&plane, &fetch(&plane, true), &format!("from=3&base={base}"));
        assert_eq!(delta.headers()[DELTA_FROM_HEADER], "3");
        assert_eq!(delta.headers()[http::header::CONTENT_ENCODING], "zstd");
        let bytes = body(delta).await;
        let mut d = zstd::bulk::Decompressor::with_dictionary(b"a = 1\n").expect("dictionary");
        assert_eq!(d.decompress(&bytes, 64).expect("delta"), b"a = 2\n");
        let other_text = Versioned::new(3, "a = 3\n").sha256;
        let whole = respond(
            &plane,
            &fetch(&plane, true),
            &format!("from=3&base={other_text}"),
        );
        assert!(
            !whole.headers().contains_key(DELTA_FROM_HEADER),
            "no delta against another text of generation 3"
        );
        let whole = respond(&plane, &fetch(&plane, true), &format!("from=2&base={base}"));
        assert!(
            !whole.headers().contains_key(DELTA_FROM_HEADER),
            "no delta from 2"
        );
        let bytes = body(whole).await;
        assert_eq!(
            zstd::bulk::decompress(&bytes, 64).expect("whole"),
            b"a = 2\n"
        );
        let unsigned = respond(&plane, &HeaderMap::new(), "");
        assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn zstd_is_taken_only_when_accepted_and_from_is_read() {
        let mut h = HeaderMap::new();
        assert!(!takes_zstd(&h));
        h.insert(
            http::header::ACCEPT_ENCODING,
            HeaderValue::from_static("gzip, zstd;q=1"),
        );
        assert!(takes_zstd(&h));
        assert_eq!(delta_from("a=1&from=7&base=ab"), Some((7, "ab")));
        assert_eq!(delta_from("from=7"), None, "no base, no delta");
        assert_eq!(delta_from("from=x&base=ab"), None);
        assert_eq!(delta_from("fromage=7&base=ab"), None);
    }
}
