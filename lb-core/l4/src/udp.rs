//! UDP: flows keyed by the client's address and port. A client's first datagram is steered
//! (as a TCP connection is) and opens the flow's own upstream socket, connected to the
//! endpoint; later datagrams follow it, and the endpoint's replies go back to the client from
//! the listening socket. A flow with no datagram either way for the idle timeout ends; the
//! table holds at most `udp_max_flows` flows per listening socket, a new one beyond that
//! pushing out the least recently active (counted in `meshlb_l4_flows_evicted_total`).
//! Under `proxy_protocol = "v2"` or `"simple"` every datagram to the origin carries the
//! header (an origin cannot tell a flow's first datagram after its own restart); under
//! `simple`, origins echo the header (Cloudflare's Simple Proxy Protocol), stripped here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lru::LruCache;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use lb_core::config::{LbId, ProxyProtocol, Transport};
use lb_core::steering::{Outcome, Target};
use lb_edge::Serving;

use crate::frontend::Layer4;
use crate::live::Open;
use crate::proxy_header;
use crate::record::{Close, Datagrams, L4Record};

/// The largest UDP payload.
const MAX_DATAGRAM: usize = 65_535;

struct Flow {
    upstream: Arc<UdpSocket>,
    /// Milliseconds since the listener's clock of the last datagram either way.
    last: Arc<AtomicU64>,
    replies: AbortHandle,
    header: Option<Vec<u8>>,
    lb: LbId,
    frontend: Arc<Layer4>,
    _open: Open,
    target: Target,
    /// For the flow's record: when and where it began, what came from the client, what went
    /// back (counted by the replies' task), and why it ends.
    opened: SystemTime,
    opened_ms: u64,
    client: SocketAddr,
    listen_port: u16,
    from_client: (u64, u64),
    to_client: Arc<(AtomicU64, AtomicU64)>,
    close: Close,
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.replies.abort();
        if let Some(em) = self.frontend.metrics.endpoint(self.target) {
            em.open.decrement(1.0);
        }
        if let Some(log) = &self.frontend.settings.log {
            let last = self.last.load(Ordering::Relaxed);
            let last_after = Duration::from_millis(last.saturating_sub(self.opened_ms));
            log.0.offer(L4Record {
                udp: Some(Datagrams {
                    from_client: self.from_client.0,
                    to_client: self.to_client.0.load(Ordering::Relaxed),
                    last_after,
                }),
                opened: self.opened,
                lasted: self.opened.elapsed().unwrap_or_default(),
                client: self.client,
                listen_port: self.listen_port,
                config: Arc::clone(self.frontend.config()),
                lb: self.lb,
                first: Some(self.target),
                target: Some(self.target),
                bytes_in: self.from_client.1,
                bytes_out: self.to_client.1.load(Ordering::Relaxed),
                close: self.close,
            });
        }
    }
}

fn since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Relays datagrams on `socket` until `stop` turns true; its flows end with it.
pub(crate) async fn serve(
    socket: UdpSocket,
    serving: Arc<Serving<Layer4>>,
    mut stop: watch::Receiver<bool>,
) {
    let socket = Arc::new(socket);
    let Ok(local) = socket.local_addr() else {
        return;
    };
    let (idle, max_flows) = {
        let f = serving.load();
        (f.settings.udp_idle_timeout, f.settings.udp_max_flows.max(1))
    };
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let mut flows: LruCache<SocketAddr, Flow> =
        LruCache::new(NonZeroUsize::new(max_flows).unwrap_or(NonZeroUsize::MIN));
    let base = Instant::now();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut framed = Vec::with_capacity(MAX_DATAGRAM + 64);
    let mut sweep = tokio::time::interval((idle / 4).max(Duration::from_millis(10)));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (n, client) = tokio::select! {
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                // An ICMP error from an earlier send, reported here: not this socket's end.
                Err(_) => continue,
            },
            _ = sweep.tick() => {
                expire(&mut flows, base, idle_ms);
                continue;
            }
            _ = stop.changed() => return,
        };
        if !flows.contains(&client) {
            let Some(flow) = open(&serving, &socket, client, local, base).await else {
                continue;
            };
            if flows.len() >= max_flows {
                if let Some(m) = flows
                    .peek_lru()
                    .map(|(_, f)| Arc::clone(&f.frontend.metrics))
                {
                    m.evicted_flows.increment(1);
                }
            }
            if let Some((_, mut pushed_out)) = flows.push(client, flow) {
                pushed_out.close = Close::Evicted;
            }
        }
        let Some(flow) = flows.get_mut(&client) else {
            continue;
        };
        let payload = &buf[..n];
        let datagram = match &flow.header {
            Some(h) => {
                framed.clear();
                framed.extend_from_slice(h);
                framed.extend_from_slice(payload);
                &framed[..]
            }
            None => payload,
        };
        if flow.upstream.send(datagram).await.is_ok() {
            flow.last.store(since(base), Ordering::Relaxed);
            flow.from_client.0 += 1;
            flow.from_client.1 += n as u64;
            if let Some(m) = flow.frontend.metrics.lb(flow.lb) {
                m.bytes_in.increment(n as u64);
            }
        }
    }
}

/// Ends the flows idle for `idle_ms`, least recently used first; a flow kept alive by its
/// replies only is moved up, so each pass looks at every flow at most once.
fn expire(flows: &mut LruCache<SocketAddr, Flow>, base: Instant, idle_ms: u64) {
    let now = since(base);
    for _ in 0..flows.len() {
        let Some((client, flow)) = flows.peek_lru() else {
            return;
        };
        let client = *client;
        if now.saturating_sub(flow.last.load(Ordering::Relaxed)) >= idle_ms {
            if let Some((_, mut idle)) = flows.pop_lru() {
                idle.close = Close::Idle;
            }
        } else if flows.get(&client).is_none() {
            return;
        }
    }
}

/// A new flow from `client`: steered, its upstream socket connected, its replies relayed.
async fn open(
    serving: &Serving<Layer4>,
    socket: &Arc<UdpSocket>,
    client: SocketAddr,
    local: SocketAddr,
    base: Instant,
) -> Option<Flow> {
    let frontend = serving.load_full();
    let (id, lb) = frontend.route(Transport::Udp, local.port())?;
    let m = frontend.metrics.lb(id)?;
    m.accepted.increment(1);
    let Outcome::Forward { target, .. } = frontend.decide(lb, client).outcome else {
        m.unserved.increment(1);
        return None;
    };
    let Some(to) = frontend.endpoint_addr(lb, target, local.port()).await else {
        m.unserved.increment(1);
        return None;
    };
    let any: IpAddr = if to.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let upstream = match UdpSocket::bind((any, 0)).await {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!(error = %e, "layer-4 UDP flow socket");
            m.unserved.increment(1);
            return None;
        }
    };
    if upstream.connect(to).await.is_err() {
        if let Some(em) = frontend.metrics.endpoint(target) {
            em.connect_failures.increment(1);
        }
        m.unserved.increment(1);
        return None;
    }
    let upstream = Arc::new(upstream);
    let proxy_protocol = lb
        .layer4
        .as_ref()
        .map_or(ProxyProtocol::Off, |l| l.proxy_protocol);
    let header = match proxy_protocol {
        ProxyProtocol::V2 => Some(proxy_header::v2(Transport::Udp, client, local)),
        ProxyProtocol::Simple => Some(proxy_header::simple(client, local).to_vec()),
        ProxyProtocol::Off | ProxyProtocol::V1 => None,
    };
    let opened_ms = since(base);
    let last = Arc::new(AtomicU64::new(opened_ms));
    let to_client = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let replies = tokio::spawn(relay_replies(
        Arc::clone(&upstream),
        Arc::clone(socket),
        client,
        proxy_protocol == ProxyProtocol::Simple,
        (Arc::clone(&last), Arc::clone(&to_client)),
        base,
        Arc::clone(&frontend),
        id,
    ))
    .abort_handle();
    if let Some(em) = frontend.metrics.endpoint(target) {
        em.opened.increment(1);
        em.open.increment(1.0);
    }
    Some(Flow {
        upstream,
        last,
        replies,
        header,
        lb: id,
        _open: frontend.live.open(target),
        frontend: Arc::clone(&frontend),
        target,
        opened: SystemTime::now(),
        opened_ms,
        client,
        listen_port: local.port(),
        from_client: (0, 0),
        to_client,
        close: Close::Stopped,
    })
}

/// The endpoint's datagrams, back to `client` from the listening socket.
#[allow(clippy::too_many_arguments)]
async fn relay_replies(
    upstream: Arc<UdpSocket>,
    socket: Arc<UdpSocket>,
    client: SocketAddr,
    strip_simple: bool,
    (last, to_client): (Arc<AtomicU64>, Arc<(AtomicU64, AtomicU64)>),
    base: Instant,
    frontend: Arc<Layer4>,
    lb: LbId,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let n = match upstream.recv(&mut buf).await {
            Ok(n) => n,
            // ICMP port unreachable from the endpoint: it may come back; the flow idles out.
            Err(_) => continue,
        };
        let reply = if strip_simple {
            proxy_header::strip_simple(&buf[..n])
        } else {
            &buf[..n]
        };
        if socket.send_to(reply, client).await.is_ok() {
            last.store(since(base), Ordering::Relaxed);
            to_client.0.fetch_add(1, Ordering::Relaxed);
            to_client.1.fetch_add(reply.len() as u64, Ordering::Relaxed);
            if let Some(m) = frontend.metrics.lb(lb) {
                m.bytes_out.increment(reply.len() as u64);
            }
        }
    }
}
