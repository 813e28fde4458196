//! UDP-ICMP (Cloudflare): an ICMP echo must pass first; then a UDP datagram goes to the port.
//! An ICMP port-unreachable within the timeout — seen on a connected socket as ECONNREFUSED —
//! fails the probe; silence (or any reply) passes.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::net::UdpSocket;

use super::{icmp::IcmpClients, socket_addr, Check};
use crate::failure::Failure;
use crate::outcome::Attempt;
use crate::target::ProbeTarget;

pub(super) struct UdpIcmpMonitor {
    clients: IcmpClients,
}

impl UdpIcmpMonitor {
    pub(super) fn new(clients: IcmpClients) -> Self {
        UdpIcmpMonitor { clients }
    }
}

impl Check for UdpIcmpMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            let addr = match socket_addr(&target.address, target.port).await {
                Ok(a) => a,
                Err(e) => return Attempt::fail(start.elapsed(), None, e),
            };
            let rtt = match self.clients.ping(addr.ip(), timeout).await {
                Ok(rtt) => rtt,
                Err(e) => {
                    return Attempt::fail(start.elapsed(), None, Failure::EchoFirst(Box::new(e)))
                }
            };
            let bind = if addr.is_ipv6() {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            };
            let socket = match UdpSocket::bind(bind).await {
                Ok(s) => s,
                Err(e) => return Attempt::fail(start.elapsed(), None, Failure::Udp(e.to_string())),
            };
            if let Err(e) = socket.connect(addr).await {
                return Attempt::fail(start.elapsed(), None, Failure::Udp(e.to_string()));
            }
            if let Err(e) = socket.send(b"meshlb udp probe").await {
                return Attempt::fail(start.elapsed(), None, udp_reason(&e));
            }
            let remaining = timeout.saturating_sub(start.elapsed());
            let mut buf = [0u8; 512];
            match tokio::time::timeout(remaining, socket.recv(&mut buf)).await {
                // Silence until the deadline, or an answer: the port is open.
                Err(_) | Ok(Ok(_)) => Attempt::pass(rtt, None),
                Ok(Err(e)) => Attempt::fail(start.elapsed(), None, udp_reason(&e)),
            }
        })
    }
}

fn udp_reason(e: &std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        Failure::PortUnreachable
    } else {
        Failure::Udp(e.to_string())
    }
}
