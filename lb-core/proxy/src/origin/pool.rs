//! Connections to origins, one pool per proxy worker: HTTP/1.1 keep-alive over plain TCP or
//! TLS (the load balancer's `origin_tls`), each open connection counted under its origin's
//! address for least_connections.
//!
//! A worker's requests never leave its thread, so the pool is a plain list per origin and a
//! request drives its connection itself (`origin/http1.rs`); a sweep every second closes idle
//! connections the origin ended or that idled out, so they stop counting as open.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use lb_edge::{PrivateDialError, PrivateDialer};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::body::ProxyBody;
use crate::origin::body::OriginBody;
use crate::origin::head::{Framing, HeadError, OriginHead};
use crate::origin::http1::{Conn, Io, RequestHead};

/// Idle connections kept per origin; more are closed when released.
const MAX_IDLE_PER_ORIGIN: usize = 256;
/// TLS variants (settings and server name) pooled per origin address. The server name is the
/// Host the origin gets, normalised (`route/forward.rs`), so a handful cover every load
/// balancer that shares the endpoint; connections of a variant beyond these are not pooled.
const MAX_TLS_VARIANTS_PER_ORIGIN: usize = 8;
/// How often idle connections are checked for the origin's close and the idle timeout.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Where and how to connect.
#[derive(Clone, Copy)]
pub struct Origin<'a> {
    /// `ip:port` or `host:port`.
    pub authority: &'a str,
    /// TLS settings and the name to send as SNI and verify, when the origin speaks HTTPS.
    pub tls: Option<(&'a Arc<rustls::ClientConfig>, &'a str)>,
    /// The origin's open-connection count (`live.rs`), which a new connection joins while open.
    pub opened: Option<&'a Arc<AtomicU32>>,
    /// In a private network (`virtual_network_id`): the network, and the generation's routes
    /// the dialer finds its tunnel by. Reached only through `Upstream`'s private dialer.
    pub private: Option<(NetworkIndex, &'a PrivateNetworks)>,
}

/// What sets apart connections to one address: the private network it is in (a public
/// 10.0.0.1 and a private one are different origins), and the TLS settings' identity (the
/// config's address) and server name.
type TlsKey = (Option<NetworkIndex>, Option<(usize, Box<str>)>);

fn same_tls((network, key): &TlsKey, origin: &Origin<'_>) -> bool {
    if *network != origin.private.map(|(n, _)| n) {
        return false;
    }
    match (key, origin.tls) {
        (None, None) => true,
        (Some((id, name)), Some((config, want))) => {
            *id == Arc::as_ptr(config) as usize && **name == *want
        }
        _ => false,
    }
}

/// Where a connection's idle list is: `(slot, variant)` in `Pools::idle`.
type Place = (usize, usize);

/// Idle connections, found without allocating on the request path: a slot per origin
/// address, and in it a list per TLS settings (plain first, usually the only one).
#[derive(Default)]
struct Pools {
    slots: foldhash::HashMap<String, usize>,
    idle: Vec<Vec<(TlsKey, Vec<Idle>)>>,
}

impl Pools {
    fn find(&self, origin: &Origin<'_>) -> Option<Place> {
        let slot = *self.slots.get(origin.authority)?;
        let variant = self.idle[slot]
            .iter()
            .position(|(tls, _)| same_tls(tls, origin))?;
        Some((slot, variant))
    }

    /// Finds or makes the place for `origin`'s connections (allocates only the first time);
    /// `None` when its address already has `MAX_TLS_VARIANTS_PER_ORIGIN` others (such a
    /// connection is closed after its exchange).
    fn place(&mut self, origin: &Origin<'_>) -> Option<Place> {
        if let Some(place) = self.find(origin) {
            return Some(place);
        }
        if self
            .slots
            .get(origin.authority)
            .is_some_and(|&slot| self.idle[slot].len() >= MAX_TLS_VARIANTS_PER_ORIGIN)
        {
            return None;
        }
        let slot = match self.slots.get(origin.authority) {
            Some(&slot) => slot,
            None => {
                self.idle.push(Vec::new());
                let slot = self.idle.len() - 1;
                self.slots.insert(origin.authority.to_string(), slot);
                slot
            }
        };
        let tls = origin
            .tls
            .map(|(c, name)| (Arc::as_ptr(c) as usize, Box::from(name)));
        let network = origin.private.map(|(n, _)| n);
        self.idle[slot].push(((network, tls), Vec::new()));
        Some((slot, self.idle[slot].len() - 1))
    }

    fn list(&mut self, (slot, variant): Place) -> Option<&mut Vec<Idle>> {
        Some(&mut self.idle.get_mut(slot)?.get_mut(variant)?.1)
    }
}

/// How reaching the origin failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// Nothing reached the origin.
    Connect(ConnectFailure),
    /// The TLS handshake failed (Cloudflare's 525).
    TlsHandshake,
    /// The origin's certificate is not valid for the name (Cloudflare's 526).
    TlsCertificate,
    /// The connection broke after the request was sent, before the response head.
    Exchange,
    /// The origin's answer broke off after its head (a short body read whole).
    BrokenAnswer,
}

/// Why no connection to an origin could be opened, as Cloudflare tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// The origin refused the connection (Cloudflare's 521).
    Refused,
    /// The connection was not accepted within the connect timeout (522).
    TimedOut,
    /// No route to the origin, or its hostname did not resolve (523).
    Unreachable,
    /// This node could not open a connection at all (out of descriptors, ports or buffers):
    /// not the origin's fault, so no origin code (502).
    Local,
    /// A private endpoint (`virtual_network_id`) that no live tunnel connection reaches:
    /// Cloudflare's 530 with error 1033. A private endpoint is never dialed directly.
    NoTunnel,
}

impl ConnectFailure {
    /// The failure an error of `connect(2)` stands for.
    pub(crate) fn of(e: &std::io::Error) -> ConnectFailure {
        use std::io::ErrorKind;
        match e.kind() {
            ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset => ConnectFailure::Refused,
            ErrorKind::TimedOut => ConnectFailure::TimedOut,
            ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
            | ErrorKind::NetworkDown
            | ErrorKind::NotFound => ConnectFailure::Unreachable,
            _ => ConnectFailure::Local,
        }
    }
}

/// The response's body as `send` leaves it.
pub enum Reply {
    /// Read whole (small, of known length, or none); the connection is back in the pool.
    Whole(Bytes),
    /// Streaming from the origin; the connection goes back when it has been read.
    Streamed(OriginBody),
    /// The origin switched protocols (101): the connection, and what it already sent.
    Upgraded(Io, Bytes),
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// One worker's connections to origins.
pub struct Upstream {
    pools: Mutex<Pools>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// The longest an origin may go silent in the middle of a streamed body.
    read_timeout: Duration,
    sent: SentCounters,
    /// How private endpoints are reached; `None`: they are not (530).
    private: Option<PrivateDialer>,
}

/// `meshlb_proxy_origin_requests_total{connection}`: requests sent to origins by the kind of
/// connection they went on — how well keep-alive works, and how often origins drop reused
/// connections under a request.
struct SentCounters {
    reused: metrics::Counter,
    new: metrics::Counter,
    resent: metrics::Counter,
}

impl SentCounters {
    fn register() -> Self {
        let by = |kind: &'static str| metrics::counter!("meshlb_proxy_origin_requests_total", "connection" => kind);
        SentCounters {
            reused: by("reused"),
            new: by("new"),
            resent: by("resent"),
        }
    }
}

fn is_certificate_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|tls| matches!(tls, rustls::Error::InvalidCertificate(_)))
}

/// Why one exchange on one connection failed.
enum ExchangeFailure {
    /// Nothing came back and the request may not have been read: a reused connection the
    /// origin was closing.
    NothingBack,
    /// Broken before the response head was complete.
    Broken,
    /// Broken after the head, reading a body to buffer: too late to send the request again.
    AfterHead,
}

impl Upstream {
    /// A pool, reaching private endpoints through `private` (none: they get 530); within a
    /// tokio runtime it sweeps its idle connections until dropped.
    pub fn new(
        connect_timeout: Duration,
        idle_timeout: Duration,
        read_timeout: Duration,
        private: Option<PrivateDialer>,
    ) -> Arc<Self> {
        let upstream = Arc::new(Upstream {
            pools: Mutex::new(Pools::default()),
            connect_timeout,
            idle_timeout,
            read_timeout,
            sent: SentCounters::register(),
            private,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(sweep(Arc::downgrade(&upstream)));
        }
        upstream
    }

    /// Sends the request on an idle connection to `origin` or a new one and reads the
    /// response head; a body of known length up to `buffer_up_to` bytes is read whole.
    pub async fn send(
        self: &Arc<Self>,
        origin: Origin<'_>,
        req: &RequestHead<'_>,
        body: ProxyBody,
        buffer_up_to: u64,
    ) -> Result<(OriginHead, Reply), UpstreamError> {
        let mut body = Some(body);
        let mut pooled = self.checkout(&origin);
        let mut resending = false;
        // A stream through a tunnel also breaks, new or reused, when the connector carrying it
        // dies (a replica killed): the endpoint is still there through the tunnel's other
        // connections, so a new one's request is sent once more as a reused one's is.
        let mut may_resend_new = origin.private.is_some();
        // A pooled connection first (if any), then a new one (two, through a tunnel); at most
        // three turns. One place that awaits the exchange keeps this future small: every
        // request's future is moved into place, so its size is copied each time
        // (bench/proxy.sh).
        loop {
            let reused = pooled.is_some();
            let mut connected_in = None;
            let (conn, place, this_try, replayable) = match pooled.take() {
                Some((conn, place)) => {
                    let place = Some(place);
                    self.sent.reused.increment(1);
                    // A body in hand is sent as a copy, so that it is still there for another
                    // try.
                    let (this_try, replayable) = match body.as_ref().and_then(ProxyBody::replayable)
                    {
                        Some(copy) => (copy, true),
                        None => (body.take().unwrap_or(ProxyBody::Empty), false),
                    };
                    (conn, place, this_try, replayable)
                }
                None => {
                    let copy = if may_resend_new {
                        body.as_ref().and_then(ProxyBody::replayable)
                    } else {
                        None
                    };
                    let replayable = copy.is_some();
                    let this_try = match copy {
                        Some(copy) => copy,
                        None => body.take().ok_or(UpstreamError::Exchange)?,
                    };
                    // Boxed: connecting (a TLS handshake's state above all) would make every
                    // request's future over a kilobyte larger.
                    let connecting = std::time::Instant::now();
                    let conn = Box::pin(self.connect(origin)).await?;
                    connected_in = Some(connecting.elapsed());
                    if resending {
                        self.sent.resent.increment(1);
                    } else {
                        self.sent.new.increment(1);
                    }
                    let place = match self.pools.lock() {
                        Ok(mut pools) => pools.place(&origin),
                        Err(_) => return Err(UpstreamError::Exchange),
                    };
                    (conn, place, this_try, replayable)
                }
            };
            match self
                .exchange(conn, place, req, this_try, buffer_up_to)
                .await
            {
                Ok((mut head, reply)) => {
                    head.connected_in = connected_in;
                    return Ok((head, reply));
                }
                // The origin closed the idle connection as the request went out (or the
                // tunnel connection under a new stream died). Sending it once more, on a new
                // connection, is safe when the request is idempotent (RFC 9110 section 9.2.2)
                // and its body is still in hand.
                Err(ExchangeFailure::NothingBack)
                    if replayable
                        && req.method.is_idempotent()
                        && (reused || std::mem::take(&mut may_resend_new)) =>
                {
                    resending = true;
                }
                Err(ExchangeFailure::AfterHead) => return Err(UpstreamError::BrokenAnswer),
                Err(_) => return Err(UpstreamError::Exchange),
            }
        }
    }

    async fn exchange(
        self: &Arc<Self>,
        mut conn: Conn,
        place: Option<Place>,
        req: &RequestHead<'_>,
        body: ProxyBody,
        buffer_up_to: u64,
    ) -> Result<(OriginHead, Reply), ExchangeFailure> {
        // Let the worker's other ready tasks run first, so requests to origins go out in a
        // burst after each turn of the event loop rather than one by one: on the benchmark's
        // two cores that wakes the origin's core once per burst, and costs ~10 % less CPU per
        // request (bench/proxy.sh).
        tokio::task::yield_now().await;
        let head = match conn.write_request(req, body).await {
            Err(_) => return Err(ExchangeFailure::NothingBack),
            Ok(None) => conn.read_head(req.method).await,
            Ok(Some((streamed, chunked))) => conn
                .upload_and_read_head(streamed, chunked, req.method)
                .await
                .map(|(mut head, whole_body_sent)| {
                    head.keep_alive &= whole_body_sent;
                    head
                }),
        };
        let head = match head {
            Ok(head) => head,
            Err(HeadError::NothingBack) => return Err(ExchangeFailure::NothingBack),
            Err(HeadError::Broken) => return Err(ExchangeFailure::Broken),
        };
        let reply = match head.framing {
            Framing::Upgrade => {
                let (io, early) = conn.into_tunnel();
                Reply::Upgraded(io, early)
            }
            Framing::Empty => {
                if head.keep_alive {
                    self.release(conn, place);
                }
                Reply::Whole(Bytes::new())
            }
            Framing::Length(n) if n <= buffer_up_to => {
                let n = usize::try_from(n).map_err(|_| ExchangeFailure::Broken)?;
                let body = conn
                    .read_body(n)
                    .await
                    .map_err(|_| ExchangeFailure::AfterHead)?;
                if head.keep_alive {
                    self.release(conn, place);
                }
                Reply::Whole(body)
            }
            framing => {
                let me = Arc::clone(self);
                let release = Box::new(move |conn| me.release(conn, place));
                Reply::Streamed(OriginBody::new(
                    conn,
                    framing,
                    head.keep_alive,
                    release,
                    self.read_timeout,
                ))
            }
        };
        Ok((head.answer, reply))
    }

    /// Puts a connection whose response has been read to the end back in the pool (`None`:
    /// an unpooled variant, closed).
    fn release(&self, conn: Conn, place: Option<Place>) {
        let Some(place) = place else {
            return;
        };
        let Ok(mut pools) = self.pools.lock() else {
            return;
        };
        if let Some(list) = pools.list(place) {
            if list.len() < MAX_IDLE_PER_ORIGIN {
                list.push(Idle {
                    conn,
                    since: Instant::now(),
                });
            }
        }
    }

    /// The most recently used live idle connection (LIFO keeps few connections hot and lets
    /// the rest time out).
    fn checkout(&self, origin: &Origin<'_>) -> Option<(Conn, Place)> {
        let mut pools = self.pools.lock().ok()?;
        let place = pools.find(origin)?;
        let list = pools.list(place)?;
        while let Some(mut idle) = list.pop() {
            if idle.since.elapsed() < self.idle_timeout && idle.conn.is_idle_and_open() {
                return Some((idle.conn, place));
            }
        }
        None
    }

    /// Closes idle connections that timed out or that the origin ended.
    fn sweep_idle(&self) {
        let Ok(mut pools) = self.pools.lock() else {
            return;
        };
        for slot in &mut pools.idle {
            for (_, list) in slot.iter_mut() {
                list.retain_mut(|idle| {
                    idle.since.elapsed() < self.idle_timeout && idle.conn.is_idle_and_open()
                });
            }
        }
    }

    /// Idle connections in the pool (for tests).
    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.pools.lock().map_or(0, |p| {
            p.idle
                .iter()
                .flat_map(|slot| slot.iter().map(|(_, l)| l.len()))
                .sum()
        })
    }

    async fn connect(&self, origin: Origin<'_>) -> Result<Conn, UpstreamError> {
        let counter = origin.opened.cloned();
        if let Some((network, networks)) = origin.private {
            let stream = self
                .dial_private(origin.authority, network, networks)
                .await?;
            return match origin.tls {
                None => Ok(Conn::new(Io::Right(stream), counter)),
                Some(tls) => self.tls(tls, stream).await.map(|s| Conn::new(s, counter)),
            };
        }
        let tcp =
            match tokio::time::timeout(self.connect_timeout, tcp_connect(origin.authority)).await {
                Ok(Ok(s)) => s,
                Ok(Err(why)) => return Err(UpstreamError::Connect(why)),
                Err(_) => return Err(UpstreamError::Connect(ConnectFailure::TimedOut)),
            };
        let _ = tcp.set_nodelay(true);
        let Some(tls) = origin.tls else {
            return Ok(Conn::new(Io::Left(tcp), counter));
        };
        self.tls(tls, tcp).await.map(|s| Conn::new(s, counter))
    }

    /// TLS to the origin over `stream`, within the connect timeout.
    async fn tls<S: crate::origin::http1::OriginStream>(
        &self,
        (config, name): (&Arc<rustls::ClientConfig>, &str),
        stream: S,
    ) -> Result<Io, UpstreamError> {
        let server_name =
            ServerName::try_from(name.to_string()).map_err(|_| UpstreamError::TlsHandshake)?;
        let handshake = TlsConnector::from(Arc::clone(config)).connect(server_name, stream);
        match tokio::time::timeout(self.connect_timeout, handshake).await {
            Ok(Ok(tls)) => Ok(Io::Right(Box::new(tls))),
            Ok(Err(e)) if is_certificate_error(&e) => Err(UpstreamError::TlsCertificate),
            Ok(Err(_)) | Err(_) => Err(UpstreamError::TlsHandshake),
        }
    }

    /// A stream to a private endpoint through the private dialer; a private address is
    /// never dialed on the public side (docs/design.md#private-endpoints).
    async fn dial_private(
        &self,
        authority: &str,
        network: NetworkIndex,
        networks: &PrivateNetworks,
    ) -> Result<Box<dyn crate::origin::http1::OriginStream>, UpstreamError> {
        let no_tunnel = UpstreamError::Connect(ConnectFailure::NoTunnel);
        let (Some(dialer), Ok(to)) = (&self.private, authority.parse::<SocketAddr>()) else {
            return Err(no_tunnel);
        };
        let dial = dialer.0.dial(networks, network, to);
        match tokio::time::timeout(self.connect_timeout, dial).await {
            Ok(Ok(stream)) => Ok(Box::new(stream)),
            Ok(Err(PrivateDialError::NoTunnel)) => Err(no_tunnel),
            Ok(Err(PrivateDialError::Unreachable)) => {
                Err(UpstreamError::Connect(ConnectFailure::Unreachable))
            }
            Ok(Err(PrivateDialError::TimedOut)) | Err(_) => {
                Err(UpstreamError::Connect(ConnectFailure::TimedOut))
            }
        }
    }
}

/// Sweeps a pool's idle connections every second for as long as the pool exists.
async fn sweep(upstream: Weak<Upstream>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        match upstream.upgrade() {
            Some(u) => u.sweep_idle(),
            None => return,
        }
    }
}

/// Connects to `ip:port`, or to each address of `host:port` in turn; a name that does not
/// resolve is unreachable.
async fn tcp_connect(authority: &str) -> Result<TcpStream, ConnectFailure> {
    if let Ok(addr) = authority.parse::<SocketAddr>() {
        return TcpStream::connect(addr)
            .await
            .map_err(|e| ConnectFailure::of(&e));
    }
    let addrs = tokio::net::lookup_host(authority)
        .await
        .map_err(|_| ConnectFailure::Unreachable)?;
    let mut last = ConnectFailure::Unreachable;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = ConnectFailure::of(&e),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests;
