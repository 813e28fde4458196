//! What every admin listener (the aggregator's admin API, a prober's metrics listener with its
//! `POST /-/reload`) does the same way at its edge, before any route runs:
//!
//! - a state-changing call needs the bearer token, and with no token configured it is refused
//!   (reads stay open: they carry states and counts, no secrets);
//! - a state-changing call that a browser made for another site is refused. A web page can
//!   make a browser send a "simple" cross-site request (a form POST) to any address, loopback
//!   included, with no CORS preflight; such a request carries `Origin` or
//!   `Sec-Fetch-Site: cross-site`, or a form content type. meshlb's own clients and curl send
//!   none of these. The one browser page allowed is the listener's own (the console, served
//!   from the same origin): its `fetch` says `Sec-Fetch-Site: same-origin`, which no other
//!   site's page can make a browser send, and carries the token in `Authorization`, which no
//!   other site's page holds;
//! - a request head must arrive within the head timeout (`--admin-head-timeout-ms`,
//!   `DEFAULT_HEAD_TIMEOUT`), so a client that opens connections and dribbles holds nothing;
//! - a failing `accept` (out of descriptors) backs off, 5 ms doubling to 1 s, instead of
//!   spinning on the error.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, StatusCode};
use hyper_util::rt::TokioIo;
use lb_tls::ReloadableServer;
use tokio::net::{TcpListener, TcpStream};

use crate::credentials::{Access, Tokens};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a request head may take to arrive (`--admin-head-timeout-ms`).
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a state-changing call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    pub status: StatusCode,
    pub reason: &'static str,
}

/// Compares in time independent of where the strings differ.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether the headers carry `token` as a bearer token.
pub fn has_token(token: &str, headers: &HeaderMap) -> bool {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|g| same_token(g, token))
}

/// Whether a browser sent this for a page of another site (see the module's comment).
pub fn cross_site(headers: &HeaderMap) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let form = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            let v = v.trim_start().to_ascii_lowercase();
            [
                "application/x-www-form-urlencoded",
                "multipart/form-data",
                "text/plain",
            ]
            .iter()
            .any(|simple| v.starts_with(simple))
        })
        .unwrap_or(false);
    let same_origin = site.eq_ignore_ascii_case("same-origin");
    (headers.contains_key(http::header::ORIGIN) && !same_origin)
        || site.eq_ignore_ascii_case("cross-site")
        || site.eq_ignore_ascii_case("same-site")
        || form
}

/// Whether a state-changing call may run: `Err` says why not. `who` names the node for the
/// message ("aggregator", "prober").
pub fn mutation_allowed(tokens: &Tokens, headers: &HeaderMap, who: Node) -> Result<(), Denial> {
    if tokens.write.is_none() && !(tokens.certified && tokens.read.is_none()) {
        return Err(Denial {
            status: StatusCode::FORBIDDEN,
            reason: match who {
                Node::Aggregator => "state-changing admin calls need the admin token: start the aggregator with --admin-token-file (or MESHLB_ADMIN_TOKEN), or --admin-client-ca",
                Node::Prober => "a reload needs the admin token: start the prober with --admin-token-file (or MESHLB_ADMIN_TOKEN), or --admin-client-ca",
            },
        });
    }
    if cross_site(headers) {
        return Err(Denial {
            status: StatusCode::FORBIDDEN,
            reason: "a browser's cross-site request (Origin, Sec-Fetch-Site or a form content type) cannot change state",
        });
    }
    if tokens.access(headers) != Access::Write {
        return Err(Denial {
            status: StatusCode::UNAUTHORIZED,
            reason: "missing or wrong bearer token",
        });
    }
    Ok(())
}

/// Which node's admin listener refuses (for the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Aggregator,
    Prober,
}

/// The wait after a failed accept, shared by every listener of meshlb.
pub use lb_edge::AcceptBackoff;

/// What an admin or metrics listener bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a request head may take (`--admin-head-timeout-ms`); on a keep-alive
    /// connection, also how long it may idle.
    pub head_timeout: Duration,
    /// How long a write of an answer may wait for the client to read (`--admin-send-timeout-ms`);
    /// a client that stops reading a large answer (metrics, the config, a served document) is
    /// cut then, freeing its connection slot and any serving slot (`control/serve.rs`).
    pub send_timeout: Duration,
    /// Connections open at once (`--admin-max-connections`); more are closed at accept.
    pub max_connections: usize,
}

impl Limits {
    /// The slots `accept` takes from.
    pub fn slots(&self) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(self.max_connections.max(1)))
    }
}

/// The next connection on `listener` and its place among `slots`; a failing accept waits as
/// `backoff` says (counted in `meshlb_admin_accept_errors_total`) rather than spinning, and a
/// connection beyond the slots is closed at once (`meshlb_admin_connections_refused_total`).
pub async fn accept(
    listener: &TcpListener,
    backoff: &mut AcceptBackoff,
    slots: &Arc<Semaphore>,
) -> (TcpStream, SocketAddr, OwnedSemaphorePermit) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff.succeeded();
                match Arc::clone(slots).try_acquire_owned() {
                    Ok(slot) => return (stream, peer, slot),
                    Err(_) => {
                        metrics::counter!("meshlb_admin_connections_refused_total").increment(1);
                        drop(stream);
                    }
                }
            }
            Err(e) => {
                let wait = backoff.failed();
                metrics::counter!("meshlb_admin_accept_errors_total").increment(1);
                tracing::warn!(error = %e, wait_ms = wait.as_millis() as u64, "admin accept failed");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// An HTTP/1 server whose request heads must arrive within `head_timeout`.
pub fn http1(head_timeout: Duration) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(head_timeout);
    b
}

/// Connections an admin or metrics listener cut because the client did not read its answer.
const SEND_TIMEOUTS: &str = "meshlb_admin_send_timeouts_total";

/// Serves one accepted connection with `service` within `limits`, over TLS when `tls` is given:
/// the handshake must end within the head timeout too (one that fails or stalls is counted in
/// `meshlb_admin_tls_handshake_failures_total` and closed), and every write may wait for the
/// client at most the send timeout.
pub async fn serve_connection<S>(
    stream: TcpStream,
    tls: Option<&ReloadableServer>,
    limits: Limits,
    service: S,
) where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let head_timeout = limits.head_timeout;
    let stream = lb_edge::TimedWrite::new(stream, limits.send_timeout, SEND_TIMEOUTS);
    let Some(tls) = tls else {
        let _ = http1(head_timeout)
            .serve_connection(TokioIo::new(stream), service)
            .await;
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    match tokio::time::timeout(head_timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => {
            let _ = http1(head_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
        Ok(Err(e)) => {
            metrics::counter!("meshlb_admin_tls_handshake_failures_total").increment(1);
            tracing::debug!(error = %e, "admin TLS handshake failed");
        }
        Err(_) => {
            metrics::counter!("meshlb_admin_tls_handshake_failures_total").increment(1);
        }
    }
}

/// Whether an admin listener on `addr` without a token is reachable from other hosts: its
/// reads (states, votes, members) are then open to them.
pub fn exposed_without_token(addr: SocketAddr, token: Option<&str>) -> bool {
    token.is_none() && !addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        h
    }

    fn token(t: &str) -> Tokens {
        Tokens {
            write: Some(t.into()),
            ..Tokens::default()
        }
    }

    #[test]
    fn a_mutation_needs_a_configured_token_and_the_right_one() {
        let bearer = [("authorization", "Bearer s3cret")];
        let none = mutation_allowed(&Tokens::default(), &headers(&bearer), Node::Aggregator);
        assert_eq!(none.map_err(|r| r.status), Err(StatusCode::FORBIDDEN));
        let wrong = mutation_allowed(&token("other"), &headers(&bearer), Node::Aggregator);
        assert_eq!(wrong.map_err(|r| r.status), Err(StatusCode::UNAUTHORIZED));
        assert_eq!(
            mutation_allowed(&token("s3cret"), &headers(&bearer), Node::Prober),
            Ok(())
        );
    }

    #[test]
    fn a_verified_client_certificate_takes_the_place_of_an_unconfigured_token() {
        let certified = Tokens::default().on_connection(true);
        assert_eq!(
            mutation_allowed(&certified, &HeaderMap::new(), Node::Prober),
            Ok(())
        );
        let beside = token("t").on_connection(true);
        let refused = mutation_allowed(&beside, &HeaderMap::new(), Node::Aggregator);
        assert_eq!(refused.map_err(|r| r.status), Err(StatusCode::UNAUTHORIZED));
        let cross = headers(&[("sec-fetch-site", "cross-site")]);
        assert!(mutation_allowed(&certified, &cross, Node::Aggregator).is_err());
    }

    #[test]
    fn browser_cross_site_requests_are_refused_even_with_the_token() {
        for extra in [
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-site", "same-site"),
            ("content-type", "application/x-www-form-urlencoded"),
            ("content-type", "multipart/form-data; boundary=x"),
            ("content-type", "Text/Plain;charset=utf-8"),
        ] {
            let h = headers(&[("authorization", "Bearer t"), extra]);
            assert_eq!(
                mutation_allowed(&token("t"), &h, Node::Aggregator).map_err(|r| r.status),
                Err(StatusCode::FORBIDDEN),
                "{extra:?}"
            );
        }
        let cli = headers(&[("authorization", "Bearer t"), ("sec-fetch-site", "none")]);
        assert_eq!(
            mutation_allowed(&token("t"), &cli, Node::Aggregator),
            Ok(())
        );
    }

    #[test]
    fn the_listeners_own_page_may_change_state_with_the_token() {
        let console = [
            ("authorization", "Bearer t"),
            ("origin", "http://127.0.0.1:9090"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/json"),
        ];
        assert_eq!(
            mutation_allowed(&token("t"), &headers(&console), Node::Aggregator),
            Ok(())
        );
        let as_a_form = [
            ("authorization", "Bearer t"),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "text/plain"),
        ];
        assert!(mutation_allowed(&token("t"), &headers(&as_a_form), Node::Aggregator).is_err());
    }

    #[test]
    fn only_a_tokenless_listener_off_loopback_is_exposed() {
        let lo: SocketAddr = "127.0.0.1:9090".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:9090".parse().expect("addr");
        assert!(!exposed_without_token(lo, None));
        assert!(exposed_without_token(any, None));
        assert!(!exposed_without_token(any, Some("t")));
    }
}
