//! The PoP's side: accepts connectors over TLS, checks each hello against the tunnels the
//! config grants, holds the live connections of every tunnel, and opens streams through them.
//!
//! The PoP is the HTTP/2 client and the connector the server, as with cloudflared: the PoP
//! opens one stream per connection it carries, and the connector's SETTINGS bound how many
//! run at once. Every limit is a field of [`HubLimits`].

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use crate::hello::{Answer, Hello, EXPORTER_LABEL, MAGIC};
use crate::relay::{RelayKey, RELAY_MAGIC};
use crate::stream::TunnelStream;
use crate::token::{TunnelId, TunnelSecret};
use crate::{TARGET_HEADER, TUNNEL_HEADER};

/// What the config grants one tunnel.
#[derive(Debug, Clone)]
pub struct Grant {
    pub secret: TunnelSecret,
    /// The private subnets its connectors may serve.
    pub routes: Vec<IpNet>,
    /// The configured private endpoints' addresses in those routes: the only ones a stream
    /// opens to, whoever asks (a PoP never forwards to any other private address).
    pub targets: HashSet<IpAddr>,
}

/// The PoP's limits.
#[derive(Debug, Clone)]
pub struct HubLimits {
    /// Connectors connected at once (every tunnel's); one more is refused at accept.
    pub max_connectors: usize,
    /// A connector must finish TLS and its hello within this.
    pub hello_timeout: Duration,
    /// A stream must be answered by the connector within this.
    pub open_timeout: Duration,
    /// Connections one tunnel may hold here (replicas × their connections to this PoP).
    pub max_connections_per_tunnel: usize,
    /// An HTTP/2 PING goes to every connector this often...
    pub ping_interval: Duration,
    /// ...and one whose PONG does not come back within this is dropped: a connector that
    /// stalled, or a path that died without a reset, holds no slot for long.
    pub ping_timeout: Duration,
    /// Streams one relaying PoP runs through this one at once.
    pub max_relay_streams: u32,
}

impl Default for HubLimits {
    fn default() -> Self {
        HubLimits {
            max_connectors: 1024,
            hello_timeout: Duration::from_secs(10),
            open_timeout: Duration::from_secs(10),
            max_connections_per_tunnel: 16,
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(10),
            max_relay_streams: 4096,
        }
    }
}

lb_core::choice! {
    /// Why a connector was refused: each a counter (its name the label) and a log line.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Refusal {
        /// `max_connectors` were connected.
        Full => "full",
        /// TLS or the hello did not finish within `hello_timeout`.
        Timeout => "timeout",
        /// TLS failed, or the first bytes were no hello.
        Handshake => "handshake",
        /// No tunnel of that id is configured.
        UnknownTunnel => "unknown_tunnel",
        /// The proof did not verify under the tunnel's secret.
        BadProof => "bad_proof",
        /// A route the connector serves is not granted to its tunnel.
        ForeignRoute => "foreign_route",
        /// The tunnel holds `max_connections_per_tunnel` here.
        TooManyConnections => "too_many_connections",
        /// A relaying PoP whose proof did not verify under the mesh's relay key (or this PoP
        /// relays for none).
        BadRelay => "bad_relay",
    }
}

/// Why a stream through a tunnel did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// No connection of the tunnel is live here.
    #[error("no live connection of the tunnel")]
    NoConnection,
    /// The target is no configured endpoint in a route of the tunnel.
    #[error("the target is no configured endpoint of the tunnel")]
    NotRouted,
    /// The connector could not reach the target.
    #[error("the connector could not reach the target ({0})")]
    Unreachable(u16),
    #[error("the connector did not answer in time")]
    TimedOut,
}

/// One live connection of a tunnel.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub id: u64,
    pub client: [u8; 16],
    pub conn_index: u8,
    pub version: String,
    pub from: SocketAddr,
    pub opened_at: SystemTime,
}

struct Live {
    info: ConnectionInfo,
    send: h2::client::SendRequest<Bytes>,
}

/// Counters a PoP exports.
#[derive(Debug, Default)]
pub struct HubStats {
    pub accepted: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
    pub streams_opened: AtomicU64,
    pub streams_failed: AtomicU64,
    /// Connections dropped because their PONG did not come back.
    pub unresponsive: AtomicU64,
}

impl HubStats {
    pub fn refused(&self, why: Refusal) -> u64 {
        let i = Refusal::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.refused[i].load(Ordering::Relaxed)
    }

    fn count(&self, why: Refusal) {
        let i = Refusal::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.refused[i].fetch_add(1, Ordering::Relaxed);
        metrics::counter!("meshlb_tunnel_connectors_refused_total", "reason" => why.name())
            .increment(1);
    }
}

/// The tunnels a PoP holds.
pub struct Hub {
    grants: RwLock<Arc<HashMap<TunnelId, Grant>>>,
    live: Mutex<HashMap<TunnelId, Vec<Live>>>,
    limits: HubLimits,
    connectors: Arc<Semaphore>,
    next_id: AtomicU64,
    /// Where the next stream's pick of connections starts (round robin).
    next_pick: AtomicU64,
    /// Other PoPs of the mesh relay through this one when they prove this key.
    relay_key: std::sync::OnceLock<RelayKey>,
    /// The tunnels held here, sent on every change (for gossip: which PoP holds which).
    held: watch::Sender<Vec<TunnelId>>,
    /// When each tunnel that had connections here lost its last one (granted tunnels only).
    ended: Mutex<HashMap<TunnelId, SystemTime>>,
    pub stats: HubStats,
}

/// What a connection's first bytes after TLS are.
enum First {
    Connector(Hello, [u8; 32]),
    Relay([u8; 32]),
}

impl Hub {
    pub fn new(grants: HashMap<TunnelId, Grant>, limits: HubLimits) -> Arc<Hub> {
        Arc::new(Hub {
            grants: RwLock::new(Arc::new(grants)),
            live: Mutex::new(HashMap::new()),
            connectors: Arc::new(Semaphore::new(limits.max_connectors)),
            limits,
            next_id: AtomicU64::new(1),
            next_pick: AtomicU64::new(0),
            relay_key: std::sync::OnceLock::new(),
            held: watch::Sender::new(Vec::new()),
            ended: Mutex::new(HashMap::new()),
            stats: HubStats::default(),
        })
    }

    /// Other PoPs proving `key` may open streams through this one's connections.
    pub fn relay_for(&self, key: RelayKey) {
        let _ = self.relay_key.set(key);
    }

    /// A new config's grants. Connections of a tunnel no longer granted, or whose secret
    /// changed, are dropped.
    pub fn set_grants(&self, grants: HashMap<TunnelId, Grant>) {
        if let Ok(mut live) = self.live.lock() {
            live.retain(|id, _| grants.contains_key(id));
            self.tell_held(&live);
        }
        if let Ok(mut ended) = self.ended.lock() {
            ended.retain(|id, _| grants.contains_key(id));
        }
        if let Ok(mut g) = self.grants.write() {
            *g = Arc::new(grants);
        }
    }

    /// The tunnels held here, now and on every change.
    pub fn held_changes(&self) -> watch::Receiver<Vec<TunnelId>> {
        self.held.subscribe()
    }

    fn tell_held(&self, live: &HashMap<TunnelId, Vec<Live>>) {
        let mut now: Vec<TunnelId> = live.keys().copied().collect();
        now.sort();
        self.held.send_if_modified(|held| {
            let changed = *held != now;
            *held = now;
            changed
        });
    }

    fn grant(&self, tunnel: &TunnelId) -> Option<Grant> {
        self.grants.read().ok()?.get(tunnel).cloned()
    }

    /// Accepts connectors on `listener` for as long as the task runs.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, tls: TlsAcceptor) {
        let mut backoff = lb_edge::AcceptBackoff::new();
        loop {
            let Ok((tcp, from)) = listener.accept().await else {
                tokio::time::sleep(backoff.failed()).await;
                continue;
            };
            backoff.succeeded();
            let Ok(permit) = Arc::clone(&self.connectors).try_acquire_owned() else {
                self.refuse(Refusal::Full, from, "every connector slot is taken");
                continue;
            };
            let hub = Arc::clone(&self);
            let tls = tls.clone();
            tokio::spawn(async move {
                hub.connection(tcp, from, tls).await;
                drop(permit);
            });
        }
    }

    fn refuse(&self, why: Refusal, from: SocketAddr, detail: &str) {
        self.stats.count(why);
        tracing::warn!(%from, reason = why.name(), detail, "tunnel connector refused");
    }

    /// One connector's connection: TLS, its hello, then HTTP/2 until it ends.
    async fn connection(self: Arc<Self>, tcp: TcpStream, from: SocketAddr, tls: TlsAcceptor) {
        let _ = tcp.set_nodelay(true);
        let handshake = async {
            let mut stream = tls.accept(tcp).await.map_err(|_| Refusal::Handshake)?;
            let exporter = stream
                .get_ref()
                .1
                .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
                .map_err(|_| Refusal::Handshake)?;
            let mut magic = [0u8; 4];
            tokio::io::AsyncReadExt::read_exact(&mut stream, &mut magic)
                .await
                .map_err(|_| Refusal::Handshake)?;
            let first = match &magic {
                m if m == MAGIC => {
                    let (hello, proof) = Hello::read_after_magic(&mut stream)
                        .await
                        .map_err(|_| Refusal::Handshake)?;
                    First::Connector(hello, proof)
                }
                m if m == RELAY_MAGIC => First::Relay(
                    crate::relay::read_proof(&mut stream)
                        .await
                        .map_err(|_| Refusal::Handshake)?,
                ),
                _ => return Err(Refusal::Handshake),
            };
            Ok::<_, Refusal>((stream, exporter, first))
        };
        let (mut stream, exporter, first) =
            match tokio::time::timeout(self.limits.hello_timeout, handshake).await {
                Ok(Ok(done)) => done,
                Ok(Err(why)) => return self.refuse(why, from, "before the hello"),
                Err(_) => return self.refuse(Refusal::Timeout, from, "no hello in time"),
            };
        let (hello, proof) = match first {
            First::Connector(hello, proof) => (hello, proof),
            First::Relay(proof) => {
                let verified = self
                    .relay_key
                    .get()
                    .is_some_and(|key| key.verify(&proof, &exporter));
                if !verified {
                    self.refuse(Refusal::BadRelay, from, "not a PoP of this mesh");
                    let _ = Answer::Refused("not a PoP of this mesh".into())
                        .write(&mut stream)
                        .await;
                    return;
                }
                if Answer::Accepted.write(&mut stream).await.is_ok() {
                    self.relay(stream, from).await;
                }
                return;
            }
        };
        if let Err((why, reason)) = self.check(&hello, &proof, &exporter) {
            self.refuse(why, from, &reason);
            let _ = Answer::Refused(reason).write(&mut stream).await;
            return;
        }
        if Answer::Accepted.write(&mut stream).await.is_err() {
            return;
        }
        let Ok((send, mut driver)) = h2::client::handshake(stream).await else {
            return;
        };
        let pings = driver.ping_pong();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let info = ConnectionInfo {
            id,
            client: hello.client,
            conn_index: hello.conn_index,
            version: hello.version.clone(),
            from,
            opened_at: SystemTime::now(),
        };
        if let Err(why) = self.hold(hello.tunnel, Live { info, send }) {
            return self.refuse(why, from, "the tunnel holds its most connections here");
        }
        self.stats.accepted.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("meshlb_tunnel_connectors_accepted_total").increment(1);
        metrics::gauge!("meshlb_tunnel_connections").increment(1.0);
        tracing::info!(%from, tunnel = %hello.tunnel, conn_index = hello.conn_index, "tunnel connector connected");
        tokio::select! {
            _ = driver => {
                tracing::info!(%from, tunnel = %hello.tunnel, "tunnel connector disconnected");
            }
            () = keepalive(pings, self.limits.ping_interval, self.limits.ping_timeout) => {
                self.stats.unresponsive.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("meshlb_tunnel_connectors_unresponsive_total").increment(1);
                tracing::warn!(%from, tunnel = %hello.tunnel, "tunnel connector dropped: no PONG within the ping timeout");
            }
        }
        self.release(hello.tunnel, id);
        metrics::gauge!("meshlb_tunnel_connections").decrement(1.0);
    }

    fn check(
        &self,
        hello: &Hello,
        proof: &[u8; 32],
        exporter: &[u8; 32],
    ) -> Result<(), (Refusal, String)> {
        let Some(grant) = self.grant(&hello.tunnel) else {
            return Err((Refusal::UnknownTunnel, "no such tunnel".into()));
        };
        if !hello.verify(proof, &grant.secret, exporter) {
            return Err((Refusal::BadProof, "the tunnel secret does not match".into()));
        }
        if let Some(foreign) = hello
            .routes
            .iter()
            .find(|r| !grant.routes.iter().any(|g| g.contains(*r)))
        {
            return Err((
                Refusal::ForeignRoute,
                format!("the route {foreign} is not this tunnel's"),
            ));
        }
        Ok(())
    }

    fn hold(&self, tunnel: TunnelId, live: Live) -> Result<(), Refusal> {
        let mut all = self.live.lock().map_err(|_| Refusal::Full)?;
        let held = all.entry(tunnel).or_default();
        if held.len() >= self.limits.max_connections_per_tunnel {
            return Err(Refusal::TooManyConnections);
        }
        held.push(live);
        self.tell_held(&all);
        Ok(())
    }

    fn release(&self, tunnel: TunnelId, id: u64) {
        if let Ok(mut all) = self.live.lock() {
            if let Some(held) = all.get_mut(&tunnel) {
                held.retain(|l| l.info.id != id);
                if held.is_empty() {
                    all.remove(&tunnel);
                    if let Ok(mut ended) = self.ended.lock() {
                        ended.insert(tunnel, SystemTime::now());
                    }
                }
            }
            self.tell_held(&all);
        }
    }

    /// Serves a relaying PoP's streams until it closes the connection: each opens on this
    /// PoP's own connections of the tunnel, never through another relay.
    async fn relay(
        self: Arc<Self>,
        stream: tokio_rustls::server::TlsStream<TcpStream>,
        from: SocketAddr,
    ) {
        let handshake = h2::server::Builder::new()
            .max_concurrent_streams(self.limits.max_relay_streams)
            .handshake::<_, Bytes>(stream);
        let Ok(Ok(mut connection)) =
            tokio::time::timeout(self.limits.hello_timeout, handshake).await
        else {
            return;
        };
        tracing::info!(%from, "PoP relaying through this one");
        while let Some(Ok((request, respond))) = connection.accept().await {
            tokio::spawn(Arc::clone(&self).relayed(request, respond));
        }
    }

    async fn relayed(
        self: Arc<Self>,
        request: http::Request<h2::RecvStream>,
        mut respond: h2::server::SendResponse<Bytes>,
    ) {
        use crate::stream::status;
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let tunnel = header(TUNNEL_HEADER).and_then(|t| t.parse::<TunnelId>().ok());
        let target = header(TARGET_HEADER).and_then(|t| t.parse::<SocketAddr>().ok());
        let (Some(tunnel), Some(target), "/relay") = (tunnel, target, request.uri().path()) else {
            let _ = respond.send_response(status(400), true);
            return;
        };
        let mut through = match self.open_tcp(&tunnel, target).await {
            Ok(s) => s,
            Err(e) => {
                let _ = respond.send_response(status(crate::relay::status_of(&e)), true);
                return;
            }
        };
        let Ok(send) = respond.send_response(status(200), false) else {
            return;
        };
        let mut relayed = TunnelStream::new(send, request.into_body());
        let _ = tokio::io::copy_bidirectional(&mut relayed, &mut through).await;
    }

    /// Whether this PoP holds a live connection of `tunnel`.
    pub fn holds(&self, tunnel: &TunnelId) -> bool {
        self.live
            .lock()
            .is_ok_and(|all| all.get(tunnel).is_some_and(|h| !h.is_empty()))
    }

    /// The tunnels this PoP holds live connections of, in order.
    pub fn held(&self) -> Vec<TunnelId> {
        self.held.borrow().clone()
    }

    /// The tunnel's live connections here.
    /// When the tunnel's last connection here ended, if it had one and has none now.
    pub fn inactive_since(&self, tunnel: &TunnelId) -> Option<SystemTime> {
        if self.holds(tunnel) {
            return None;
        }
        self.ended.lock().ok()?.get(tunnel).copied()
    }

    pub fn connections(&self, tunnel: &TunnelId) -> Vec<ConnectionInfo> {
        self.live
            .lock()
            .map(|all| {
                all.get(tunnel)
                    .map(|held| held.iter().map(|l| l.info.clone()).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }

    /// The live connections to try, the next one first: streams spread over connections and
    /// replicas.
    fn senders(&self, tunnel: &TunnelId) -> Vec<h2::client::SendRequest<Bytes>> {
        let Ok(all) = self.live.lock() else {
            return Vec::new();
        };
        let Some(held) = all.get(tunnel) else {
            return Vec::new();
        };
        let start = self.next_pick.fetch_add(1, Ordering::Relaxed) as usize % held.len().max(1);
        held.iter()
            .cycle()
            .skip(start)
            .take(held.len())
            .map(|l| l.send.clone())
            .collect()
    }

    /// Opens a TCP stream to `target` through one of the tunnel's live connections; a
    /// connection that is closing or gone is passed over for the next.
    pub async fn open_tcp(
        &self,
        tunnel: &TunnelId,
        target: SocketAddr,
    ) -> Result<TunnelStream, OpenError> {
        let grant = self.grant(tunnel).ok_or(OpenError::NoConnection)?;
        if !grant.targets.contains(&target.ip())
            || !grant.routes.iter().any(|r| r.contains(&target.ip()))
        {
            return Err(OpenError::NotRouted);
        }
        let mut last = OpenError::NoConnection;
        for send in self.senders(tunnel) {
            let headers = [(TARGET_HEADER, target.to_string())];
            let open = crate::stream::open(send, "/tcp", &headers);
            match tokio::time::timeout(self.limits.open_timeout, open).await {
                Ok(Ok(stream)) => {
                    self.stats.streams_opened.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("meshlb_tunnel_streams_total", "result" => "opened")
                        .increment(1);
                    return Ok(stream);
                }
                // The connector answered: the target is what failed, another replica of
                // the same network would fail alike.
                Ok(Err(Some(status))) => {
                    last = OpenError::Unreachable(status);
                    break;
                }
                Ok(Err(None)) => last = OpenError::NoConnection,
                Err(_) => last = OpenError::TimedOut,
            }
        }
        self.stats.streams_failed.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("meshlb_tunnel_streams_total", "result" => "failed").increment(1);
        Err(last)
    }
}

/// Returns once a PING sent every `interval` goes unanswered for `timeout` (or the
/// connection can no longer send one); never while the peer answers.
pub(crate) async fn keepalive(pings: Option<h2::PingPong>, interval: Duration, timeout: Duration) {
    let Some(mut pings) = pings else {
        return std::future::pending().await;
    };
    let mut every = tokio::time::interval(interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        match tokio::time::timeout(timeout, pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return,
        }
    }
}
