//! HTTP and HTTPS (Cloudflare's semantics): method, path, headers, Host precedence, expected
//! codes, expected body in the first 10 KiB, redirects fail unless followed, certificates
//! verified unless `allow_insecure`.
//!
//! Built on hyper's client connection rather than reqwest: a probe needs a fresh connection
//! (no pool hiding a dead listener behind a kept-alive socket) and the connect, TLS and
//! first-byte times apart, which reqwest does not expose.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use lb_core::config::{Address, HttpCheck, HttpMethod, OriginTls, OriginTlsSettings};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

use super::{socket_addr, tls, Check, Dialer};
use crate::failure::{Failure, Phase, SetupError};
use crate::outcome::{Attempt, HttpTimings};
use crate::target::ProbeTarget;

/// Cloudflare reads the first 10 KiB of the body for `expected_body`.
const BODY_LIMIT: usize = 10 * 1024;
/// Redirect hops followed before giving up.
const MAX_REDIRECTS: u32 = 5;

pub(super) struct HttpMonitor {
    check: HttpCheck,
    /// `None` for plain http.
    tls: Option<TlsConnector>,
    /// Built once: redirects to https from an http monitor need a TLS config too.
    tls_for_redirects: TlsConnector,
    /// `expected_body` lower-cased once.
    expected_body: Option<Vec<u8>>,
    extra_headers: Vec<(HeaderName, HeaderValue)>,
    dial: Dialer,
}

impl HttpMonitor {
    /// With `zone` (a `probe_zone` monitor), TLS as the proxy reaches the zone's origins
    /// (`lb-core/src/config/validate/probe_zone.rs`): its mode, trust anchors and client
    /// certificate take the place of the monitor's `allow_insecure` and CA.
    pub(super) fn new(
        check: &HttpCheck,
        https: bool,
        zone: Option<&OriginTlsSettings>,
        dial: Dialer,
    ) -> Result<Self, SetupError> {
        let config = match zone.filter(|z| z.mode != OriginTls::Off) {
            Some(z) => lb_tls::client_config_with(
                z.accepts_any_certificate(),
                z.trust_anchors(),
                z.identity(),
            )?,
            None => tls::client_config(check.allow_insecure, check.ca_file.as_deref())?,
        };
        let connector = TlsConnector::from(config);
        let mut extra_headers = Vec::new();
        for (name, values) in &check.headers {
            if name.eq_ignore_ascii_case("host") {
                continue; // resolved per target (endpoint Host wins)
            }
            let bad = |reason: String| SetupError::Header {
                name: name.clone(),
                reason,
            };
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
            for v in values {
                extra_headers.push((
                    n.clone(),
                    HeaderValue::from_str(v).map_err(|e| bad(e.to_string()))?,
                ));
            }
        }
        Ok(HttpMonitor {
            check: check.clone(),
            tls: https.then(|| connector.clone()),
            tls_for_redirects: connector,
            expected_body: check
                .expected_body
                .as_ref()
                .map(|b| b.to_lowercase().into_bytes()),
            extra_headers,
            dial,
        })
    }
}

/// Where one request of the probe goes.
struct Hop {
    addr: SocketAddr,
    tls: Option<TlsConnector>,
    /// Host header, and the TLS server name.
    host: String,
    path_and_query: String,
}

impl Check for HttpMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            let addr = match socket_addr(&target.address, target.port).await {
                Ok(a) => a,
                Err(e) => return Attempt::fail(start.elapsed(), None, e),
            };
            let mut hop = Hop {
                addr,
                tls: self.tls.clone(),
                host: target.host.clone(),
                path_and_query: self.check.path.clone(),
            };
            let deadline = start + timeout;
            let mut redirects = 0;
            loop {
                let (attempt, location) = self.request(target, &hop, start, deadline).await;
                let Some(location) = location else {
                    return attempt;
                };
                // A 3xx that did not match expected_codes.
                if !self.check.follow_redirects {
                    return Attempt {
                        reason: Some(Failure::RedirectNotFollowed {
                            code: attempt.code.unwrap_or(0),
                            location,
                        }),
                        ..attempt
                    };
                }
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Attempt {
                        reason: Some(Failure::TooManyRedirects(MAX_REDIRECTS)),
                        ..attempt
                    };
                }
                match self.next_hop(&hop, &location).await {
                    Ok(next) => hop = next,
                    Err(e) => {
                        return Attempt {
                            reason: Some(e),
                            ..attempt
                        }
                    }
                }
            }
        })
    }
}

impl HttpMonitor {
    /// One request; returns the attempt and, for a 3xx that is not an expected code, its
    /// Location.
    async fn request(
        &self,
        target: &ProbeTarget,
        hop: &Hop,
        start: Instant,
        deadline: Instant,
    ) -> (Attempt, Option<String>) {
        let mut timings = HttpTimings::default();
        let fail = |t: &HttpTimings, code: Option<u32>, reason: Failure| {
            let mut a = Attempt::fail(start.elapsed(), code, reason);
            a.timings = Some(HttpTimings {
                total: start.elapsed(),
                ..*t
            });
            a
        };
        let connect = self.dial.connect(target, hop.addr);
        let stream = match tokio::time::timeout_at(deadline.into(), connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return (fail(&timings, None, e), None),
            Err(_) => {
                return (
                    fail(&timings, None, Failure::TimeoutIn(Phase::Connect)),
                    None,
                )
            }
        };
        timings.connect = start.elapsed();
        let response = match &hop.tls {
            None => {
                timings.tls = timings.connect;
                self.exchange(stream, target, hop, start, deadline, &mut timings)
                    .await
            }
            Some(connector) => {
                let name = match tls::server_name(&hop.host) {
                    Ok(n) => n,
                    Err(e) => return (fail(&timings, None, Failure::Tls(e.to_string())), None),
                };
                let tls_stream =
                    match tokio::time::timeout_at(deadline.into(), connector.connect(name, stream))
                        .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => return (fail(&timings, None, tls::reason(&e)), None),
                        Err(_) => {
                            return (
                                fail(&timings, None, Failure::TimeoutIn(Phase::TlsHandshake)),
                                None,
                            )
                        }
                    };
                timings.tls = start.elapsed();
                self.exchange(tls_stream, target, hop, start, deadline, &mut timings)
                    .await
            }
        };
        match response {
            Err(reason) => (fail(&timings, None, reason), None),
            Ok((status, location, body_ok)) => {
                let code = Some(u32::from(status));
                timings.total = start.elapsed();
                let mut attempt = if !self.check.expected_codes.matches(status) {
                    if (300..400).contains(&status) {
                        if let Some(loc) = location {
                            let mut a = Attempt::fail(
                                timings.first_byte,
                                code,
                                Failure::UnexpectedCode(status),
                            );
                            a.timings = Some(timings);
                            return (a, Some(loc));
                        }
                    }
                    Attempt::fail(timings.first_byte, code, Failure::UnexpectedCode(status))
                } else if !body_ok {
                    Attempt::fail(timings.first_byte, code, Failure::BodyMismatch)
                } else {
                    Attempt::pass(timings.first_byte, code)
                };
                attempt.timings = Some(timings);
                (attempt, None)
            }
        }
    }

    /// Sends the request over an established stream; returns (status, Location, body matched).
    async fn exchange<S>(
        &self,
        stream: S,
        target: &ProbeTarget,
        hop: &Hop,
        start: Instant,
        deadline: Instant,
        timings: &mut HttpTimings,
    ) -> Result<(u16, Option<String>, bool), Failure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
                .await
                .map_err(|e| Failure::Http(e.to_string()))?;
        // The connection task ends with the probe: abort it so a hanging server cannot keep it.
        let driver = AbortOnDrop(tokio::spawn(async move {
            let _ = conn.await;
        }));
        let method = match self.check.method {
            HttpMethod::Get => Method::GET,
            HttpMethod::Head => Method::HEAD,
        };
        let mut req = Request::builder()
            .method(method)
            .uri(hop.path_and_query.as_str())
            .header(http::header::HOST, hop.host.as_str())
            .header(http::header::USER_AGENT, target.user_agent())
            .header(http::header::CONNECTION, "close");
        for (n, v) in &self.extra_headers {
            req = req.header(n, v);
        }
        let req = req
            .body(Empty::new())
            .map_err(|e| Failure::Http(format!("bad request: {e}")))?;
        let response: http::Response<Incoming> =
            match tokio::time::timeout_at(deadline.into(), sender.send_request(req)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return Err(hyper_reason(&e)),
                Err(_) => return Err(Failure::TimeoutIn(Phase::WaitingForResponse)),
            };
        timings.first_byte = start.elapsed();
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .map(str::to_string);
        let body_ok = match &self.expected_body {
            None => true,
            Some(needle) => {
                let head = read_head(response.into_body(), deadline).await?;
                contains_ignore_case(&head, needle)
            }
        };
        drop(driver);
        Ok((status, location, body_ok))
    }

    async fn next_hop(&self, hop: &Hop, location: &str) -> Result<Hop, Failure> {
        let scheme = if hop.tls.is_some() { "https" } else { "http" };
        // The base is where we really connected: the Host's name with the port in use, so a
        // relative Location stays on the endpoint's port even when the Host names none.
        let host_name = tls::host_without_port(&hop.host);
        let authority = if host_name.contains(':') {
            format!("[{host_name}]:{}", hop.addr.port())
        } else {
            format!("{host_name}:{}", hop.addr.port())
        };
        let base = url::Url::parse(&format!("{scheme}://{authority}{}", hop.path_and_query))
            .map_err(|e| Failure::RedirectBase(e.to_string()))?;
        let next = base.join(location).map_err(|e| Failure::RedirectInvalid {
            location: location.to_string(),
            detail: e.to_string(),
        })?;
        let tls = match next.scheme() {
            "http" => None,
            "https" => Some(self.tls_for_redirects.clone()),
            other => return Err(Failure::RedirectScheme(other.to_string())),
        };
        let host = next
            .host_str()
            .ok_or(Failure::RedirectWithoutHost)?
            .to_string();
        let port = next.port_or_known_default().unwrap_or(80);
        // Same host as before: keep the endpoint's address (the Host may not resolve here).
        let same = host.eq_ignore_ascii_case(tls::host_without_port(&hop.host));
        let addr = if same {
            SocketAddr::new(hop.addr.ip(), port)
        } else {
            socket_addr(&Address::Hostname(host.clone()), port).await?
        };
        // Keep the Host as it was for a same-host hop (the origin expects it); otherwise the
        // Location's authority.
        let host_header = if same {
            hop.host.clone()
        } else {
            match next.port() {
                Some(p) => format!("{host}:{p}"),
                None => host,
            }
        };
        let mut path = next.path().to_string();
        if let Some(q) = next.query() {
            path.push('?');
            path.push_str(q);
        }
        Ok(Hop {
            addr,
            tls,
            host: host_header,
            path_and_query: path,
        })
    }
}

/// Reads at most the first 10 KiB of a body; never more, however large the body.
async fn read_head(mut body: Incoming, deadline: Instant) -> Result<Vec<u8>, Failure> {
    let mut head = Vec::with_capacity(1024);
    while head.len() < BODY_LIMIT {
        match tokio::time::timeout_at(deadline.into(), body.frame()).await {
            Err(_) => return Err(Failure::TimeoutIn(Phase::ReadingBody)),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(hyper_reason(&e)),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    let room = BODY_LIMIT - head.len();
                    head.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
        }
    }
    Ok(head)
}

/// Case-insensitive substring (Cloudflare: expected_body is matched case-insensitively).
fn contains_ignore_case(haystack: &[u8], lower_needle: &[u8]) -> bool {
    if lower_needle.is_empty() {
        return true;
    }
    let hay = String::from_utf8_lossy(haystack).to_lowercase();
    hay.as_bytes()
        .windows(lower_needle.len())
        .any(|w| w == lower_needle)
}

fn hyper_reason(e: &hyper::Error) -> Failure {
    if e.is_incomplete_message() {
        return Failure::ClosedEarly;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Failure::from_io(io);
        }
        source = s.source();
    }
    Failure::Http(e.to_string())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::contains_ignore_case;

    #[test]
    fn body_match_is_case_insensitive() {
        assert!(contains_ignore_case(b"All Systems OK", b"systems ok"));
        assert!(!contains_ignore_case(b"All Systems OK", b"down"));
        assert!(contains_ignore_case(b"", b""));
    }
}
