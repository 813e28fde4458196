//! Header rules of a reverse proxy: hop-by-hop headers stay on their hop (RFC 9110 section
//! 7.6.1), the client's address and scheme travel in `X-Forwarded-*`, cookies are parsed once.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// RFC 2616 also listed `Trailer`; RFC 9110 does not: it names the trailer fields end to end,
/// and hyper sends an HTTP/1.1 client only the trailers it lists.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    // The settings of an h2c upgrade, connection-specific (RFC 9113 section 3.2.1 of RFC 7540).
    HeaderName::from_static("http2-settings"),
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRANSFER_ENCODING,
];
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Whether `name`, a field name as the head parsers let through (an RFC 9110 token), is
/// `lower` (lowercase letters, digits and `-`) in any case. Setting the 0x20 bit turns an
/// uppercase letter into its lowercase one and leaves lowercase letters, digits and `-` as
/// they are, and no other token byte becomes one of those: one operation per byte where
/// `eq_ignore_ascii_case` converts both sides (it showed in profiles of the proxy).
pub fn is_named(name: &[u8], lower: &[u8]) -> bool {
    debug_assert!(lower
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-'));
    name.len() == lower.len() && name.iter().zip(lower).all(|(&n, &l)| n | 0x20 == l)
}

/// Whether the request asks to switch protocols (WebSocket) and is passed on as such.
///
/// An upgrade to `h2c` is not: passed to an origin that accepts it, it would open an HTTP/2
/// connection to that origin past the proxy's routing, rules and limits ("h2c smuggling").
/// RFC 9113 section 3.1 dropped the h2c upgrade, and a server may ignore `Upgrade` (RFC 9110
/// section 7.8), so the request is served as the HTTP/1.1 request it also is, its `Upgrade`
/// and `HTTP2-Settings` stripped as hop-by-hop fields (as HAProxy and nginx do).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && lists_token(headers, header::CONNECTION, "upgrade")
        && !lists_token(headers, header::UPGRADE, "h2c")
}

/// Why a request's `Transfer-Encoding` cannot be trusted, if it cannot: `chunked` applied more
/// than once, or not last (RFC 9112 section 6.1: a sender must apply chunked once, as the
/// final coding; a server must answer 400 and close when it is not last). Two readers could
/// frame such a body differently — the way to smuggle a request past a proxy.
pub fn transfer_coding_problem(headers: &HeaderMap) -> Option<&'static str> {
    let mut codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| tokens(v.as_bytes()))
        .map(|t| {
            t.split(|&b| b == b';')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
        .peekable();
    let mut chunked = 0;
    let mut last_is_chunked = false;
    while let Some(coding) = codings.next() {
        let is_chunked = coding.eq_ignore_ascii_case(b"chunked");
        chunked += usize::from(is_chunked);
        if codings.peek().is_none() {
            last_is_chunked = is_chunked;
        }
    }
    match chunked {
        0 => None,
        1 if last_is_chunked => None,
        1 => Some("chunked is not the last transfer coding"),
        _ => Some("chunked is applied more than once"),
    }
}

/// Removes hop-by-hop headers and those the `Connection` header names (`Host` aside). An
/// upgrade keeps `Connection: upgrade` and `Upgrade`, which the next hop needs to switch
/// protocols.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep_upgrade: bool) {
    // Most messages carry none, or (origins' answers) only `Connection: keep-alive`: one
    // pass over their few names instead of nine lookups.
    if !keep_upgrade {
        let mut only_connection = true;
        let mut any = false;
        for k in headers.keys() {
            if *k == header::UPGRADE || HOP_BY_HOP.contains(k) {
                any = true;
                only_connection &= *k == header::CONNECTION;
            }
        }
        if !any {
            return;
        }
        if only_connection && connection_names_nothing(headers) {
            headers.remove(header::CONNECTION);
            return;
        }
    }
    // `Connection: keep-alive` or `close` (what most origins send) names nothing more to
    // remove: no list, no header names built.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.eq_ignore_ascii_case("keep-alive") && !t.eq_ignore_ascii_case("close"))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .filter(|n| !(keep_upgrade && n == header::UPGRADE))
        // `Host` is the origin's to have: a client naming it in `Connection` does not take
        // it away (the proxy routed by it, and TLS to the origin is named by it).
        .filter(|n| n != header::HOST)
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in &HOP_BY_HOP {
        headers.remove(h);
    }
    if keep_upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::UPGRADE);
    }
}

/// The items of a comma-separated field value (`Connection`, `TE`), trimmed.
pub fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

/// Whether any `name` field lists `token` (case-insensitive).
pub fn lists_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| tokens(v.as_bytes()))
        .any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
}

/// Whether every `Connection` value is only `keep-alive` or `close` (names no header).
fn connection_names_nothing(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| tokens(v.as_bytes()))
        .all(|t| t.eq_ignore_ascii_case(b"keep-alive") || t.eq_ignore_ascii_case(b"close"))
}

/// The `X-Forwarded-*` fields an origin gets, written after the request's own fields: kept
/// out of its header map, where inserting them was the dearest part of preparing a request
/// (bench/proxy-instructions.sh).
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// The client's `X-Forwarded-For` list (all its fields, joined) with the client appended.
    pub for_list: Option<HeaderValue>,
    /// Whether the client connected over TLS (`https`, else `http`).
    pub tls: bool,
    /// The host the request was routed by.
    pub host: Option<HeaderValue>,
}

impl Forwarded {
    /// Takes the client's own `X-Forwarded-*` fields out of `headers` (this hop sets them)
    /// and appends the client (`client_value`: its address already as a value) to the list.
    pub fn take(
        headers: &mut HeaderMap,
        client: std::net::IpAddr,
        client_value: Option<&HeaderValue>,
        tls: bool,
        host: Option<HeaderValue>,
    ) -> Forwarded {
        let mut prior: Option<String> = None;
        // One pass over the names first: most requests carry none of these, and three
        // lookups cost more.
        let named = |k: &HeaderName| {
            *k == X_FORWARDED_FOR || *k == X_FORWARDED_PROTO || *k == X_FORWARDED_HOST
        };
        if headers.keys().any(named) {
            let list: Vec<&str> = headers
                .get_all(&X_FORWARDED_FOR)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            if !list.is_empty() {
                prior = Some(list.join(", "));
            }
            headers.remove(&X_FORWARDED_FOR);
            headers.remove(&X_FORWARDED_PROTO);
            headers.remove(&X_FORWARDED_HOST);
        }
        let for_list = match prior {
            Some(prior) => HeaderValue::from_str(&format!("{prior}, {client}")).ok(),
            None => client_value
                .cloned()
                .or_else(|| HeaderValue::from_str(&client.to_string()).ok()),
        };
        Forwarded {
            for_list,
            tls,
            host,
        }
    }

    /// Writes the fields as header lines.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        if let Some(v) = &self.for_list {
            out.extend_from_slice(b"x-forwarded-for: ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(if self.tls {
            b"x-forwarded-proto: https\r\n"
        } else {
            b"x-forwarded-proto: http\r\n"
        });
        if let Some(v) = &self.host {
            out.extend_from_slice(b"x-forwarded-host: ");
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// `Cookie` headers as (name, value) pairs.
pub fn cookies(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| {
            let (n, v) = pair.split_once('=')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Headers as lower-case (name, value) pairs for the rules and header affinity.
pub fn fields(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// Writes a `content-length` line, formatting the number in place: `HeaderValue::from(n)`
/// allocates twice, for every response.
pub fn write_content_length(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: &'static str, values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(name, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn chunked_once_and_last_is_the_only_chunked_framing_taken() {
        let te = |values| transfer_coding_problem(&with("transfer-encoding", values));
        assert_eq!(te(&[]), None);
        assert_eq!(te(&["chunked"]), None);
        assert_eq!(te(&["gzip, chunked"]), None);
        assert_eq!(te(&["gzip", "Chunked"]), None);
        assert!(te(&["chunked, chunked"]).is_some());
        assert!(te(&["chunked", "chunked"]).is_some());
        assert!(te(&["chunked;x=1, chunked"]).is_some());
        assert!(te(&["chunked, gzip"]).is_some());
        assert_eq!(
            te(&["gzip"]),
            None,
            "not chunked: hyper refuses or reads to close"
        );
    }

    #[test]
    fn an_h2c_upgrade_is_not_passed_on_and_its_fields_are_stripped() {
        let mut h = with("upgrade", &["h2c"]);
        h.append(
            "connection",
            HeaderValue::from_static("Upgrade, HTTP2-Settings"),
        );
        h.append(
            "http2-settings",
            HeaderValue::from_static("AAMAAABkAAQAAP__"),
        );
        assert!(!is_upgrade(&h));
        strip_hop_by_hop(&mut h, false);
        assert!(h.is_empty(), "{h:?}");
        // Without Connection naming it, HTTP2-Settings is hop-by-hop all the same.
        let mut h = with("upgrade", &["h2c"]);
        h.append("connection", HeaderValue::from_static("upgrade"));
        h.append(
            "http2-settings",
            HeaderValue::from_static("AAMAAABkAAQAAP__"),
        );
        strip_hop_by_hop(&mut h, false);
        assert!(h.is_empty(), "{h:?}");
        let mut ws = with("upgrade", &["websocket"]);
        ws.append("connection", HeaderValue::from_static("Upgrade"));
        assert!(is_upgrade(&ws), "WebSockets still upgrade");
    }

    #[test]
    fn a_token_byte_matches_a_lowercase_name_byte_only_as_its_case_insensitive_self() {
        // Every pair of an RFC 9110 token byte and a byte `is_named` compares it with.
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        let lower = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
        for n in (0..=255u8).filter(|&b| tchar(b)) {
            for l in (0..=255u8).filter(|&b| lower(b)) {
                assert_eq!(
                    is_named(&[n], &[l]),
                    n.to_ascii_lowercase() == l,
                    "{n:#x} against {l:#x}"
                );
            }
        }
        assert!(is_named(b"Content-Length", b"content-length"));
        assert!(!is_named(b"Content-Lengths", b"content-length"));
        assert!(!is_named(b"Content_Length", b"content-length"));
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("upgrade", HeaderValue::from_static("h2c"));
        h.insert("x-kept", HeaderValue::from_static("yes"));
        h.insert("trailer", HeaderValue::from_static("x-checksum"));
        strip_hop_by_hop(&mut h, false);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-kept", "trailer"]);
    }

    #[test]
    fn a_bare_keep_alive_is_removed_and_a_named_field_with_it() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("Keep-Alive"));
        h.insert("x-kept", HeaderValue::from_static("yes"));
        strip_hop_by_hop(&mut h, false);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-kept"]);
        h.insert("connection", HeaderValue::from_static("keep-alive, x-kept"));
        strip_hop_by_hop(&mut h, false);
        assert!(h.is_empty(), "{h:?}");
    }

    #[test]
    fn an_upgrade_keeps_what_the_next_hop_needs() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("Upgrade"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        assert!(is_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["upgrade"], "websocket");
    }

    fn forwarded(h: &mut HeaderMap) -> String {
        let f = Forwarded::take(
            h,
            "198.51.100.7".parse().unwrap(),
            None,
            true,
            Some(HeaderValue::from_static("www.example.test")),
        );
        let mut out = Vec::new();
        f.write_to(&mut out);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn forwarded_for_appends_and_the_clients_own_fields_are_replaced() {
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_static("192.0.2.1"));
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("192.0.2.2, 192.0.2.3"),
        );
        h.insert("x-forwarded-proto", HeaderValue::from_static("gopher"));
        h.insert("x-forwarded-host", HeaderValue::from_static("evil.test"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        assert_eq!(
            forwarded(&mut h),
            "x-forwarded-for: 192.0.2.1, 192.0.2.2, 192.0.2.3, 198.51.100.7\r\n\
             x-forwarded-proto: https\r\nx-forwarded-host: www.example.test\r\n"
        );
        // Taken out of the request's own fields; the others stay.
        assert_eq!(h.len(), 1);
        assert_eq!(h["accept"], "*/*");
        // Without a list of its own, the client starts one.
        assert!(forwarded(&mut HeaderMap::new()).starts_with("x-forwarded-for: 198.51.100.7\r\n"));
    }

    #[test]
    fn cookies_are_split() {
        let mut h = HeaderMap::new();
        h.append("cookie", HeaderValue::from_static("a=1; __meshlb=xyz"));
        h.append("cookie", HeaderValue::from_static("b = 2"));
        assert_eq!(
            cookies(&h),
            [
                ("a".into(), "1".into()),
                ("__meshlb".into(), "xyz".into()),
                ("b".into(), "2".into())
            ]
        );
    }
}
