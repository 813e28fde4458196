//! The request as the origin gets it, worked out once for every attempt: origin-form target,
//! hop-by-hop fields removed (RFC 9110 section 7.6.1), one `Host`, and this hop's
//! `X-Forwarded-*`.

use std::net::SocketAddr;

use http::header::{self, HeaderValue};

use super::host::HostFields;
use crate::headers::{lists_token, strip_hop_by_hop, Forwarded};

/// Turns the client's request head into what every attempt sends: origin-form URI (the
/// connection names the origin), hop-by-hop headers removed, `X-Forwarded-*` added, and a
/// `Host` even when the client spoke HTTP/2 (which carries it in the URI).
pub(super) fn prepare(
    parts: http::request::Parts,
    client: &Peer,
    upgrade: bool,
    hosts: HostFields,
) -> Prepared {
    let http::request::Parts {
        method,
        uri,
        mut headers,
        version,
        ..
    } = parts;
    // hyper's HTTP/2 server sends trailers always, its HTTP/1 server to a client that asked.
    // (A pass over the few names before the lookup: most requests carry no `TE`, and a hash
    // lookup costs more than comparing a dozen standard names.)
    let trailers = version == http::Version::HTTP_2
        || (headers.keys().any(|k| *k == header::TE)
            && lists_token(&headers, header::TE, "trailers"));
    // The origin gets one `Host`, the host the request was routed by: the URI's authority
    // when it has one (HTTP/2, or an absolute-form target, which RFC 9112 section 3.2.2 puts
    // before the field), else the first `Host` field (HTTP/1 requests with two were refused
    // with 400; an HTTP/2 request may carry several, and a second must not reach the origin).
    let authority = uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    let (host, rewrite_host) = match authority {
        Some(a) => (Some(a), true),
        None => (hosts.first, hosts.more),
    };
    strip_hop_by_hop(&mut headers, upgrade);
    if let (Some(h), true) = (&host, rewrite_host) {
        headers.insert(header::HOST, h.clone());
    }
    let forwarded = Forwarded::take(
        &mut headers,
        client.addr.ip(),
        client.forwarded_for.as_ref(),
        client.tls,
        host,
    );
    Prepared {
        method,
        target: uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
        headers,
        forwarded,
        trailers,
    }
}

/// The client end of a connection, worked out once per connection.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// Whether the client connected over TLS.
    pub tls: bool,
    /// The client's address as an `X-Forwarded-For` value.
    forwarded_for: Option<HeaderValue>,
    /// What its TLS connection negotiated, for the access log.
    tls_facts: Option<crate::access::TlsFacts>,
}

impl Peer {
    pub fn new(addr: SocketAddr, tls: bool) -> Peer {
        let forwarded_for = HeaderValue::from_str(&addr.ip().to_string()).ok();
        Peer {
            addr,
            tls,
            forwarded_for,
            tls_facts: None,
        }
    }

    /// A client over TLS, with what its connection negotiated.
    pub fn over_tls(addr: SocketAddr, facts: crate::access::TlsFacts) -> Peer {
        Peer {
            tls_facts: Some(facts),
            ..Peer::new(addr, true)
        }
    }

    pub fn tls_facts(&self) -> Option<&crate::access::TlsFacts> {
        self.tls_facts.as_ref()
    }
}

/// The request as every attempt sends it, but for the endpoint's Host override.
pub(super) struct Prepared {
    pub(super) method: http::Method,
    /// Origin-form: the client's path and query (sharing its bytes).
    pub(super) target: http::uri::PathAndQuery,
    /// Headers for the origin: hop-by-hop ones and the client's `X-Forwarded-*` gone, `Host`
    /// set.
    pub(super) headers: http::HeaderMap,
    /// This hop's `X-Forwarded-*`, written after them.
    pub(super) forwarded: Forwarded,
    /// The client takes trailer fields, so the origin is asked for them.
    pub(super) trailers: bool,
}

impl Drop for Prepared {
    /// The header map goes back for the worker's next request.
    fn drop(&mut self) {
        crate::header_maps::give_back(std::mem::take(&mut self.headers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn prepared(req: Request<()>) -> Prepared {
        let hosts = HostFields::of(req.headers());
        let (parts, ()) = req.into_parts();
        prepare(
            parts,
            &Peer::new("192.0.2.7:5000".parse().expect("addr"), false),
            false,
            hosts,
        )
    }

    #[test]
    fn the_origin_gets_one_host_and_the_forwarded_fields() {
        // One Host: kept as it came.
        let p = prepared(
            Request::get("/a?b")
                .header("host", "www.example.test")
                .header("connection", "keep-alive")
                .body(())
                .expect("request"),
        );
        let hosts: Vec<_> = p.headers.get_all(header::HOST).iter().collect();
        assert_eq!(hosts, ["www.example.test"]);
        assert_eq!(p.target.as_str(), "/a?b");
        assert!(!p.headers.contains_key(header::CONNECTION));
        let mut forwarded = Vec::new();
        p.forwarded.write_to(&mut forwarded);
        assert_eq!(
            String::from_utf8_lossy(&forwarded),
            "x-forwarded-for: 192.0.2.7\r\nx-forwarded-proto: http\r\n\
             x-forwarded-host: www.example.test\r\n"
        );
        // Two (HTTP/2; HTTP/1 ones are refused): the request was routed by the first, so the
        // origin sees only that one.
        let p = prepared(
            Request::get("/")
                .version(http::Version::HTTP_2)
                .header("host", "www.example.test")
                .header("host", "other.test")
                .body(())
                .expect("request"),
        );
        let hosts: Vec<_> = p.headers.get_all(header::HOST).iter().collect();
        assert_eq!(hosts, ["www.example.test"]);
        // `Connection` naming Host does not take it from the origin.
        let p = prepared(
            Request::get("/")
                .header("host", "www.example.test")
                .header("connection", "host, x-drop")
                .header("x-drop", "1")
                .body(())
                .expect("request"),
        );
        assert_eq!(p.headers[header::HOST], "www.example.test");
        assert!(!p.headers.contains_key("x-drop"));
        // An absolute-form target names the host, whatever the field says (RFC 9112 3.2.2).
        let p = prepared(
            Request::get("http://www.example.test/y")
                .header("host", "other.test")
                .body(())
                .expect("request"),
        );
        let hosts: Vec<_> = p.headers.get_all(header::HOST).iter().collect();
        assert_eq!(hosts, ["www.example.test"]);
        assert_eq!(
            p.forwarded.host.as_ref().map(|h| h.as_bytes()),
            Some(&b"www.example.test"[..])
        );
        // None (HTTP/2): the URI's authority becomes the Host.
        let p = prepared(
            Request::get("https://www.example.test:8443/x")
                .body(())
                .expect("request"),
        );
        assert_eq!(p.headers[header::HOST], "www.example.test:8443");
        assert_eq!(p.target.as_str(), "/x");
    }
}
