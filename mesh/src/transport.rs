//! A chitchat `Transport` that seals every datagram (see `seal.rs`), drops and counts whatever
//! does not open, and reassembles fragmented messages. The datagrams travel over a
//! [`DatagramNet`]: UDP on the wire ([`Udp`], which asks for a large socket receive buffer: the
//! default 212 KB overflowed when gossiping nodes stalled, docs/design.md#what-chitchat-costs),
//! or a simulated network (`mesh/sim`), where the same sealing, fragmentation and reassembly
//! run as on the wire.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use chitchat::transport::{RecvOutcome, SendOutcome, Socket, Transport};
use chitchat::ChitchatEnvelope;
use lb_core::clock::unix_ms as now_ms;
// The clock chitchat runs on: simulated time under the simulator's paused clock.
use tokio::time::Instant;

use super::recipient::{Recipient, SendFormat};
use super::seal::{
    decode_address, fragment_aad, parse_frame, seal_datagrams, seal_datagrams_at, KeyRing,
    ReplayCache, ADDRESS, MAX_DATAGRAM, REPLAY_CACHE_CAPACITY,
};

/// Receive buffer asked of the kernel (it caps the request at net.core.rmem_max).
const RECV_BUFFER: usize = 8 << 20;
/// Reassembly is bounded: this many half-received messages, this many per sender, for this
/// long. Only authenticated fragments are kept (each is sealed, `seal.rs`).
const MAX_PARTIAL: usize = 64;
const MAX_PARTIAL_PER_SOURCE: usize = 4;
const PARTIAL_TTL: Duration = Duration::from_secs(2);

/// Counters of one transport, for metrics and tests.
#[derive(Debug, Default)]
pub struct TransportStats {
    pub datagrams_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub datagrams_received: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Datagrams or messages dropped: not ours, forged, wrong key or cluster, replayed, garbage.
    pub rejected: AtomicU64,
    /// Of those, authentic datagrams seen before (a replay).
    pub replayed: AtomicU64,
    /// Of those, authentic datagrams bound to another node (a replay from another node's
    /// traffic, or a seed address this node does not know as its own).
    pub misaddressed: AtomicU64,
    /// Messages that needed two datagrams.
    pub fragmented: AtomicU64,
    /// The largest datagram sent, in bytes.
    pub max_datagram: AtomicU64,
}

/// One endpoint of a datagram network: what a sealed socket sends and receives on.
#[async_trait]
pub trait DatagramSocket: Send + Sync + 'static {
    fn local_addr(&self) -> anyhow::Result<SocketAddr>;
    /// Sends one datagram; an error is this datagram's loss, not a broken socket.
    async fn send_to(&self, datagram: &[u8], to: SocketAddr) -> std::io::Result<usize>;
    /// The next datagram into `buf` (truncated to it), and its sender.
    async fn recv_from(&self, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)>;
}

/// Where a node's gossip datagrams travel.
#[async_trait]
pub trait DatagramNet: Send + Sync + 'static {
    async fn bind(&self, addr: SocketAddr) -> anyhow::Result<Box<dyn DatagramSocket>>;
}

/// The wire: a UDP socket per node.
#[derive(Debug, Default, Clone, Copy)]
pub struct Udp;

#[async_trait]
impl DatagramNet for Udp {
    async fn bind(&self, addr: SocketAddr) -> anyhow::Result<Box<dyn DatagramSocket>> {
        Ok(Box::new(bind(addr)?))
    }
}

#[async_trait]
impl DatagramSocket for tokio::net::UdpSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        tokio::net::UdpSocket::local_addr(self).context("gossip socket address")
    }
    async fn send_to(&self, datagram: &[u8], to: SocketAddr) -> std::io::Result<usize> {
        tokio::net::UdpSocket::send_to(self, datagram, to).await
    }
    async fn recv_from(&self, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
        tokio::net::UdpSocket::recv_from(self, buf).await
    }
}

/// The sealed transport.
pub struct SealedTransport {
    ring: KeyRing,
    cluster_id: String,
    me: Recipient,
    send: SendFormat,
    stats: Arc<TransportStats>,
    net: Arc<dyn DatagramNet>,
    /// Bounded gossip: no datagram over this many bytes (`seal::seal_datagrams_at`).
    max_datagram: Option<usize>,
}

/// How often at most a misaddressed datagram is logged.
const MISADDRESSED_LOG_EVERY: Duration = Duration::from_secs(60);

impl SealedTransport {
    /// Over UDP. `me`: the addresses bound datagrams must name to be opened here; `send`: the
    /// formats this node sends.
    pub fn new(
        ring: KeyRing,
        cluster_id: impl Into<String>,
        me: Recipient,
        send: SendFormat,
    ) -> Self {
        SealedTransport {
            ring,
            cluster_id: cluster_id.into(),
            me,
            send,
            stats: Arc::default(),
            net: Arc::new(Udp),
            max_datagram: None,
        }
    }

    /// The same transport over another datagram network (a simulated one).
    pub fn over(mut self, net: Arc<dyn DatagramNet>) -> Self {
        self.net = net;
        self
    }

    /// Cuts every message into datagrams of at most `max_datagram` bytes (bounded gossip).
    pub fn within(mut self, max_datagram: Option<usize>) -> Self {
        self.max_datagram = max_datagram;
        self
    }

    pub fn stats(&self) -> Arc<TransportStats> {
        Arc::clone(&self.stats)
    }
}

fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket as RawSocket, Type};
    let socket = RawSocket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: a smaller buffer still works, it only drops more under bursts.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.set_nonblocking(true)?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("failed to bind {addr}/UDP for gossip"))?;
    Ok(tokio::net::UdpSocket::from_std(socket.into())?)
}

#[async_trait]
impl Transport for SealedTransport {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let socket = self.net.bind(listen_addr).await?;
        let mut me = self.me.clone();
        me.bound_at(socket.local_addr()?);
        Ok(Box::new(SealedSocket {
            socket,
            ring: self.ring.clone(),
            cluster_id: self.cluster_id.clone(),
            me,
            send: self.send,
            max_datagram: self.max_datagram,
            stats: Arc::clone(&self.stats),
            buf: vec![0u8; MAX_DATAGRAM + 1].into_boxed_slice(),
            partial: HashMap::new(),
            replays: ReplayCache::new(REPLAY_CACHE_CAPACITY),
            misaddressed_logged: None,
        }))
    }
}

struct Partial {
    first_seen: Instant,
    parts: Vec<Option<Vec<u8>>>,
}

struct SealedSocket {
    socket: Box<dyn DatagramSocket>,
    ring: KeyRing,
    cluster_id: String,
    me: Recipient,
    send: SendFormat,
    max_datagram: Option<usize>,
    stats: Arc<TransportStats>,
    buf: Box<[u8]>,
    partial: HashMap<(SocketAddr, u32), Partial>,
    replays: ReplayCache,
    misaddressed_logged: Option<Instant>,
}

#[async_trait]
impl Socket for SealedSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.socket.local_addr()
    }

    async fn send(
        &mut self,
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> anyhow::Result<SendOutcome> {
        let bytes = envelope.serialize_to_vec();
        let bound_to = (self.send == SendFormat::Bound).then_some(to);
        let frames = match self.max_datagram {
            Some(max) => seal_datagrams_at(
                &self.ring,
                &self.cluster_id,
                now_ms(),
                &bytes,
                rand::random(),
                bound_to,
                max,
            ),
            None => seal_datagrams(
                &self.ring,
                &self.cluster_id,
                now_ms(),
                &bytes,
                rand::random(),
                bound_to,
            ),
        };
        if frames.len() > 1 {
            self.stats.fragmented.fetch_add(1, Ordering::Relaxed);
        }
        let mut sent = 0;
        for f in &frames {
            match self.socket.send_to(f, to).await {
                Ok(n) => {
                    sent += n;
                    self.stats.datagrams_sent.fetch_add(1, Ordering::Relaxed);
                    self.stats
                        .max_datagram
                        .fetch_max(n as u64, Ordering::Relaxed);
                }
                // A peer that is gone or a full buffer is not a broken transport: gossip retries.
                Err(e) => tracing::debug!(to = %to, error = %e, "gossip send failed"),
            }
        }
        self.stats
            .bytes_sent
            .fetch_add(sent as u64, Ordering::Relaxed);
        Ok(SendOutcome {
            num_bytes_sent: sent,
        })
    }

    async fn recv(&mut self) -> anyhow::Result<RecvOutcome> {
        loop {
            let (n, from) = match self.socket.recv_from(&mut self.buf).await {
                Ok(r) => r,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e).context("gossip socket broken"),
            };
            self.stats
                .datagrams_received
                .fetch_add(1, Ordering::Relaxed);
            self.stats
                .bytes_received
                .fetch_add(n as u64, Ordering::Relaxed);
            if let Some(plain) = self.accept(from, n) {
                match ChitchatEnvelope::deserialize(&mut plain.as_slice()) {
                    Ok(envelope) => {
                        return Ok(RecvOutcome {
                            from_addr: from,
                            envelope,
                            num_bytes_received: n,
                        })
                    }
                    // Sealed by a member, yet not a chitchat message (another version?).
                    Err(e) => {
                        tracing::debug!(from = %from, error = %e, "undecodable gossip message");
                        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

impl SealedSocket {
    /// Counts a datagram bound to another node, and says so in the log (at most once a
    /// minute): a replay, or peers told to reach this node at an address it does not know.
    fn misaddressed(&mut self, from: SocketAddr, to: Option<SocketAddr>) {
        self.stats.misaddressed.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        if self
            .misaddressed_logged
            .is_some_and(|at| now.duration_since(at) < MISADDRESSED_LOG_EVERY)
        {
            return;
        }
        self.misaddressed_logged = Some(now);
        let to = to.map_or_else(|| "no address".to_string(), |a| a.to_string());
        tracing::warn!(
            %from,
            %to,
            "a sealed gossip datagram addressed to another node was refused: a replay, or \
             peers reach this node at an address it does not know (give it as --advertise or \
             --advertise-alias)"
        );
    }

    /// Opens one datagram, and reassembles a fragmented message, into envelope bytes; `None`
    /// (counted when it is a rejection) while a message is incomplete or when the datagram
    /// does not open, is not what a sender makes, or was seen before.
    fn accept(&mut self, from: SocketAddr, n: usize) -> Option<Vec<u8>> {
        let reject = |stats: &TransportStats| {
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            None
        };
        let Some(f) = parse_frame(&self.buf[..n]) else {
            return reject(&self.stats);
        };
        let now = now_ms();
        let opened = if f.fragment {
            self.ring
                .open(&fragment_aad(&self.cluster_id, f.header), now, f.body)
        } else {
            self.ring.open(self.cluster_id.as_bytes(), now, f.body)
        };
        let Some(mut opened) = opened else {
            return reject(&self.stats);
        };
        if f.bound {
            let to = decode_address(&opened.plain);
            if !to.is_some_and(|to| self.me.is_me(to)) {
                self.misaddressed(from, to);
                return reject(&self.stats);
            }
            opened.plain.drain(..ADDRESS);
        }
        if !self.replays.fresh(opened.nonce, now) {
            self.stats.replayed.fetch_add(1, Ordering::Relaxed);
            return reject(&self.stats);
        }
        if f.count == 1 {
            return Some(opened.plain);
        }
        let at = Instant::now();
        self.partial
            .retain(|_, p| at.duration_since(p.first_seen) < PARTIAL_TTL);
        let key = (from, f.message_id);
        if !self.partial.contains_key(&key) {
            let from_source = self.partial.keys().filter(|(s, _)| *s == from).count();
            if self.partial.len() >= MAX_PARTIAL || from_source >= MAX_PARTIAL_PER_SOURCE {
                return reject(&self.stats);
            }
        }
        let entry = self.partial.entry(key).or_insert_with(|| Partial {
            first_seen: at,
            parts: vec![None; usize::from(f.count)],
        });
        if entry.parts.len() != usize::from(f.count) {
            self.partial.remove(&key);
            return reject(&self.stats);
        }
        entry.parts[usize::from(f.index)] = Some(opened.plain);
        if entry.parts.iter().any(Option::is_none) {
            return None;
        }
        let parts = self.partial.remove(&key)?.parts;
        Some(parts.into_iter().flatten().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::seal_datagrams_within;
    use chitchat::{ChitchatMessage, ProtocolVersion};

    /// A sealed socket of cluster "c" on loopback: its key ring, counters, socket and address.
    async fn open_socket() -> (KeyRing, Arc<TransportStats>, Box<dyn Socket>, SocketAddr) {
        let ring = KeyRing::new("meshlb unit test passphrase", None).unwrap();
        let transport = SealedTransport::new(
            ring.clone(),
            "c",
            Recipient::new("127.0.0.1:0".parse().unwrap(), None, &[]),
            SendFormat::Bound,
        );
        let socket = transport
            .open("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let to = socket.local_addr().unwrap();
        (ring, transport.stats(), socket, to)
    }

    fn envelope() -> ChitchatEnvelope {
        ChitchatEnvelope {
            version: ProtocolVersion::V0,
            message: ChitchatMessage::BadCluster,
            peers: Vec::new(),
        }
    }

    async fn next(socket: &mut Box<dyn Socket>) -> RecvOutcome {
        tokio::time::timeout(Duration::from_secs(5), socket.recv())
            .await
            .expect("a message in time")
            .expect("recv")
    }

    /// Two fragments arriving out of order are reassembled, opened and decoded; garbage is
    /// counted as rejected and never surfaces.
    #[tokio::test]
    async fn fragments_are_reassembled_in_any_order() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let bytes = envelope().serialize_to_vec();
        let frames = seal_datagrams_within(&ring, "c", now_ms(), &bytes, 7, None, bytes.len() - 1);
        assert_eq!(frames.len(), 2);
        let sender = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        sender.send_to(b"not a meshlb datagram", to).await.unwrap();
        for f in frames.iter().rev() {
            sender.send_to(f, to).await.unwrap();
        }
        let got = next(&mut socket).await;
        assert_eq!(got.envelope, envelope());
        assert_eq!(got.from_addr, sender.local_addr().unwrap());
        assert_eq!(
            stats.rejected.load(Ordering::Relaxed),
            1,
            "the garbage datagram"
        );
    }

    /// Spoofed fragments (framed like ours, sealed with no key) are refused before anything is
    /// stored, so however many come, a real fragmented message still gets through.
    #[tokio::test]
    async fn spoofed_fragments_never_block_real_ones() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let sender = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let bytes = envelope().serialize_to_vec();
        let real = seal_datagrams_within(&ring, "c", now_ms(), &bytes, 99, None, bytes.len() - 1);
        // 200 first fragments of made-up messages: the reassembly table holds 64.
        let outsider = KeyRing::new("not the cluster key at all", None).unwrap();
        for id in 0..200u32 {
            let fake =
                seal_datagrams_within(&outsider, "c", now_ms(), &bytes, id, None, bytes.len() - 1);
            sender.send_to(&fake[0], to).await.unwrap();
        }
        for f in &real {
            sender.send_to(f, to).await.unwrap();
        }
        assert_eq!(next(&mut socket).await.envelope, envelope());
        assert_eq!(stats.rejected.load(Ordering::Relaxed), 200);
    }

    /// A captured datagram sent again (even from another address) is refused and counted.
    #[tokio::test]
    async fn a_replayed_datagram_is_refused() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let first = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let spoofer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let d = seal_datagrams(
            &ring,
            "c",
            now_ms(),
            &envelope().serialize_to_vec(),
            1,
            Some(to),
        );
        first.send_to(&d[0], to).await.unwrap();
        assert_eq!(
            next(&mut socket).await.from_addr,
            first.local_addr().unwrap()
        );
        spoofer.send_to(&d[0], to).await.unwrap();
        // A fresh message after the replay: the replay did not surface before it.
        let fresh = seal_datagrams(
            &ring,
            "c",
            now_ms(),
            &envelope().serialize_to_vec(),
            2,
            Some(to),
        );
        first.send_to(&fresh[0], to).await.unwrap();
        assert_eq!(
            next(&mut socket).await.from_addr,
            first.local_addr().unwrap()
        );
        assert_eq!(stats.replayed.load(Ordering::Relaxed), 1);
    }

    /// A datagram bound to another node (captured on its way there, replayed here, where the
    /// replay cache has not seen it) is refused and counted; one bound to this node, whole or
    /// in fragments, and an unbound one (from a node of an earlier version) are accepted.
    #[tokio::test]
    async fn a_datagram_bound_to_another_node_is_refused() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let sender = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let bytes = envelope().serialize_to_vec();
        let elsewhere: SocketAddr = "127.0.0.9:7946".parse().unwrap();
        let other_port = SocketAddr::new(to.ip(), to.port().wrapping_add(1));
        for wrong in [elsewhere, other_port] {
            for f in seal_datagrams(&ring, "c", now_ms(), &bytes, 3, Some(wrong)) {
                sender.send_to(&f, to).await.unwrap();
            }
        }
        let fragments =
            seal_datagrams_within(&ring, "c", now_ms(), &bytes, 4, Some(to), bytes.len() - 1);
        assert_eq!(fragments.len(), 2);
        let unbound = seal_datagrams(&ring, "c", now_ms(), &bytes, 5, None);
        for f in fragments.iter().chain(&unbound) {
            sender.send_to(f, to).await.unwrap();
        }
        assert_eq!(next(&mut socket).await.envelope, envelope());
        assert_eq!(next(&mut socket).await.envelope, envelope());
        assert_eq!(stats.misaddressed.load(Ordering::Relaxed), 2);
        assert_eq!(stats.rejected.load(Ordering::Relaxed), 2);
    }

    /// One sender may have at most 4 messages half-received; others are not held up by it.
    #[tokio::test]
    async fn half_received_messages_are_bounded_per_sender() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let noisy = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let other = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let bytes = envelope().serialize_to_vec();
        let frag =
            |id| seal_datagrams_within(&ring, "c", now_ms(), &bytes, id, None, bytes.len() - 1);
        for id in 0..10u32 {
            noisy.send_to(&frag(id)[0], to).await.unwrap();
        }
        for f in frag(500) {
            other.send_to(&f, to).await.unwrap();
        }
        assert_eq!(
            next(&mut socket).await.from_addr,
            other.local_addr().unwrap()
        );
        assert_eq!(stats.rejected.load(Ordering::Relaxed), 6, "the 5th to 10th");
    }

    /// A message sealed with the cluster's key that is not a chitchat envelope is counted and
    /// dropped; the next message still comes through.
    #[tokio::test]
    async fn sealed_garbage_is_rejected_not_fatal() {
        let (ring, stats, mut socket, to) = open_socket().await;
        let sender = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let sealed =
            |bytes: &[u8]| seal_datagrams(&ring, "c", now_ms(), bytes, rand::random(), None);
        // A chitchat magic number and version, then a truncated delta; then no magic at all.
        let mut truncated = envelope().serialize_to_vec();
        truncated[3] = 2; // claims an Ack, carries no delta
        for bytes in [truncated.as_slice(), b"\x00\x01 definitely not gossip"] {
            for f in sealed(bytes) {
                sender.send_to(&f, to).await.unwrap();
            }
        }
        for f in sealed(&envelope().serialize_to_vec()) {
            sender.send_to(&f, to).await.unwrap();
        }
        assert_eq!(next(&mut socket).await.envelope, envelope());
        assert_eq!(stats.rejected.load(Ordering::Relaxed), 2);
    }
}
