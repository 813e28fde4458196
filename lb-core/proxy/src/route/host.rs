//! The host a request is routed by, read from its head without I/O: the URI's authority or
//! the `Host` field without its port, and the heads RFC 9112 section 3.2 refuses.

use http::header::{self, HeaderValue};
use http::Request;

/// A request's `Host` fields, looked up once for routing and for the origin's head: the
/// first, and whether another follows.
pub(super) struct HostFields {
    pub(super) first: Option<HeaderValue>,
    pub(super) more: bool,
}

impl HostFields {
    pub(super) fn of(headers: &http::HeaderMap) -> HostFields {
        let mut hosts = headers.get_all(header::HOST).iter();
        HostFields {
            first: hosts.next().cloned(),
            more: hosts.next().is_some(),
        }
    }
}

/// The host a request names: the URI's authority (HTTP/2, absolute form) or `Host`, without
/// a port (minding IPv6 literals). As bytes: the names it is matched against are ASCII, and
/// checking the field's text first cost more than the match (bench/proxy-instructions.sh).
/// `Err` names what makes an HTTP/1 head one that RFC 9112 section 3.2 answers with 400: more
/// than one `Host` field, or none in HTTP/1.1.
pub(super) fn request_host<'a, B>(
    req: &'a Request<B>,
    hosts: &'a HostFields,
) -> Result<Option<&'a [u8]>, &'static str> {
    if req.version() < http::Version::HTTP_2 {
        if hosts.more {
            return Err("the request has more than one Host field");
        }
        if hosts.first.is_none() && req.version() == http::Version::HTTP_11 {
            return Err("an HTTP/1.1 request needs a Host field");
        }
    }
    if let Some(h) = req.uri().host() {
        return Ok(Some(h.as_bytes()));
    }
    let Some(h) = hosts.first.as_ref().map(HeaderValue::as_bytes) else {
        return Ok(None);
    };
    let Some(colon) = h.iter().rposition(|&b| b == b':') else {
        return Ok(Some(h));
    };
    let (name, port) = (&h[..colon], &h[colon + 1..]);
    let port_follows_name = (!name.ends_with(b"]") || h.starts_with(b"["))
        && !port.is_empty()
        && port.iter().all(u8::is_ascii_digit);
    Ok(Some(if port_follows_name { name } else { h }))
}

/// Whether `host` (its port taken off) is an RFC 3986 host: an IP literal in brackets, or a
/// registered name or IPv4 address (unreserved characters, percent-encodings, sub-delims).
/// Empty counts: a request without a host is unknown, not bad.
pub(super) fn is_host_syntax(host: &[u8]) -> bool {
    if let Some(literal) = host.strip_prefix(b"[").and_then(|h| h.strip_suffix(b"]")) {
        return !literal.is_empty()
            && literal
                .iter()
                .all(|b| b.is_ascii_hexdigit() || b":.vV".contains(b));
    }
    host.iter()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host `req` names, or why it is refused.
    fn host_of<B>(req: &Request<B>) -> Result<Option<String>, &'static str> {
        let hosts = HostFields::of(req.headers());
        request_host(req, &hosts).map(|h| h.map(|h| String::from_utf8_lossy(h).into_owned()))
    }

    #[test]
    fn the_host_a_request_names_is_without_its_port() {
        let host_field = |host: &str| {
            let req = Request::get("/")
                .header("host", host)
                .body(())
                .expect("request");
            host_of(&req)
        };
        let named = |h: &str| Ok(Some(h.to_string()));
        assert_eq!(host_field("www.example.test"), named("www.example.test"));
        assert_eq!(
            host_field("www.example.test:8080"),
            named("www.example.test")
        );
        assert_eq!(host_field("[2001:db8::1]:443"), named("[2001:db8::1]"));
        assert_eq!(host_field("[2001:db8::1]"), named("[2001:db8::1]"));
        assert_eq!(host_field("a.test:"), named("a.test:"));
        assert_eq!(host_field("a.test:8x"), named("a.test:8x"));
        let absolute = Request::get("http://b.test:81/x")
            .header("host", "a.test")
            .body(())
            .expect("request");
        assert_eq!(host_of(&absolute), Ok(Some("b.test".into())));
    }

    #[test]
    fn a_host_is_a_name_or_an_address() {
        for good in [
            "www.example.test",
            "192.0.2.1",
            "[2001:db8::1]",
            "a-b_c~%41",
            "",
        ] {
            assert!(is_host_syntax(good.as_bytes()), "{good}");
        }
        for bad in ["a b", "a/b", "[]", "[zz::1]", "a\\b", "\u{e9}.test", "a@b"] {
            assert!(!is_host_syntax(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn an_http1_request_with_two_hosts_or_none_is_refused() {
        let two = Request::get("/")
            .header("host", "a.test")
            .header("host", "b.test")
            .body(())
            .expect("request");
        assert!(host_of(&two).is_err());
        let none = Request::get("/").body(()).expect("request");
        assert!(host_of(&none).is_err());
        // HTTP/1.0 may leave it out (and then names no load balancer); HTTP/2 carries the
        // authority instead.
        let old = Request::get("/")
            .version(http::Version::HTTP_10)
            .body(())
            .expect("request");
        assert_eq!(host_of(&old), Ok(None));
        let h2 = Request::get("https://a.test/")
            .version(http::Version::HTTP_2)
            .body(())
            .expect("request");
        assert_eq!(host_of(&h2), Ok(Some("a.test".into())));
    }
}
