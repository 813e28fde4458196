//! ICMP echo with surge-ping, IPv4 and IPv6.
//!
//! One socket per address family is shared by every probe; each probe uses its own identifier
//! and sequence number, so concurrent pings never take each other's replies. Unprivileged
//! (datagram) ICMP sockets are tried first; where `net.ipv4.ping_group_range` refuses them (as
//! on Debian's default `1 0`, even for root), a raw socket needs CAP_NET_RAW.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use socket2::Type;
use surge_ping::{Client, Config, PingIdentifier, PingSequence, SurgeError, ICMP};
use tokio::sync::OnceCell;

use super::{socket_addr, Check};
use crate::failure::{Failure, Phase};
use crate::outcome::Attempt;
use crate::target::ProbeTarget;

const PAYLOAD: &[u8] = b"meshlb-probe-0123456789abcdef";

/// The prober's ICMP sockets, opened on first use.
#[derive(Clone, Default)]
pub struct IcmpClients(Arc<Inner>);

#[derive(Default)]
struct Inner {
    v4: OnceCell<Result<Client, Failure>>,
    v6: OnceCell<Result<Client, Failure>>,
    ident: AtomicU16,
    seq: AtomicU16,
}

impl IcmpClients {
    pub fn new() -> Self {
        let inner = Inner::default();
        // Start identifiers at a random point: several probers on one host share raw ICMP.
        inner.ident.store(rand::random(), Ordering::Relaxed);
        IcmpClients(Arc::new(inner))
    }

    async fn client(&self, v6: bool) -> Result<&Client, Failure> {
        let cell = if v6 { &self.0.v6 } else { &self.0.v4 };
        cell.get_or_init(|| async move { open(v6) })
            .await
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Sends one echo request and waits for its reply until `timeout`.
    pub async fn ping(&self, ip: IpAddr, timeout: Duration) -> Result<Duration, Failure> {
        let client = self.client(ip.is_ipv6()).await?;
        let ident = self.0.ident.fetch_add(1, Ordering::Relaxed);
        let seq = self.0.seq.fetch_add(1, Ordering::Relaxed);
        let mut pinger = client.pinger(ip, PingIdentifier(ident)).await;
        pinger.timeout(timeout);
        match pinger.ping(PingSequence(seq), PAYLOAD).await {
            Ok((_, rtt)) => Ok(rtt),
            Err(SurgeError::Timeout { .. }) => Err(Failure::TimeoutIn(Phase::NoEchoReply)),
            Err(e) => Err(Failure::Icmp(e.to_string())),
        }
    }
}

fn open(v6: bool) -> Result<Client, Failure> {
    let kind = if v6 { ICMP::V6 } else { ICMP::V4 };
    let dgram = Config::builder()
        .kind(kind)
        .sock_type_hint(Type::DGRAM)
        .build();
    match Client::new(&dgram) {
        Ok(c) => Ok(c),
        Err(dgram_err) => {
            let raw = Config::builder()
                .kind(kind)
                .sock_type_hint(Type::RAW)
                .build();
            Client::new(&raw).map_err(|raw_err| {
                Failure::Icmp(format!(
                    "cannot open an ICMP socket: unprivileged ({dgram_err}) needs net.ipv4.ping_group_range to include the prober's group; raw ({raw_err}) needs CAP_NET_RAW"
                ))
            })
        }
    }
}

pub(super) struct IcmpMonitor {
    clients: IcmpClients,
}

impl IcmpMonitor {
    pub(super) fn new(clients: IcmpClients) -> Self {
        IcmpMonitor { clients }
    }
}

impl Check for IcmpMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            let ip = match socket_addr(&target.address, 0).await {
                Ok(a) => a.ip(),
                Err(e) => return Attempt::fail(start.elapsed(), None, e),
            };
            match self.clients.ping(ip, timeout).await {
                Ok(rtt) => Attempt::pass(rtt, None),
                Err(e) => Attempt::fail(start.elapsed(), None, e),
            }
        })
    }
}
