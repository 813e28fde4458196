//! Reading a client's HTTP/1.1 request head for the proxy's own server: which requests it
//! takes (the plain keep-alive request without a body that is nearly all of a proxy's
//! traffic), and the `http::Request` made from the head's bytes without copying them.
//!
//! Anything else — a body, `Expect`, an upgrade, `TE`, HTTP/1.0, a target that is not a
//! path, a malformed or oversized head — is left to hyper, which answers or rejects it.

use std::mem::MaybeUninit;
use std::ops::Range;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Method, Request, Uri, Version};

use crate::body::ProxyBody;
use crate::headers::tokens;

/// As many header fields as hyper's server accepts.
pub const MAX_HEADERS: usize = 100;

/// Where a parsed head's parts are in the buffer (reused from request to request).
#[derive(Debug, Default)]
pub struct Spans {
    method: Range<usize>,
    path: Range<usize>,
    headers: Vec<(Range<usize>, Range<usize>)>,
}

/// What the start of the buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Head {
    /// Not a whole head yet.
    Partial,
    /// A head this server does not take (hyper will).
    ForHyper,
    /// A whole head of `len` bytes; `close` when the client asked to close afterwards.
    Complete { len: usize, close: bool },
}

/// Parses the head at the start of `buf`, recording where its parts are in `spans`.
pub fn parse_head(buf: &[u8], spans: &mut Spans) -> Head {
    // Uninitialised slots: zeroing a hundred of them for every request costs more than the
    // parse of a short head.
    let mut fields = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut fields) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Head::Partial,
        Err(_) => return Head::ForHyper,
    };
    let (Some(method), Some(path), Some(1)) = (req.method, req.path, req.version) else {
        return Head::ForHyper;
    };
    // CONNECT (a tunnel, whatever its target) and targets that are not a path are hyper's.
    if !path.starts_with('/') || method.eq_ignore_ascii_case("CONNECT") {
        return Head::ForHyper;
    }
    let base = buf.as_ptr() as usize;
    let span = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        start..start + s.len()
    };
    spans.method = span(method.as_bytes());
    spans.path = span(path.as_bytes());
    spans.headers.clear();
    let mut close = false;
    for field in req.headers.iter() {
        let name = field.name;
        let is = |n: &str| crate::headers::is_named(name.as_bytes(), n.as_bytes());
        if is("transfer-encoding") || is("expect") || is("upgrade") || is("te") {
            return Head::ForHyper;
        }
        if is("content-length") && field.value != b"0" {
            return Head::ForHyper;
        }
        if is("connection") {
            for token in tokens(field.value) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if !token.eq_ignore_ascii_case(b"keep-alive") {
                    return Head::ForHyper;
                }
            }
        }
        spans
            .headers
            .push((span(name.as_bytes()), span(field.value)));
    }
    Head::Complete { len, close }
}

/// The request a complete head describes, its values sharing `head`'s bytes; `None` when a
/// part is not valid for the `http` types (hyper then rejects it).
pub fn build_request(head: &Bytes, spans: &Spans) -> Option<Request<ProxyBody>> {
    let method = Method::from_bytes(head.get(spans.method.clone())?).ok()?;
    let uri = Uri::from_maybe_shared(head.slice(spans.path.clone())).ok()?;
    let mut headers = crate::header_maps::take(spans.headers.len());
    for (name, value) in &spans.headers {
        let name = HeaderName::from_bytes(head.get(name.clone())?).ok()?;
        let value = HeaderValue::from_maybe_shared(head.slice(value.clone())).ok()?;
        headers.append(name, value);
    }
    let mut req = Request::new(ProxyBody::Empty);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    Some(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever a client sends, reading it never panics, and a head taken whole builds
        /// a request or goes to hyper.
        #[test]
        fn any_bytes_are_read_without_panicking(raw in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut spans = Spans::default();
            if let Head::Complete { len, .. } = parse_head(&raw, &mut spans) {
                prop_assert!(len <= raw.len());
                let _ = build_request(&Bytes::copy_from_slice(&raw[..len]), &spans);
            }
        }

        /// Well-formed heads with arbitrary field names and values come out as sent.
        #[test]
        fn fields_come_out_as_sent(
            path in "/[a-z0-9/._~-]{0,30}",
            fields in proptest::collection::vec(("x-[a-z0-9-]{1,12}", "[ -~]{0,40}"), 0..12),
        ) {
            let mut raw = format!("GET {path} HTTP/1.1\r\nHost: www.example.test\r\n");
            for (n, v) in &fields {
                raw.push_str(&format!("{n}: {v}\r\n"));
            }
            raw.push_str("\r\n");
            let mut spans = Spans::default();
            let head = parse_head(raw.as_bytes(), &mut spans);
            prop_assert_eq!(&head, &Head::Complete { len: raw.len(), close: false });
            let req = build_request(&Bytes::from(raw.clone()), &spans).expect("built");
            prop_assert_eq!(req.uri().path(), path.as_str());
            for (n, v) in &fields {
                // httparse trims the value's surrounding whitespace, as RFC 9112 says.
                let want = v.trim_matches(|c| c == ' ' || c == '\t');
                prop_assert!(req.headers().get_all(n.as_str()).iter().any(|got| got == want));
            }
        }
    }

    fn parse(s: &str) -> Head {
        parse_head(s.as_bytes(), &mut Spans::default())
    }

    #[test]
    fn a_plain_request_is_taken_and_built_without_loss() {
        let raw = "GET /a/b?x=1 HTTP/1.1\r\nHost: www.example.test\r\nX-Many: 1\r\n\
                   x-many: 2\r\nCookie: a=1\r\n\r\nGET /next";
        let mut spans = Spans::default();
        let Head::Complete { len, close } = parse_head(raw.as_bytes(), &mut spans) else {
            panic!("not complete");
        };
        assert!(!close);
        assert_eq!(&raw[len..], "GET /next");
        let head = Bytes::copy_from_slice(&raw.as_bytes()[..len]);
        let req = build_request(&head, &spans).expect("request");
        assert_eq!(req.method(), Method::GET);
        assert_eq!(req.uri().path(), "/a/b");
        assert_eq!(req.uri().query(), Some("x=1"));
        assert_eq!(req.headers()["host"], "www.example.test");
        let many: Vec<_> = req.headers().get_all("x-many").iter().collect();
        assert_eq!(many, ["1", "2"]);
        assert_eq!(req.headers().len(), 4);
    }

    #[test]
    fn a_head_in_pieces_is_partial_until_whole() {
        let raw = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 0..raw.len() {
            assert_eq!(parse(&raw[..cut]), Head::Partial, "cut at {cut}");
        }
        assert_eq!(
            parse(raw),
            Head::Complete {
                len: raw.len(),
                close: false
            }
        );
    }

    #[test]
    fn connection_close_is_honoured_and_keep_alive_accepted() {
        let close = "GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n";
        assert!(matches!(parse(close), Head::Complete { close: true, .. }));
        let keep = "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n";
        assert!(matches!(parse(keep), Head::Complete { close: false, .. }));
        let empty_body = "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(parse(empty_body), Head::Complete { .. }));
    }

    #[test]
    fn a_head_httparse_takes_but_http_refuses_is_not_built() {
        let raw = "GET /a<b HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut spans = Spans::default();
        assert!(matches!(
            parse_head(raw.as_bytes(), &mut spans),
            Head::Complete { .. }
        ));
        assert!(build_request(&Bytes::from(raw), &spans).is_none());
    }

    #[test]
    fn everything_else_is_left_to_hyper() {
        for raw in [
            "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "PUT / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
            "GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
            "GET / HTTP/1.1\r\nConnection: x-secret\r\n\r\n",
            "GET / HTTP/1.1\r\nTE: trailers\r\n\r\n",
            "GET / HTTP/1.0\r\n\r\n",
            "GET http://www.example.test/ HTTP/1.1\r\n\r\n",
            "OPTIONS * HTTP/1.1\r\n\r\n",
            "CONNECT www.example.test:443 HTTP/1.1\r\n\r\n",
            "CONNECT / HTTP/1.1\r\nHost: www.example.test\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "NOT HTTP AT ALL\r\n\r\n",
        ] {
            assert_eq!(parse(raw), Head::ForHyper, "{raw:?}");
        }
        let too_many: String = std::iter::once("GET / HTTP/1.1\r\n".to_string())
            .chain((0..=MAX_HEADERS).map(|i| format!("x-{i}: 1\r\n")))
            .chain(std::iter::once("\r\n".to_string()))
            .collect();
        assert_eq!(parse(&too_many), Head::ForHyper);
    }
}
