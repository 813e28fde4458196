//! The connector (`meshlb tunnel run`): from inside a private network, dials PoPs and carries
//! their streams to the endpoints it routes to.
//!
//! Each of `connections_per_pop` connections to each PoP is one task that dials, says its
//! hello, serves HTTP/2 until the connection ends, and dials again after a backoff (1 s
//! doubling to 60 s, full jitter, as cloudflared's), so a connector keeps serving on the
//! connections that remain. On shutdown every connection sends GOAWAY: the PoP opens no new
//! stream on it, and the streams in flight run to their end, for at most `drain_grace`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ipnet::IpNet;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsConnector;

use crate::hello::{Answer, Hello, EXPORTER_LABEL};
use crate::token::{TunnelId, TunnelSecret};
use crate::TARGET_HEADER;

/// How a connector runs.
#[derive(Clone)]
pub struct ConnectorSettings {
    pub tunnel: TunnelId,
    pub secret: TunnelSecret,
    /// The PoPs' tunnel addresses to dial.
    pub pops: Vec<SocketAddr>,
    pub connections_per_pop: u8,
    /// The private subnets served, claimed in the hello; a stream to any other address is
    /// refused (403). Empty: any address a PoP asks for (a PoP opens streams only to the
    /// configured endpoints of its tunnel's routes).
    pub routes: Vec<IpNet>,
    /// How the PoPs' certificates are verified (a CA or a pin, `lb_tls::ClientTrust`).
    pub tls: Arc<rustls::ClientConfig>,
    /// The name the PoPs' certificates are checked against (a pin ignores it).
    pub server_name: ServerName<'static>,
    /// Dialing a PoP, TLS and the hello included.
    pub dial_timeout: Duration,
    /// Connecting to a private endpoint.
    pub target_timeout: Duration,
    /// Streams one connection runs at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_streams: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long streams in flight may run after shutdown.
    pub drain_grace: Duration,
    pub version: String,
}

impl ConnectorSettings {
    /// The defaults, for a tunnel, its secret, where its PoPs are and how to trust them.
    pub fn new(
        tunnel: TunnelId,
        secret: TunnelSecret,
        pops: Vec<SocketAddr>,
        tls: Arc<rustls::ClientConfig>,
        server_name: ServerName<'static>,
    ) -> ConnectorSettings {
        ConnectorSettings {
            tunnel,
            secret,
            pops,
            connections_per_pop: 2,
            routes: Vec::new(),
            tls,
            server_name,
            dial_timeout: Duration::from_secs(10),
            target_timeout: Duration::from_secs(10),
            max_streams: 1024,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            drain_grace: Duration::from_secs(30),
            version: format!("meshlb {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// Counters of a running connector.
#[derive(Debug, Default)]
pub struct ConnectorStats {
    /// Connections accepted by a PoP.
    pub connected: AtomicU64,
    /// Dials that failed or that a PoP refused.
    pub failed: AtomicU64,
    pub streams: AtomicU64,
    /// Streams refused: the target outside every route.
    pub not_routed: AtomicU64,
    /// Connections live now.
    pub live: AtomicU64,
    /// Streams in flight now.
    pub in_flight: AtomicU64,
}

/// A running connector.
pub struct Connector {
    pub stats: Arc<ConnectorStats>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Connector {
    /// Starts every connection.
    pub fn start(settings: ConnectorSettings) -> Connector {
        let stats = Arc::new(ConnectorStats::default());
        let (stop, stopped) = watch::channel(false);
        let client: [u8; 16] = rand::random();
        let settings = Arc::new(settings);
        let mut tasks = Vec::new();
        for &pop in &settings.pops {
            for index in 0..settings.connections_per_pop {
                let run = Link {
                    settings: Arc::clone(&settings),
                    stats: Arc::clone(&stats),
                    pop,
                    index,
                    client,
                };
                tasks.push(tokio::spawn(run.run(stopped.clone())));
            }
        }
        Connector { stats, stop, tasks }
    }

    /// Drains: every connection says GOAWAY and waits for its streams (at most the grace).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// One of the connector's connections to one PoP.
struct Link {
    settings: Arc<ConnectorSettings>,
    stats: Arc<ConnectorStats>,
    pop: SocketAddr,
    index: u8,
    client: [u8; 16],
}

impl Link {
    async fn run(self, mut stopped: watch::Receiver<bool>) {
        let mut failures = 0u32;
        loop {
            if *stopped.borrow() {
                return;
            }
            match self.connect().await {
                Ok(connection) => {
                    failures = 0;
                    self.stats.connected.fetch_add(1, Ordering::Relaxed);
                    self.stats.live.fetch_add(1, Ordering::Relaxed);
                    self.serve(connection, stopped.clone()).await;
                    self.stats.live.fetch_sub(1, Ordering::Relaxed);
                }
                Err(why) => {
                    failures = failures.saturating_add(1);
                    self.stats.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(pop = %self.pop, index = self.index, error = %why, "tunnel connection failed");
                }
            }
            let wait = backoff(&self.settings, failures);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stopped.changed() => return,
            }
        }
    }

    async fn connect(&self) -> Result<h2::server::Connection<Tls, Bytes>, String> {
        let s = &self.settings;
        let dial = async {
            let tcp = TcpStream::connect(self.pop)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let _ = tcp.set_nodelay(true);
            let mut tls = TlsConnector::from(Arc::clone(&s.tls))
                .connect(s.server_name.clone(), tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            let exporter = tls
                .get_ref()
                .1
                .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
                .map_err(|e| format!("TLS exporter: {e}"))?;
            let hello = Hello {
                tunnel: s.tunnel,
                conn_index: self.index,
                client: self.client,
                version: s.version.clone(),
                routes: s.routes.clone(),
            };
            hello
                .write(&mut tls, &s.secret, &exporter)
                .await
                .map_err(|e| format!("hello: {e}"))?;
            match Answer::read(&mut tls).await {
                Ok(Answer::Accepted) => {}
                Ok(Answer::Refused(why)) => return Err(format!("refused: {why}")),
                Err(e) => return Err(format!("answer: {e}")),
            }
            h2::server::Builder::new()
                .max_concurrent_streams(s.max_streams)
                .handshake(tls)
                .await
                .map_err(|e| format!("HTTP/2: {e}"))
        };
        tokio::time::timeout(s.dial_timeout, dial)
            .await
            .map_err(|_| "timed out".to_string())?
    }

    /// Serves the PoP's streams until the connection ends; on shutdown, GOAWAY and the
    /// streams in flight to their end or the grace.
    async fn serve(
        &self,
        mut connection: h2::server::Connection<Tls, Bytes>,
        mut stopped: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                next = connection.accept() => match next {
                    Some(Ok((request, respond))) => {
                        let settings = Arc::clone(&self.settings);
                        let stats = Arc::clone(&self.stats);
                        tokio::spawn(stream(settings, stats, request, respond));
                    }
                    _ => return,
                },
                _ = stopped.changed() => break,
            }
        }
        connection.graceful_shutdown();
        let drain = async { while let Some(Ok(_)) = connection.accept().await {} };
        let _ = tokio::time::timeout(self.settings.drain_grace, drain).await;
    }
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// One stream: a TCP connection to the target named, copied both ways.
async fn stream(
    settings: Arc<ConnectorSettings>,
    stats: Arc<ConnectorStats>,
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    use crate::stream::status;
    let target = request
        .headers()
        .get(TARGET_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<SocketAddr>().ok());
    let Some(target) = target.filter(|_| request.uri().path() == "/tcp") else {
        let _ = respond.send_response(status(400), true);
        return;
    };
    if !settings.routes.is_empty() && !settings.routes.iter().any(|r| r.contains(&target.ip())) {
        stats.not_routed.fetch_add(1, Ordering::Relaxed);
        let _ = respond.send_response(status(403), true);
        return;
    }
    let connected = tokio::time::timeout(settings.target_timeout, TcpStream::connect(target)).await;
    let Ok(Ok(mut tcp)) = connected else {
        let _ = respond.send_response(status(502), true);
        return;
    };
    let _ = tcp.set_nodelay(true);
    let Ok(send) = respond.send_response(status(200), false) else {
        return;
    };
    stats.streams.fetch_add(1, Ordering::Relaxed);
    stats.in_flight.fetch_add(1, Ordering::Relaxed);
    crate::stream::splice(send, request.into_body(), &mut tcp).await;
    stats.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// The wait before dial number `failures + 1`: full jitter over base × 2^failures, capped.
fn backoff(settings: &ConnectorSettings, failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let ceiling = settings
        .backoff_base
        .saturating_mul(1u32 << failures.min(16))
        .min(settings.backoff_max);
    ceiling.mul_f64(rand::random::<f64>())
}
