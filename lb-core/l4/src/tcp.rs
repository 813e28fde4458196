//! TCP: each accepted connection is steered (client address, PoP, live counts), connected to
//! its endpoint within the connect timeout — once more to another endpoint when that is
//! refused or times out (zero-downtime failover) — told the client's address by a PROXY
//! header when the load balancer asks, then relayed both ways until both sides have closed
//! (a half-close is passed on), either fails, or nothing moves for the idle timeout.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use lb_core::config::{LbId, LoadBalancer, ProxyProtocol, Transport};
use lb_core::steering::{Outcome, Target};
use lb_edge::{PrivateDialError, PrivateStream, Serving};
use std::time::SystemTime;

use crate::frontend::{EndpointReach, Layer4};
use crate::metrics::LbMetrics;
use crate::proxy_header;
use crate::record::{Close, L4Record};

/// Each direction's buffer (HAProxy's and nginx's default buffer size), not zeroed: reads go
/// into its spare capacity.
const BUFFER: usize = 16 << 10;
/// A direction whose reads fill the buffer is a bulk flow: its buffer grows to this, so a
/// gigabyte takes a quarter of the system calls.
const BULK_BUFFER: usize = 64 << 10;
/// Accepts on `listener` until `stop` turns true. Connections already relayed go on: a
/// reload that drops this port does not cut them.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    serving: Arc<Serving<Layer4>>,
    slots: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = lb_edge::AcceptBackoff::new();
    // Bound to one address, the listener knows every connection's local address; bound to
    // all, each connection is asked (for the PROXY header and the port).
    let bound = listener
        .local_addr()
        .ok()
        .filter(|a| !a.ip().is_unspecified());
    loop {
        let (client, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "layer-4 accept failed");
                    tokio::time::sleep(backoff.failed()).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        backoff.succeeded();
        let frontend = serving.load_full();
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            frontend.metrics.refused_connections.increment(1);
            drop(client);
            continue;
        };
        let Some(local) = bound.or_else(|| client.local_addr().ok()) else {
            continue;
        };
        tokio::spawn(connection(client, peer, local, frontend, slot));
    }
}

/// Why a connect failed, for the retry and the metrics.
enum ConnectError {
    /// No address for the endpoint (a hostname that does not resolve).
    NoAddress,
    Failed(io::Error),
    TimedOut,
    /// A private endpoint on a node that reaches no tunnel.
    NoDialer,
    /// A private endpoint's tunnel did not open the stream.
    Private(PrivateDialError),
}

/// An endpoint's side of a connection: TCP, or a stream through a tunnel.
enum OriginConn {
    Tcp(TcpStream),
    Private(Box<dyn PrivateStream>),
}

async fn connect(
    frontend: &Layer4,
    lb: &LoadBalancer,
    target: Target,
    listen: u16,
) -> Result<OriginConn, ConnectError> {
    let reach = frontend
        .endpoint_reach(lb, target, listen)
        .await
        .ok_or(ConnectError::NoAddress)?;
    let limit = frontend.settings.connect_timeout;
    match reach {
        EndpointReach::Public(addr) => {
            // A coarse deadline (`deadline.rs`): a timer per connect costs a system call each.
            match crate::deadline::within(TcpStream::connect(addr), limit).await {
                Some(Ok(s)) => Ok(OriginConn::Tcp(s)),
                Some(Err(e)) => Err(ConnectError::Failed(e)),
                None => Err(ConnectError::TimedOut),
            }
        }
        EndpointReach::Private(network, addr) => {
            let dialer = frontend
                .settings
                .private
                .as_ref()
                .ok_or(ConnectError::NoDialer)?;
            let dial = dialer.0.dial(frontend.private_networks(), network, addr);
            match crate::deadline::within(dial, limit).await {
                Some(Ok(s)) => Ok(OriginConn::Private(s)),
                Some(Err(e)) => Err(ConnectError::Private(e)),
                None => Err(ConnectError::TimedOut),
            }
        }
    }
}

async fn connection(
    client: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    frontend: Arc<Layer4>,
    _slot: OwnedSemaphorePermit,
) {
    let Some((id, lb)) = frontend.route(Transport::Tcp, local.port()) else {
        return;
    };
    let Some(m) = frontend.metrics.lb(id) else {
        return;
    };
    m.accepted.increment(1);
    let mut record = frontend.settings.log.as_ref().map(|_| Started {
        at: SystemTime::now(),
        clock: Instant::now(),
    });
    let mut log = |first, target, moved: Moved, close| {
        if let (Some(log), Some(started)) = (&frontend.settings.log, record.take()) {
            log.0.offer(L4Record {
                udp: None,
                opened: started.at,
                lasted: started.clock.elapsed(),
                client: peer,
                listen_port: local.port(),
                config: Arc::clone(frontend.config()),
                lb: id,
                first,
                target,
                bytes_in: moved.up.load(Ordering::Relaxed),
                bytes_out: moved.down.load(Ordering::Relaxed),
                close,
            });
        }
    };
    let Outcome::Forward { target, retry } = frontend.decide(lb, peer).outcome else {
        m.unserved.increment(1);
        log(None, None, Moved::default(), Close::NoPool);
        return;
    };
    let Some((origin, target)) = connected(&frontend, id, lb, target, retry, local.port()).await
    else {
        m.unserved.increment(1);
        log(
            Some(target),
            retry.or(Some(target)),
            Moved::default(),
            Close::ConnectFailed,
        );
        return;
    };
    let first = Some(target);
    let _open = frontend.live.open(target);
    let em = frontend.metrics.endpoint(target);
    if let Some(em) = em {
        em.opened.increment(1);
        em.open.increment(1.0);
    }
    let _ = client.set_nodelay(true);
    if let OriginConn::Tcp(origin) = &origin {
        let _ = origin.set_nodelay(true);
    }
    let proxy_protocol = lb
        .layer4
        .as_ref()
        .map_or(ProxyProtocol::Off, |l| l.proxy_protocol);
    let moved = Moved::default();
    let close = relay(
        client,
        origin,
        header(proxy_protocol, peer, local),
        frontend.settings.idle_timeout,
        m,
        &moved,
    )
    .await;
    if let Some(em) = em {
        em.open.decrement(1.0);
    }
    log(first, Some(target), moved, close);
}

/// When a connection began, for its record.
struct Started {
    at: SystemTime,
    clock: Instant,
}

/// Bytes relayed each way on one connection.
#[derive(Default)]
struct Moved {
    up: AtomicU64,
    down: AtomicU64,
}

/// The endpoint's connection: `target`'s, else (refused, timed out, no address) `retry`'s.
async fn connected(
    frontend: &Layer4,
    id: LbId,
    lb: &LoadBalancer,
    target: Target,
    retry: Option<Target>,
    listen: u16,
) -> Option<(OriginConn, Target)> {
    let mut tries = std::iter::once(target).chain(retry);
    let mut first = true;
    loop {
        let t = tries.next()?;
        if !first {
            if let Some(m) = frontend.metrics.lb(id) {
                m.retries.increment(1);
            }
        }
        first = false;
        match connect(frontend, lb, t, listen).await {
            Ok(s) => return Some((s, t)),
            Err(e) => {
                if let Some(em) = frontend.metrics.endpoint(t) {
                    em.connect_failures.increment(1);
                }
                let why = match e {
                    ConnectError::NoAddress => "no address".to_string(),
                    ConnectError::Failed(e) => e.to_string(),
                    ConnectError::TimedOut => "timed out".to_string(),
                    ConnectError::NoDialer => "a private endpoint, and no tunnel here".to_string(),
                    ConnectError::Private(e) => e.to_string(),
                };
                tracing::debug!(load_balancer = %lb.name, pool = t.pool.0, endpoint = t.endpoint.0, %why, "layer-4 connect failed");
            }
        }
    }
}

/// The PROXY header an origin is sent first, if any: the client, and the address it reached.
fn header(p: ProxyProtocol, client: SocketAddr, local: SocketAddr) -> Option<Vec<u8>> {
    match p {
        ProxyProtocol::Off | ProxyProtocol::Simple => None,
        ProxyProtocol::V1 => Some(proxy_header::v1(client, local)),
        ProxyProtocol::V2 => Some(proxy_header::v2(Transport::Tcp, client, local)),
    }
}

/// Milliseconds since `base` (the last activity's clock).
fn since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Copies `from` into `to` until `from` ends, counting bytes and marking activity. At the end
/// the half-close is passed on while the other direction still runs (`other_done` unset);
/// when it has ended too, the connection is about to close, which sends the FIN anyway.
async fn pipe<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    from: &mut R,
    to: &mut W,
    (bytes, moved): (&metrics::Counter, &AtomicU64),
    last: &AtomicU64,
    base: Instant,
    (done, other_done): (&AtomicBool, &AtomicBool),
) -> Result<(), Broke> {
    let mut buf = Vec::with_capacity(BUFFER);
    loop {
        buf.clear();
        let n = from.read_buf(&mut buf).await.map_err(|_| Broke::Reading)?;
        if n == 0 {
            done.store(true, Ordering::Relaxed);
            if !other_done.load(Ordering::Relaxed) {
                to.shutdown().await.map_err(|_| Broke::Writing)?;
            }
            return Ok(());
        }
        to.write_all(&buf).await.map_err(|_| Broke::Writing)?;
        if n == buf.capacity() && buf.capacity() < BULK_BUFFER {
            buf = Vec::with_capacity(BULK_BUFFER);
        }
        bytes.increment(n as u64);
        moved.fetch_add(n as u64, Ordering::Relaxed);
        last.store(since(base), Ordering::Relaxed);
    }
}

async fn relay(
    mut client: TcpStream,
    origin: OriginConn,
    header: Option<Vec<u8>>,
    idle: Duration,
    m: &LbMetrics,
    moved: &Moved,
) -> Close {
    match origin {
        OriginConn::Tcp(mut origin) => {
            if let Some(h) = header {
                if origin.write_all(&h).await.is_err() {
                    return Close::HeaderFailed;
                }
            }
            let (cr, cw) = client.split();
            let (or, ow) = origin.split();
            relay_halves((cr, cw), (or, ow), idle, m, moved).await
        }
        OriginConn::Private(mut origin) => {
            if let Some(h) = header {
                if origin.write_all(&h).await.is_err() {
                    return Close::HeaderFailed;
                }
            }
            let (cr, cw) = client.split();
            let (or, ow) = tokio::io::split(origin);
            relay_halves((cr, cw), (or, ow), idle, m, moved).await
        }
    }
}

/// Relays both ways until both have ended, either fails, or nothing moves for `idle`.
async fn relay_halves<CR, CW, OR, OW>(
    (mut cr, mut cw): (CR, CW),
    (mut or, mut ow): (OR, OW),
    idle: Duration,
    m: &LbMetrics,
    moved: &Moved,
) -> Close
where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    OR: AsyncRead + Unpin,
    OW: AsyncWrite + Unpin,
{
    let base = Instant::now();
    let last = AtomicU64::new(0);
    let (up_ended, down_ended) = (AtomicBool::new(false), AtomicBool::new(false));
    let up = pipe(
        &mut cr,
        &mut ow,
        (&m.bytes_in, &moved.up),
        &last,
        base,
        (&up_ended, &down_ended),
    );
    let down = pipe(
        &mut or,
        &mut cw,
        (&m.bytes_out, &moved.down),
        &last,
        base,
        (&down_ended, &up_ended),
    );
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    // One timer for the connection's life, moved only when it fires (activity moves the
    // deadline forward; a timer per wait would be a timer-wheel insert and removal each).
    let idle_timer = tokio::time::sleep_until(base + idle);
    tokio::pin!(idle_timer);
    loop {
        tokio::select! {
            r = &mut up, if !up_done => {
                match r {
                    Err(Broke::Reading) => return Close::ClientError,
                    Err(Broke::Writing) => return Close::OriginError,
                    Ok(()) => up_done = true,
                }
            }
            r = &mut down, if !down_done => {
                match r {
                    Err(Broke::Reading) => return Close::OriginError,
                    Err(Broke::Writing) => return Close::ClientError,
                    Ok(()) => down_done = true,
                }
            }
            () = &mut idle_timer => {
                let quiet_since = last.load(Ordering::Relaxed);
                if since(base).saturating_sub(quiet_since) >= idle_ms {
                    return Close::Idle;
                }
                idle_timer
                    .as_mut()
                    .reset(base + Duration::from_millis(quiet_since.saturating_add(idle_ms)));
            }
        }
        if up_done && down_done {
            return Close::Done;
        }
    }
}

/// Which half of a direction's copy failed: reading its source or writing its sink.
enum Broke {
    Reading,
    Writing,
}
