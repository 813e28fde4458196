//! One proxied request: route by Host, steer (rules, affinity, pools, endpoints) over the live
//! snapshot and live load, prepare the head with the proxy's header rules, and answer 530
//! when no pool can take the request; `forward` takes a steered request to its origin.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Response, StatusCode};

use super::host::{is_host_syntax, request_host, HostFields};
use super::origin_tls::{self, OriginTlsConfig};
use super::own_answer::{fixed, status, text};
use super::prepare::{prepare, Peer, Prepared};
use crate::headers::{cookies, fields, is_upgrade, transfer_coding_problem};
use crate::lazy_timer::LazyTimer;
use crate::live::{origin_authority, LiveLoad};
use crate::metrics::ProxyMetrics;
use crate::origin::pool::Upstream;
use crate::route::sessions::HeaderSessions;
use lb_core::affinity::{header_session_key, AffinityKey, COOKIE_NAME};
use lb_core::clock::unix_secs;
use lb_core::config::{AffinityKind, Config, LbId, Renumbering};
use lb_core::geolocation::Geolocator;
use lb_core::regions_table::RegionsTable;
use lb_core::request::{HttpFields, Mode, RequestContext};
use lb_core::steering::{AffinityUpdate, Decision, Engine, Outcome, Target};
use lb_edge::{decide_live, Generation, PopInfo};

use crate::access;
use crate::body::ProxyBody;
use crate::client::listener::ConnectionSlot;

/// Why the proxy cannot serve a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ProxyConfigError {
    #[error(transparent)]
    Geolocation(#[from] lb_core::geolocation::GeolocationError),
    #[error(transparent)]
    Tls(#[from] lb_tls::TlsError),
    #[error("load balancer {load_balancer}: its origin TLS (origin_ca_file, origin_client_cert): {error}")]
    OriginCa {
        load_balancer: String,
        error: lb_tls::TlsError,
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
    /// Header-affinity sessions kept (`route/sessions.rs`); the least recently used go first.
    pub max_header_sessions: usize,
    /// A client's request body: the longest wait for its next bytes...
    pub body_read_timeout: Duration,
    /// ...and for all of it (`body.rs`).
    pub body_timeout: Duration,
    /// The longest a write to a client may wait for it to read (`lb-core/edge/src/timed_write.rs`): a
    /// client that stops reading frees the origin connection and its outstanding count.
    pub send_timeout: Duration,
    /// An HTTP/2 connection with no request in flight for this long is closed (GOAWAY).
    pub h2_idle_timeout: Duration,
    /// HTTP/2 PING interval; a client that does not answer one within the interval is cut.
    pub h2_keep_alive_interval: Duration,
    /// Client connections each worker serves at once; more are closed at accept and counted.
    pub max_connections_per_worker: usize,
    /// The access log (`--access-log`); with it, every request also gets a request id.
    pub access_log: Option<crate::access::AccessLog>,
    /// How private endpoints are reached (through this PoP's tunnel connections); `None`:
    /// they are not, and get 530 (`lb_edge::private_dial`).
    pub private: Option<lb_edge::PrivateDialer>,
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
            max_header_sessions: super::sessions::DEFAULT_MAX_HEADER_SESSIONS,
            body_read_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(300),
            send_timeout: Duration::from_secs(30),
            h2_idle_timeout: Duration::from_secs(60),
            h2_keep_alive_interval: Duration::from_secs(20),
            max_connections_per_worker: 16_384,
            access_log: None,
            private: None,
        }
    }
}

/// The proxy's state for one config generation, shared by every connection. A reload builds
/// the next one with [`Proxy::reloaded`] and swaps it in (`lb_edge::Serving`).
pub struct Proxy {
    /// The generation's config (`generation.config()`), at hand.
    pub(super) config: Arc<Config>,
    pub(super) regions: Arc<RegionsTable>,
    pub(super) key: AffinityKey,
    pub(super) pop: PopInfo,
    pub(super) generation: Arc<Generation>,
    pub(super) geo: Geolocator,
    pub(super) live: Arc<LiveLoad>,
    pub(super) sessions: Arc<HeaderSessions>,
    /// TLS settings towards each load balancer's origins (`None`: plain HTTP).
    pub(super) origin_tls: Vec<Option<OriginTlsConfig>>,
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

/// What a reload does not change (the node's flags): the regions table, the affinity key, the
/// PoP, the listeners' settings.
type Fixed = (Arc<RegionsTable>, AffinityKey, PopInfo, ProxySettings);

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

/// A client's side of a protocol upgrade, and its connection's place under the worker's
/// connection limit (client/listener.rs), which the tunnel holds until it ends.
pub struct ClientUpgrade {
    pub(super) on: hyper::upgrade::OnUpgrade,
    pub(super) slot: Option<ConnectionSlot>,
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
    pub(super) client_upgrade: Option<ClientUpgrade>,
    /// The request's access record, when the access log is on.
    pub(super) log: Option<access::Pending>,
}

impl Proxy {
    pub fn new(
        generation: Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: AffinityKey,
        pop: PopInfo,
        settings: ProxySettings,
    ) -> Result<Proxy, ProxyConfigError> {
        let live = Arc::new(LiveLoad::new(generation.config()));
        let origin_tls = origin_tls::for_load_balancers(generation.config(), None)?;
        let sessions = Arc::new(HeaderSessions::new(settings.max_header_sessions));
        Self::build(
            generation,
            (regions, key, pop, settings),
            live,
            sessions,
            origin_tls,
        )
    }

    /// The proxy of the next generation: the same listeners' settings, PoP and affinity key;
    /// the live counts and header-affinity sessions of every endpoint that is still the same
    /// origin carried over (`lb_core::config::Renumbering`), so least-outstanding and
    /// least-connections steering and header sessions do not start from nothing. Requests in
    /// flight on this proxy finish on it.
    pub fn reloaded(&self, generation: Arc<Generation>) -> Result<Proxy, ProxyConfigError> {
        let (old, new) = (&*self.config, &**generation.config());
        let origin_tls = origin_tls::for_load_balancers(new, Some((old, &self.origin_tls)))?;
        let live = Arc::new(LiveLoad::carried(new, Some((old, &self.live))));
        let sessions = Arc::new(self.sessions.carried(&Renumbering::between(old, new)));
        Self::build(
            generation,
            (
                Arc::clone(&self.regions),
                self.key.clone(),
                self.pop.clone(),
                self.settings.clone(),
            ),
            live,
            sessions,
            origin_tls,
        )
    }

    /// Takes over `old`'s header sessions again, right before this proxy replaces it: the
    /// bindings made since [`Proxy::reloaded`] copied them are not lost.
    pub fn take_sessions_from(&mut self, old: &Proxy) {
        let map = Renumbering::between(&old.config, &self.config);
        self.sessions = Arc::new(old.sessions.carried(&map));
    }

    fn build(
        generation: Arc<Generation>,
        (regions, key, pop, settings): Fixed,
        live: Arc<LiveLoad>,
        sessions: Arc<HeaderSessions>,
        origin_tls: Vec<Option<OriginTlsConfig>>,
    ) -> Result<Proxy, ProxyConfigError> {
        let config = Arc::clone(generation.config());
        let geo = Geolocator::new(&config.geolocation)?;
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
            generation,
            geo,
            sessions,
            origin_tls,
            settings,
        })
    }

    /// A pool of origin connections for one worker. Connections are counted in the shared
    /// live load, so least_connections sees every worker's.
    pub fn upstream(&self) -> Arc<Upstream> {
        Upstream::new(
            self.settings.connect_timeout,
            self.settings.pool_idle_timeout,
            self.settings.response_timeout,
            self.settings.private.clone(),
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
    /// goes through is a future copied into place for every request. With the access log on,
    /// the request gets its id and its record, finished here or by the forwarding.
    pub fn begin(&self, mut req: Request<ProxyBody>, client: &Peer) -> Begun {
        let Some(log) = &self.settings.access_log else {
            return self.route(req, client, &mut None);
        };
        let bytes_in = hyper::body::Body::size_hint(req.body())
            .exact()
            .unwrap_or(0);
        let record = access::start(log, &mut req, client.addr, client.tls_facts(), bytes_in);
        let mut record = Some(record);
        match self.route(req, client, &mut record) {
            Begun::Answered(mut response) => {
                if let Some(record) = record {
                    access::answered_here(record, log, &mut response);
                }
                Begun::Answered(response)
            }
            Begun::Forward(mut f) => {
                f.log = record;
                Begun::Forward(f)
            }
        }
    }

    /// `begin`'s routing and steering; the decision goes on `record`.
    fn route(
        &self,
        mut req: Request<ProxyBody>,
        client: &Peer,
        record: &mut Option<access::Pending>,
    ) -> Begun {
        let start = Instant::now();
        // Only a request with a body can carry a transfer coding (hyper's server frames it).
        if !hyper::body::Body::is_end_stream(req.body()) {
            if let Some(why) = transfer_coding_problem(req.headers()) {
                let mut refused = text(
                    StatusCode::BAD_REQUEST,
                    format!("meshlb: {why} (RFC 9112 section 6.1)\n"),
                );
                // The body's framing is in doubt: nothing more is read from this connection.
                refused.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
                return Begun::Answered(refused);
            }
        }
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
        let client_upgrade = upgrade.then(|| ClientUpgrade {
            slot: req.extensions_mut().remove::<ConnectionSlot>(),
            on: hyper::upgrade::on(&mut req),
        });
        let (decision, had_binding) = self.decide(lb_index, &req, client);
        if let Some(r) = record {
            access::decided(r, &self.config, lb_index, &decision, had_binding);
        }
        let response = match &decision.outcome {
            Outcome::Fixed(f) => fixed(f),
            Outcome::NoPool | Outcome::Answer { .. } => {
                if let Some(m) = self.metrics.lbs.get(lb_index.0) {
                    m.error(530);
                }
                text(
                    status(530),
                    format!(
                        "meshlb: no pool can serve {}: every pool is down and no fallback pool can take it (error 1016)\n",
                        lb.name
                    ),
                )
            }
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
                    log: None,
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
            // A layer-4 load balancer's name is not the HTTP proxy's to serve.
            .position(|lb| lb.layer4.is_none() && lb.name.as_bytes().eq_ignore_ascii_case(host))
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
        let mut ctx = RequestContext::new(Mode::Proxy, self.pop.pop(), unix_secs());
        ctx.client_ip = Some(client.addr.ip());
        if !self.geo.is_empty() {
            ctx.client_location = self.geo.locate(client.addr.ip()).map(|(l, _)| l);
        }
        ctx.http = Some(http);
        ctx.affinity_cookie = http.cookie(COOKIE_NAME);
        if lb.settings.session_affinity.kind == AffinityKind::Header {
            ctx.header_binding = header_session_key(&lb.settings.session_affinity, &lb.name, &http)
                .and_then(|k| self.sessions.get(k, unix_secs()));
        }
        ctx.load = Some(&*self.live);
        let had_binding = ctx.affinity_cookie.is_some() || ctx.header_binding.is_some();
        let engine = Engine::new(&self.config, &self.regions, &self.key);
        let decision = decide_live(&engine, lb, &self.generation, &ctx);
        (decision, had_binding)
    }

    /// Header-affinity bookkeeping the decision asks for.
    pub(super) fn remember(&self, decision: &Decision) {
        match decision.affinity {
            AffinityUpdate::BindHeaderSession { key, target, ttl } => {
                self.sessions.bind(key, target, unix_secs(), ttl);
            }
            AffinityUpdate::TouchHeaderSession { key, ttl } => {
                self.sessions.touch(key, unix_secs(), ttl)
            }
            _ => {}
        }
    }
}
