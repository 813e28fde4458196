//! Free loopback ports for a child's listeners.

use std::net::{SocketAddr, TcpListener, UdpSocket};

/// A port below Linux's ephemeral range (32768 and up) that `bind` takes now, for a child's
/// listener: a port in that range that is free now can be handed to another process's outgoing
/// socket (a probe, a curl) before the child binds it, and the child then fails to start. Spread
/// by pid, and never the same twice within a test binary, whichever protocol asked.
fn free_port_below_ephemeral(what: &str, bind: impl Fn(u16) -> bool) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..2_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let offset = std::process::id().wrapping_mul(7_919).wrapping_add(n) % 12_000;
        let port = 20_000 + u16::try_from(offset).expect("below 12000");
        if bind(port) {
            return port;
        }
    }
    panic!("no free {what} port in 20000..32000");
}

/// A free UDP port on 127.0.0.1 for a child's gossip socket.
pub fn free_udp() -> SocketAddr {
    let port = free_port_below_ephemeral("UDP", |p| UdpSocket::bind(("127.0.0.1", p)).is_ok());
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A free TCP port on 127.0.0.1 for a child's listener (admin, proxy, DNS over TCP).
pub fn free_tcp() -> SocketAddr {
    let port = free_port_below_ephemeral("TCP", |p| TcpListener::bind(("127.0.0.1", p)).is_ok());
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A port on 127.0.0.1 free for both TCP and UDP (a DNS server or a layer-4 listener takes both).
pub fn free_tcp_and_udp() -> SocketAddr {
    let port = free_port_below_ephemeral("TCP and UDP", |p| {
        TcpListener::bind(("127.0.0.1", p)).is_ok() && UdpSocket::bind(("127.0.0.1", p)).is_ok()
    });
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The same on ::1, for a child listening on IPv6 loopback.
pub fn free_tcp_and_udp_v6() -> SocketAddr {
    let port = free_port_below_ephemeral("IPv6 TCP and UDP", |p| {
        TcpListener::bind(("::1", p)).is_ok() && UdpSocket::bind(("::1", p)).is_ok()
    });
    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))
}
