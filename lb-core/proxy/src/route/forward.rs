//! Forwarding a steered request: its body buffered when it can be replayed, one try at the
//! endpoint and perhaps one retry elsewhere (zero-downtime failover), the origin's answer
//! bounded by the response timeout, and the response shaped for the client.
//!
//! All its waiting is in one async function, `Proxy::forward`, on purpose: every async layer a
//! request goes through is a future built and then copied into its parent's state, for every
//! request, and the copies showed in profiles (bench/proxy.sh). What needs no waiting (the
//! buffered body, each attempt's head, the retry's decision, the failure's answer, the access
//! record) is in plain functions.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Collected};
use hyper::body::Body;
use hyper_util::rt::TokioIo;
use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use tokio::io::AsyncWriteExt;

use super::own_answer::{status, text};
use super::prepare::Prepared;
use super::proxy::{ClientUpgrade, Forwarding, Proxy};
use crate::answer::Answer;
use crate::body::ProxyBody;
use crate::lazy_timer::LazyTimer;
use crate::live::{Counted, InFlight};
use crate::origin::head::OriginHead;
use crate::origin::http1::{Io, RequestHead};
use crate::origin::pool::{ConnectFailure, Origin, Reply, Upstream, UpstreamError};
use lb_core::affinity::SetCookie;
use lb_core::config::{LbId, LoadBalancer, ZeroDowntimeFailover};
use lb_core::steering::{AffinityUpdate, Decision, Target};

/// Responses up to this many bytes (by Content-Length) are buffered, larger ones streamed.
const BUFFER_RESPONSE_UP_TO: u64 = 16 << 10;

/// How an attempt at an origin failed.
enum Failure {
    /// Nothing reached the origin (refused, unreachable, connect timeout, TLS handshake
    /// failed or certificate refused): a retry is safe.
    Connect(UpstreamError),
    /// The connection broke after the request was sent but before any response byte, or
    /// the origin took too long.
    Exchange { timed_out: bool },
    /// The answer broke off after its head: never sent again.
    BrokenAnswer,
}

impl Failure {
    /// An endpoint the config does not have (a rule's stale target) counts as unreachable.
    const UNREACHABLE: Failure =
        Failure::Connect(UpstreamError::Connect(ConnectFailure::Unreachable));

    /// How an attempt that brought no answer failed, by the upstream's error.
    #[inline]
    fn of(e: UpstreamError) -> Failure {
        match e {
            UpstreamError::Exchange => Failure::Exchange { timed_out: false },
            UpstreamError::BrokenAnswer => Failure::BrokenAnswer,
            e => Failure::Connect(e),
        }
    }

    /// Whether the request is safe to send again after this: nothing reached the origin, or
    /// the connection broke before any response byte on an idempotent request (RFC 9110
    /// section 9.2.2).
    #[inline]
    fn retryable(&self, method: &Method) -> bool {
        match self {
            Failure::Connect(_) => true,
            Failure::Exchange { timed_out: false } => method.is_idempotent(),
            _ => false,
        }
    }
}

/// Where and how one attempt reaches its endpoint.
struct OriginRoute<'a> {
    /// `host:port`, for plain HTTP or TLS as the load balancer speaks to its origins.
    authority: &'a str,
    /// The endpoint's `Host` override.
    host: Option<HeaderValue>,
    tls: Option<&'a Arc<rustls::ClientConfig>>,
    /// The TLS server name: the Host the origin gets.
    tls_name: Option<String>,
    /// A private endpoint's network and the generation's routes: reached only through the
    /// private dialer.
    private: Option<(NetworkIndex, &'a PrivateNetworks)>,
}

impl OriginRoute<'_> {
    /// The request's head as this route sends it to the origin.
    #[inline]
    fn request_head<'p>(&'p self, p: &'p Prepared) -> RequestHead<'p> {
        RequestHead {
            method: &p.method,
            target: p.target.as_str(),
            headers: &p.headers,
            forwarded: Some(&p.forwarded),
            host: self.host.as_ref(),
            trailers: p.trailers,
        }
    }
}

/// The TLS server name for a Host: without its port, lower case, without a trailing dot
/// (names compare case-insensitively, RFC 6066 section 3), so that every spelling a client
/// may send is one name — and one variant of the origin's pooled connections.
fn tls_server_name(host: &str) -> String {
    lb_tls::host_without_port(host)
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

impl Proxy {
    /// Forwards a request `begin` steered to an origin, and records its metrics: the body
    /// buffered when a retry could replay it, the first try and perhaps one retry, the answer
    /// or the failure's own, then the record and the access log.
    pub async fn forward(
        &self,
        upstream: &Arc<Upstream>,
        f: Forwarding,
        answer_timer: &mut LazyTimer,
    ) -> Answer {
        let Forwarding {
            start,
            lb_index,
            decision,
            had_binding,
            target: first_target,
            retry,
            prepared: p,
            body,
            client_upgrade: upgrade,
            log: mut record,
        } = f;
        let lb = self.config.lb(lb_index);
        let mut last_target = first_target;
        let response = 'answer: {
            let (first_body, body_for_retry) = if self.replayable(&body) {
                match body.collect().await {
                    Ok(collected) => buffered(collected, &mut record),
                    Err(e) => break 'answer body_not_received(&e),
                }
            } else {
                (body, None)
            };
            // The first try, then perhaps one retry.
            let (mut target, mut body, mut used_retry) = (first_target, first_body, false);
            // An answer leaves the loop at once, as the client's: the response is a few hundred
            // bytes, copied at every step it is handed on.
            let failure = loop {
                let in_flight = self.live.start(target);
                last_target = target;
                let sent_at = record.as_ref().map(|_| std::time::Instant::now());
                let failure = 'attempt: {
                    let Some(route) = self.origin_route(lb_index, target, &p) else {
                        break 'attempt Failure::UNREACHABLE;
                    };
                    let head = route.request_head(&p);
                    let origin = self.origin(&route, target);
                    let deadline =
                        crate::lazy_timer::deadline_after(self.settings.response_timeout);
                    let mut send = pin!(upstream.send(origin, &head, body, BUFFER_RESPONSE_UP_TO));
                    match poll_fn(|cx| answer_timer.poll_within(send.as_mut(), deadline, cx)).await
                    {
                        Some(Ok(answer)) => {
                            note_first_byte(record.as_mut(), sent_at, &answer.0);
                            let cookie = affinity_cookie(&decision, used_retry, lb);
                            break 'answer for_client(answer, cookie, in_flight, upgrade, lb);
                        }
                        Some(Err(e)) => Failure::of(e),
                        None => Failure::Exchange { timed_out: true },
                    }
                };
                drop(in_flight);
                let retry = retry.filter(|_| !used_retry);
                match self.retry_after(&failure, &p, lb_index, retry, body_for_retry.as_ref()) {
                    Some(again) => (target, body, used_retry) = (again.0, again.1, true),
                    None => break failure,
                }
            };
            self.failed(&failure, lb_index, lb)
        };
        self.record(
            start,
            lb_index,
            Some(first_target),
            response.status(),
            had_binding,
            &decision,
        );
        self.access_logged(response, record, lb_index, (first_target, last_target))
    }

    /// Whether the request's body is buffered, so that a retry can send it again: it has
    /// ended, or its announced length fits the replay limit.
    #[inline]
    fn replayable(&self, body: &ProxyBody) -> bool {
        body.is_end_stream()
            || body
                .size_hint()
                .exact()
                .is_some_and(|n| n <= self.settings.replay_limit)
    }

    /// The origin's connection settings for one attempt along `route`.
    #[inline]
    fn origin<'r>(&'r self, route: &'r OriginRoute<'_>, target: Target) -> Origin<'r> {
        Origin {
            authority: route.authority,
            tls: route.tls.zip(route.tls_name.as_deref()),
            opened: self.live.connection_counter(target),
            private: route.private,
        }
    }

    /// The retry after `failure`, with the buffered body to send again, when it is safe
    /// (`Failure::retryable`) and a retry is left; counted in the load balancer's retries.
    fn retry_after(
        &self,
        failure: &Failure,
        p: &Prepared,
        lb_index: LbId,
        retry: Option<Target>,
        replay: Option<&Bytes>,
    ) -> Option<(Target, ProxyBody)> {
        let retryable = failure.retryable(&p.method);
        let (true, Some(retry), Some(bytes)) = (retryable, retry, replay) else {
            return None;
        };
        if let Some(m) = self.metrics.lbs.get(lb_index.0) {
            m.retries.increment(1);
        }
        Some((retry, ProxyBody::bytes(bytes.clone())))
    }

    /// The answer when no attempt brought one (`failure_response`), counted as the load
    /// balancer's error.
    fn failed(&self, failure: &Failure, lb_index: LbId, lb: &LoadBalancer) -> Answer {
        let (code, response) = failure_response(failure, lb);
        if let Some(m) = self.metrics.lbs.get(lb_index.0) {
            m.error(code);
        }
        Answer::Made(response)
    }

    /// The answer with its access record completed and handed on (`logged`), when the access
    /// log is on and the request has a record; `targets` are the first and last tried.
    #[inline]
    fn access_logged(
        &self,
        response: Answer,
        record: Option<crate::access::Pending>,
        lb_index: LbId,
        targets: (Target, Target),
    ) -> Answer {
        match (record, &self.settings.access_log) {
            (Some(mut r), Some(log)) => {
                let tls = matches!(self.origin_tls.get(lb_index.0), Some(Some(_)));
                crate::access::sent(&mut r, targets, tls);
                logged(response, r, log)
            }
            _ => response,
        }
    }

    /// How to reach `target` for this load balancer; `None` for an endpoint the config does
    /// not have (a rule's stale target), which counts as refused.
    fn origin_route(
        &self,
        lb_index: LbId,
        target: Target,
        p: &Prepared,
    ) -> Option<OriginRoute<'_>> {
        let endpoint = self
            .config
            .pool(target.pool)
            .endpoints
            .get(target.endpoint.0)?;
        let authorities = self
            .authorities
            .get(target.pool.0)
            .and_then(|p| p.get(target.endpoint.0))?;
        let host = endpoint
            .host_header
            .as_deref()
            .and_then(|h| HeaderValue::from_str(h).ok());
        let tls = self
            .origin_tls
            .get(lb_index.0)
            .and_then(Option::as_ref)
            .map(|t| &t.client);
        let tls_name = tls.map(|_| {
            host.as_ref()
                .or_else(|| p.headers.get(header::HOST))
                .and_then(|h| h.to_str().ok())
                .map(tls_server_name)
                .unwrap_or_default()
        });
        Some(OriginRoute {
            authority: &authorities[usize::from(tls.is_some())],
            host,
            tls,
            tls_name,
            private: endpoint.network.map(|n| (n, &self.config.private)),
        })
    }
}

/// The request's body as buffered for the first try and kept for a retry, its length noted
/// in the access record.
#[inline]
fn buffered(
    collected: Collected<Bytes>,
    record: &mut Option<crate::access::Pending>,
) -> (ProxyBody, Option<Bytes>) {
    let bytes = collected.to_bytes();
    if let Some(r) = record.as_mut() {
        r.bytes_in = bytes.len() as u64;
    }
    (ProxyBody::bytes(bytes.clone()), Some(bytes))
}

/// The answer to a request whose body did not arrive whole: 408 when it took too long, 400
/// when it broke off.
fn body_not_received(e: &std::io::Error) -> Answer {
    if e.kind() == std::io::ErrorKind::TimedOut {
        Answer::Made(text(
            StatusCode::REQUEST_TIMEOUT,
            "meshlb: the request body did not arrive in time\n".into(),
        ))
    } else {
        Answer::Made(text(
            StatusCode::BAD_REQUEST,
            "meshlb: the request body broke off\n".into(),
        ))
    }
}

/// Notes in the access record how long the origin took to its first byte since `sent_at`,
/// and to connect when the answer came on a new connection.
#[inline]
fn note_first_byte(
    record: Option<&mut crate::access::Pending>,
    sent_at: Option<std::time::Instant>,
    resp: &OriginHead,
) {
    if let (Some(r), Some(at)) = (record, sent_at) {
        r.first_byte = Some(at.elapsed());
        r.connect = resp.connected_in;
    }
}

/// The answer with the request id returned, its record finished now or, for a streamed
/// body, when the body has been sent (`live::Counted`).
fn logged(
    answer: Answer,
    mut record: crate::access::Pending,
    log: &crate::access::AccessLog,
) -> Answer {
    match answer {
        Answer::Made(mut response) => {
            crate::access::answered_here(record, log, &mut response);
            Answer::Made(response)
        }
        Answer::Origin(mut head, body) => {
            head.fields.set_request_id(record.request_id.clone());
            match body {
                ProxyBody::Counted(mut counted) => {
                    record.status = head.status.as_u16();
                    counted.log_at_end(record, log.clone());
                    Answer::Origin(head, ProxyBody::Counted(counted))
                }
                body => {
                    let length = body.size_hint().exact();
                    crate::access::finish(record, log, head.status.as_u16(), length);
                    Answer::Origin(head, body)
                }
            }
        }
    }
}

/// The affinity cookie to send with the answer: the retry's when the retry answered and
/// `zero_downtime_failover` is sticky, none when it is temporary, else the decision's.
fn affinity_cookie(decision: &Decision, used_retry: bool, lb: &LoadBalancer) -> Option<SetCookie> {
    match (&decision.affinity, used_retry) {
        (_, true) if decision.retry_cookie.is_some() => decision.retry_cookie.clone(),
        (_, true)
            if lb.settings.session_affinity.zero_downtime_failover
                == ZeroDowntimeFailover::Temporary =>
        {
            None
        }
        (AffinityUpdate::SetCookie(c), _) => Some(c.clone()),
        _ => None,
    }
}

/// The origin's answer as the client gets it: the affinity cookie added (its hop-by-hop
/// fields stayed on the origin's hop, `interpret`), the body whole, streamed (counted as
/// outstanding until it ends) or tunnelled.
fn for_client(
    (mut head, reply): (OriginHead, Reply),
    cookie: Option<SetCookie>,
    in_flight: InFlight,
    client_upgrade: Option<ClientUpgrade>,
    lb: &LoadBalancer,
) -> Answer {
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c.header_value()).ok()) {
        head.fields.set_cookie(c);
    }
    match reply {
        // A small response of known length was read whole, so the client gets head and
        // body in one write (what nginx's proxy buffering does).
        Reply::Whole(bytes) => {
            drop(in_flight);
            Answer::Origin(head, ProxyBody::bytes(bytes))
        }
        Reply::Streamed(body) => Answer::Origin(
            head,
            ProxyBody::Counted(Box::new(Counted::new(body, Some(in_flight)))),
        ),
        Reply::Upgraded(origin_io, early) => match client_upgrade {
            Some(client_side) => {
                tokio::spawn(tunnel(client_side, origin_io, early, in_flight));
                let mut response = Answer::Origin(head, ProxyBody::Empty).into_response();
                // The client switches protocols with this hop's `Connection: upgrade`.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                Answer::Made(response)
            }
            None => Answer::Made(text(
                StatusCode::BAD_GATEWAY,
                format!(
                    "meshlb: the origin of {} switched protocols unasked\n",
                    lb.name
                ),
            )),
        },
    }
}

/// What the client gets when no attempt brought an answer: Cloudflare's code for it
/// (521-526; 502 where Cloudflare has none of these), with a short body naming the load
/// balancer and the reason.
fn failure_response(failure: &Failure, lb: &LoadBalancer) -> (u16, Response<ProxyBody>) {
    let (code, why) = match failure {
        Failure::Connect(UpstreamError::Connect(ConnectFailure::Refused)) => {
            (521, "refused the connection")
        }
        Failure::Connect(UpstreamError::Connect(ConnectFailure::TimedOut)) => (
            522,
            "did not accept the connection within the connect timeout",
        ),
        Failure::Connect(UpstreamError::Connect(ConnectFailure::Unreachable)) => (
            523,
            "is unreachable (no route to it, or its name does not resolve)",
        ),
        Failure::Exchange { timed_out: true } => {
            (524, "did not answer within the response timeout")
        }
        Failure::Connect(UpstreamError::TlsHandshake) => (525, "failed the TLS handshake"),
        Failure::Connect(UpstreamError::TlsCertificate) => (526, "has an invalid certificate"),
        Failure::BrokenAnswer => (502, "broke off its answer"),
        Failure::Connect(UpstreamError::Connect(ConnectFailure::Local)) => (
            502,
            "could not be connected to: this node is out of connections",
        ),
        // Cloudflare's 530 with error 1033: the tunnel is not connected. The body names no
        // private address.
        Failure::Connect(UpstreamError::Connect(ConnectFailure::NoTunnel)) => {
            let body = format!(
                "meshlb: the origin of {} is in a private network that no live tunnel connection reaches (error 1033)\n",
                lb.name
            );
            return (530, text(status(530), body));
        }
        Failure::Connect(UpstreamError::Exchange | UpstreamError::BrokenAnswer)
        | Failure::Exchange { timed_out: false } => {
            (502, "closed the connection without answering")
        }
    };
    let body = if code == 502 {
        format!("meshlb: the origin of {} {why}\n", lb.name)
    } else {
        format!("meshlb: the origin of {} {why} (error {code})\n", lb.name)
    };
    (code, text(status(code), body))
}

/// Carries a WebSocket (or any upgraded protocol) both ways until either side closes; it
/// counts as outstanding all along, holds its client connection's place under the worker's
/// connection limit, and its origin connection is never pooled again.
async fn tunnel(client_side: ClientUpgrade, mut origin: Io, early: Bytes, _in_flight: InFlight) {
    let ClientUpgrade { on, slot: _slot } = client_side;
    let Ok(client) = on.await else {
        return;
    };
    let mut client = TokioIo::new(client);
    if !early.is_empty() && client.write_all(&early).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut origin).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::config::Config;
    use lb_core::RegionsTable;

    #[test]
    fn every_spelling_of_a_host_is_one_tls_server_name() {
        for host in [
            "www.example.test",
            "WWW.Example.Test",
            "www.example.test.",
            "www.EXAMPLE.test.:8443",
        ] {
            assert_eq!(tls_server_name(host), "www.example.test", "{host}");
        }
        assert_eq!(tls_server_name("[2001:db8::1]:443"), "2001:db8::1");
    }

    #[test]
    fn no_tunnel_is_cloudflares_530_with_error_1033_naming_no_address() {
        let config = Config::parse(
            "t.toml",
            "[[pools]]\nname = \"p\"\norigins = [{ name = \"a\", address = \"127.0.0.1\" }]\n[[load_balancers]]\nname = \"www.example.test\"\nproxied = true\ndefault_pools = [\"p\"]\n",
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config");
        let failure = Failure::Connect(UpstreamError::Connect(ConnectFailure::NoTunnel));
        let (code, response) = failure_response(&failure, &config.load_balancers[0]);
        assert_eq!((code, response.status().as_u16()), (530, 530));
        let ProxyBody::Bytes(Some(body)) = response.into_body() else {
            panic!("a whole body");
        };
        let text = String::from_utf8_lossy(&body).into_owned();
        assert!(
            text.contains("(error 1033)") && text.contains("www.example.test"),
            "{text}"
        );
        assert!(!text.contains("127.0.0.1"), "{text}");
    }

    #[test]
    fn each_failure_has_cloudflares_code_and_names_the_load_balancer() {
        let config = Config::parse(
            "t.toml",
            "[[pools]]\nname = \"p\"\norigins = [{ name = \"a\", address = \"127.0.0.1\" }]\n[[load_balancers]]\nname = \"www.example.test\"\nproxied = true\ndefault_pools = [\"p\"]\n",
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config");
        let lb = &config.load_balancers[0];
        let connect = |f| Failure::Connect(UpstreamError::Connect(f));
        for (failure, code, words) in [
            (
                connect(ConnectFailure::Refused),
                521,
                "refused the connection",
            ),
            (
                connect(ConnectFailure::TimedOut),
                522,
                "within the connect timeout",
            ),
            (connect(ConnectFailure::Unreachable), 523, "unreachable"),
            (
                Failure::Exchange { timed_out: true },
                524,
                "response timeout",
            ),
            (
                Failure::Connect(UpstreamError::TlsHandshake),
                525,
                "TLS handshake",
            ),
            (
                Failure::Connect(UpstreamError::TlsCertificate),
                526,
                "invalid certificate",
            ),
            (
                Failure::Exchange { timed_out: false },
                502,
                "without answering",
            ),
            (Failure::BrokenAnswer, 502, "broke off"),
            (connect(ConnectFailure::Local), 502, "out of connections"),
        ] {
            let (got, response) = failure_response(&failure, lb);
            assert_eq!((got, response.status().as_u16()), (code, code));
            let ProxyBody::Bytes(Some(body)) = response.into_body() else {
                panic!("a whole body");
            };
            let text = String::from_utf8_lossy(&body).into_owned();
            assert!(
                text.contains("www.example.test") && text.contains(words),
                "{code}: {text}"
            );
            assert_eq!(
                text.contains(&format!("(error {code})")),
                code != 502,
                "{text}"
            );
        }
    }

    #[test]
    fn connect_errors_are_told_apart_as_cloudflare_does() {
        use std::io::{Error, ErrorKind};
        for (kind, want) in [
            (ErrorKind::ConnectionRefused, ConnectFailure::Refused),
            (ErrorKind::TimedOut, ConnectFailure::TimedOut),
            (ErrorKind::HostUnreachable, ConnectFailure::Unreachable),
            (ErrorKind::NetworkUnreachable, ConnectFailure::Unreachable),
            (ErrorKind::AddrNotAvailable, ConnectFailure::Local),
            (ErrorKind::OutOfMemory, ConnectFailure::Local),
        ] {
            assert_eq!(ConnectFailure::of(&Error::from(kind)), want, "{kind:?}");
        }
    }
}
