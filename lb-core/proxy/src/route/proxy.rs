//! One proxied request: route by Host, steer (rules, affinity, pools, endpoints) over the live
//! snapshot and live load, prepare the head with the proxy's header rules, and answer 530
//! when no pool can take the request; `forward` takes a steered request to its origin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};

use crate::headers::{cookies, fields, is_upgrade, lists_token, strip_hop_by_hop, Forwarded};
use crate::lazy_timer::LazyTimer;
use crate::live::{origin_authority, LiveLoad};
use crate::metrics::ProxyMetrics;
use crate::origin::pool::Upstream;
use crate::route::sessions::HeaderSessions;
use lb_core::affinity::{header_session_key, AffinityKey, COOKIE_NAME};
use lb_core::config::{AffinityKind, Config, FixedResponse, LbId, OriginTls};
use lb_core::geolocation::Geolocator;
use lb_core::regions_table::RegionsTable;
use lb_core::request::{HttpFields, Mode, RequestContext};
use lb_core::steering::{AffinityUpdate, Decision, Engine, Outcome, Target};
use lb_edge::{decide_live, unix_now, HealthSource, PopInfo};

use crate::body::ProxyBody;

/// Why the proxy cannot serve a configuration.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Geolocation(#[from] lb_core::geolocation::GeolocationError),
    #[error(transparent)]
    Tls(#[from] lb_tls::TlsError),
    #[error("load balancer {load_balancer}: origin_ca_file: {source}")]
    OriginCa {
        load_balancer: String,
        source: lb_tls::TlsError,
    },
}

/// Timeouts and bounds.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// Connecting to an origin (Cloudflare's 522 after 15 s; we are stricter).
    pub connect_timeout: Duration,
    /// From sending the request to the origin's response headers, and the longest silence
    /// of the origin within a streamed response body (Cloudflare: 100 s).
    pub response_timeout: Duration,
    /// Idle pooled connections to origins are closed after this.
    pub pool_idle_timeout: Duration,
    /// A client must send a request's headers within this.
    pub header_read_timeout: Duration,
    /// Largest request head accepted (HTTP/1.1 buffer), bytes.
    pub max_header_bytes: usize,
    /// Request bodies up to this size are buffered so that a retry can replay them.
    pub replay_limit: u64,
    /// Worker threads, each with its own listening socket and origin connections.
    pub workers: usize,
}

impl Default for ProxySettings {
    fn default() -> Self {
        ProxySettings {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(100),
            pool_idle_timeout: Duration::from_secs(90),
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 << 10,
            replay_limit: 64 << 10,
            workers: std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
        }
    }
}

/// The proxy's state, shared by every connection.
pub struct Proxy {
    pub(super) config: Arc<Config>,
    pub(super) regions: Arc<RegionsTable>,
    pub(super) key: AffinityKey,
    pub(super) pop: PopInfo,
    pub(super) health: Arc<dyn HealthSource>,
    pub(super) geo: Geolocator,
    pub(super) live: Arc<LiveLoad>,
    pub(super) sessions: HeaderSessions,
    /// TLS settings towards each load balancer's origins (`None`: plain HTTP).
    pub(super) origin_tls: Vec<Option<Arc<rustls::ClientConfig>>>,
    /// `host:port` of every endpoint, `[pool][endpoint][tls]`, worked out once.
    pub(super) authorities: Vec<Vec<[String; 2]>>,
    pub(super) metrics: ProxyMetrics,
    pub settings: ProxySettings,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("pop", &self.pop)
            .finish_non_exhaustive()
    }
}

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

fn fixed(f: &FixedResponse) -> Response<ProxyBody> {
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

/// A request's `Host` fields, looked up once for routing and for the origin's head: the
/// first, and whether another follows.
struct HostFields {
    first: Option<HeaderValue>,
    more: bool,
}

impl HostFields {
    fn of(headers: &http::HeaderMap) -> HostFields {
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
fn request_host<'a, B>(
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
fn is_host_syntax(host: &[u8]) -> bool {
    if let Some(literal) = host.strip_prefix(b"[").and_then(|h| h.strip_suffix(b"]")) {
        return !literal.is_empty()
            && literal
                .iter()
                .all(|b| b.is_ascii_hexdigit() || b":.vV".contains(b));
    }
    host.iter()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(b))
}

/// Turns the client's request head into what every attempt sends: origin-form URI (the
/// connection names the origin), hop-by-hop headers removed, `X-Forwarded-*` added, and a
/// `Host` even when the client spoke HTTP/2 (which carries it in the URI).
fn prepare(
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
}

impl Peer {
    pub fn new(addr: SocketAddr, tls: bool) -> Peer {
        let forwarded_for = HeaderValue::from_str(&addr.ip().to_string()).ok();
        Peer {
            addr,
            tls,
            forwarded_for,
        }
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

/// A request after routing and steering.
// Moved once, into the forwarding's future: boxing the large variant would allocate for
// every proxied request.
#[allow(clippy::large_enum_variant)]
pub enum Begun {
    /// Answered here: no load balancer by that name, a fixed response, no pool.
    Answered(Response<ProxyBody>),
    /// For an origin: `Proxy::forward` takes it from here.
    Forward(Forwarding),
}

/// What forwarding a request needs from its routing and steering.
pub struct Forwarding {
    pub(super) start: Instant,
    pub(super) lb_index: LbId,
    pub(super) decision: Decision,
    pub(super) had_binding: bool,
    pub(super) target: Target,
    pub(super) retry: Option<Target>,
    pub(super) prepared: Prepared,
    pub(super) body: ProxyBody,
    pub(super) client_upgrade: Option<hyper::upgrade::OnUpgrade>,
}

impl Proxy {
    pub fn new(
        config: Arc<Config>,
        regions: Arc<RegionsTable>,
        key: AffinityKey,
        pop: PopInfo,
        health: Arc<dyn HealthSource>,
        settings: ProxySettings,
    ) -> Result<Proxy, SetupError> {
        let geo = Geolocator::new(&config.geolocation)?;
        let live = Arc::new(LiveLoad::new(&config));
        let mut origin_tls = Vec::new();
        for lb in &config.load_balancers {
            origin_tls.push(match lb.origin_tls {
                OriginTls::Off => None,
                OriginTls::Full => Some(lb_tls::client_config(true, None)?),
                OriginTls::Strict => Some(
                    lb_tls::client_config(false, lb.origin_ca_file.as_deref()).map_err(
                        |source| SetupError::OriginCa {
                            load_balancer: lb.name.clone(),
                            source,
                        },
                    )?,
                ),
            });
        }
        let metrics = ProxyMetrics::new(&config);
        let authorities = config
            .pools
            .iter()
            .map(|p| {
                p.endpoints
                    .iter()
                    .map(|e| [origin_authority(e, false), origin_authority(e, true)])
                    .collect()
            })
            .collect();
        Ok(Proxy {
            authorities,
            metrics,
            live,
            config,
            regions,
            key,
            pop,
            health,
            geo,
            sessions: HeaderSessions::default(),
            origin_tls,
            settings,
        })
    }

    /// A pool of origin connections for one worker. Connections are counted in the shared
    /// live load, so least_connections sees every worker's.
    pub fn upstream(&self) -> Arc<Upstream> {
        Upstream::new(
            self.live.by_authority(),
            self.settings.connect_timeout,
            self.settings.pool_idle_timeout,
            self.settings.response_timeout,
        )
    }

    /// Outstanding requests at an endpoint right now (for tests and status).
    pub fn outstanding(&self, target: Target) -> u32 {
        self.live.outstanding(target)
    }

    /// Serves one request from `client`.
    pub async fn handle(
        &self,
        upstream: &Arc<Upstream>,
        req: Request<ProxyBody>,
        client: &Peer,
        answer_timer: &mut LazyTimer,
    ) -> Response<ProxyBody> {
        match self.begin(req, client) {
            Begun::Answered(response) => response,
            Begun::Forward(f) => self
                .forward(upstream, f, answer_timer)
                .await
                .into_response(),
        }
    }

    /// Routes and steers a request: answered here, or to be forwarded (`Proxy::forward`).
    /// Not async, so a server can await the forwarding directly: each async layer a request
    /// goes through is a future copied into place for every request.
    pub fn begin(&self, mut req: Request<ProxyBody>, client: &Peer) -> Begun {
        let start = Instant::now();
        let hosts = HostFields::of(req.headers());
        let host = match request_host(&req, &hosts) {
            Ok(host) => host,
            Err(why) => {
                return Begun::Answered(text(StatusCode::BAD_REQUEST, format!("meshlb: {why}\n")))
            }
        };
        let Some(lb_index) = host.and_then(|h| self.load_balancer_named(h)) else {
            let host = host.unwrap_or_default();
            // Looked at only here, off the path of requests that route: a host that is not
            // one by its syntax is a bad request (RFC 9112 section 3.2), not an unknown name.
            if !is_host_syntax(host) {
                return Begun::Answered(text(
                    StatusCode::BAD_REQUEST,
                    "meshlb: the request's host is not a host name or address\n".into(),
                ));
            }
            return Begun::Answered(text(
                StatusCode::NOT_FOUND,
                format!(
                    "meshlb: no load balancer is named {}\n",
                    String::from_utf8_lossy(host)
                ),
            ));
        };
        let lb = self.config.lb(lb_index);
        let upgrade = is_upgrade(req.headers());
        let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
        let (decision, had_binding) = self.decide(lb_index, &req, client);
        let response = match &decision.outcome {
            Outcome::Fixed(f) => fixed(f),
            Outcome::NoPool | Outcome::Answer { .. } => text(
                status(530),
                format!(
                    "meshlb: no healthy pool can serve {} (error 1016)\n",
                    lb.name
                ),
            ),
            Outcome::Forward { target, retry } => {
                let (target, retry) = (*target, *retry);
                self.remember(&decision);
                let (parts, body) = req.into_parts();
                let prepared = prepare(parts, client, upgrade, hosts);
                return Begun::Forward(Forwarding {
                    start,
                    lb_index,
                    decision,
                    had_binding,
                    target,
                    retry,
                    prepared,
                    body,
                    client_upgrade,
                });
            }
        };
        self.record(
            start,
            lb_index,
            None,
            response.status(),
            had_binding,
            &decision,
        );
        Begun::Answered(response)
    }

    /// Per-request metrics, once the response is known.
    pub(super) fn record(
        &self,
        start: Instant,
        lb_index: LbId,
        target: Option<Target>,
        status: StatusCode,
        had_binding: bool,
        decision: &Decision,
    ) {
        self.metrics
            .request(&self.config, lb_index, target, status.as_u16());
        if let Some(m) = self.metrics.lbs.get(lb_index.0) {
            m.duration.record(start.elapsed().as_secs_f64());
            if had_binding
                && matches!(
                    decision.affinity,
                    AffinityUpdate::None | AffinityUpdate::TouchHeaderSession { .. }
                )
            {
                m.affinity_hits.increment(1);
            }
        }
    }

    /// The load balancer a request's host names (case-insensitive, a final dot allowed).
    fn load_balancer_named(&self, host: &[u8]) -> Option<LbId> {
        let host = host.strip_suffix(b".").unwrap_or(host);
        self.config
            .load_balancers
            .iter()
            .position(|lb| lb.name.as_bytes().eq_ignore_ascii_case(host))
            .map(LbId)
    }

    fn decide(&self, lb_index: LbId, req: &Request<ProxyBody>, client: &Peer) -> (Decision, bool) {
        let lb = self.config.lb(lb_index);
        let host = lb.name.as_str();
        let tls = client.tls;
        // Only rules and header affinity read headers; only rules and cookie affinity read
        // cookies. Skip collecting what nothing reads.
        let affinity = lb.settings.session_affinity.kind;
        let header_fields = if !lb.rules.is_empty() || affinity == AffinityKind::Header {
            fields(req.headers())
        } else {
            Vec::new()
        };
        let cookie_jar = if !lb.rules.is_empty() || affinity != AffinityKind::None {
            cookies(req.headers())
        } else {
            Vec::new()
        };
        let http = HttpFields {
            method: req.method().as_str(),
            host,
            path: req.uri().path(),
            query: req.uri().query().unwrap_or(""),
            headers: &header_fields,
            cookies: &cookie_jar,
            tls,
        };
        let mut ctx = RequestContext::new(Mode::Proxy, self.pop.pop(), unix_now());
        ctx.client_ip = Some(client.addr.ip());
        if !self.geo.is_empty() {
            ctx.client_location = self.geo.locate(client.addr.ip()).map(|(l, _)| l);
        }
        ctx.http = Some(http);
        ctx.affinity_cookie = http.cookie(COOKIE_NAME);
        if lb.settings.session_affinity.kind == AffinityKind::Header {
            ctx.header_binding = header_session_key(&lb.settings.session_affinity, &lb.name, &http)
                .and_then(|k| self.sessions.get(k));
        }
        ctx.load = Some(&*self.live);
        let had_binding = ctx.affinity_cookie.is_some() || ctx.header_binding.is_some();
        let engine = Engine::new(&self.config, &self.regions, &self.key);
        let decision = decide_live(&engine, lb, &*self.health, &ctx);
        (decision, had_binding)
    }

    /// Header-affinity bookkeeping the decision asks for.
    pub(super) fn remember(&self, decision: &Decision) {
        match decision.affinity {
            AffinityUpdate::BindHeaderSession { key, target } => {
                self.sessions.bind(key, target, unix_now(), 3600);
            }
            AffinityUpdate::TouchHeaderSession { key } => self.sessions.touch(key, unix_now()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
