//! The headers that tell an origin who the client is: the PROXY protocol's text (v1) and
//! binary (v2) headers (HAProxy's proxy-protocol.txt), and Cloudflare's Simple Proxy Protocol
//! for UDP (38 bytes: magic 0x56EC, client and proxy addresses as IPv6, IPv4 mapped, then
//! their ports). Pure byte builders.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use lb_core::config::Transport;

/// The v2 signature (proxy-protocol.txt section 2.2).
pub const V2_SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];

/// Simple Proxy Protocol's magic number and header length.
pub const SPP_MAGIC: [u8; 2] = [0x56, 0xEC];
pub const SPP_HEADER: usize = 38;

/// The same family for both: an IPv4 address next to an IPv6 one is written IPv4-mapped.
fn same_family(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    let v6 = |s: SocketAddr| match s.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), s.port()),
        IpAddr::V6(_) => s,
    };
    match (a.ip(), b.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => (a, b),
        _ => (v6(a), v6(b)),
    }
}

/// `PROXY TCP4 client proxy client-port proxy-port\r\n` (v1 is for TCP only).
pub fn v1(client: SocketAddr, proxy: SocketAddr) -> Vec<u8> {
    let (client, proxy) = same_family(client, proxy);
    let family = if client.is_ipv4() { "TCP4" } else { "TCP6" };
    format!(
        "PROXY {family} {} {} {} {}\r\n",
        client.ip(),
        proxy.ip(),
        client.port(),
        proxy.port()
    )
    .into_bytes()
}

/// The v2 header of a `transport` connection or datagram from `client` to `proxy`.
pub fn v2(transport: Transport, client: SocketAddr, proxy: SocketAddr) -> Vec<u8> {
    let (client, proxy) = same_family(client, proxy);
    let mut h = Vec::with_capacity(16 + 36);
    h.extend_from_slice(&V2_SIGNATURE);
    h.push(0x21); // version 2, PROXY
    let kind = match transport {
        Transport::Tcp => 0x1,
        Transport::Udp => 0x2,
    };
    match (client.ip(), proxy.ip()) {
        (IpAddr::V4(c), IpAddr::V4(p)) => {
            h.push(0x10 | kind);
            h.extend_from_slice(&12u16.to_be_bytes());
            h.extend_from_slice(&c.octets());
            h.extend_from_slice(&p.octets());
        }
        (c, p) => {
            h.push(0x20 | kind);
            h.extend_from_slice(&36u16.to_be_bytes());
            h.extend_from_slice(&v6_octets(c));
            h.extend_from_slice(&v6_octets(p));
        }
    }
    h.extend_from_slice(&client.port().to_be_bytes());
    h.extend_from_slice(&proxy.port().to_be_bytes());
    h
}

fn v6_octets(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The Simple Proxy Protocol header of a datagram from `client` to `proxy`.
pub fn simple(client: SocketAddr, proxy: SocketAddr) -> [u8; SPP_HEADER] {
    let mut h = [0u8; SPP_HEADER];
    h[..2].copy_from_slice(&SPP_MAGIC);
    h[2..18].copy_from_slice(&v6_octets(client.ip()));
    h[18..34].copy_from_slice(&v6_octets(proxy.ip()));
    h[34..36].copy_from_slice(&client.port().to_be_bytes());
    h[36..38].copy_from_slice(&proxy.port().to_be_bytes());
    h
}

/// The payload of an origin's reply under the Simple Proxy Protocol: origins echo the header
/// (Cloudflare's SPP), which the client must not see; a reply without one is passed whole.
pub fn strip_simple(reply: &[u8]) -> &[u8] {
    if reply.len() >= SPP_HEADER && reply[..2] == SPP_MAGIC {
        &reply[SPP_HEADER..]
    } else {
        reply
    }
}

/// The client address a Simple Proxy Protocol header carries (for tests and tools).
pub fn simple_client(header: &[u8]) -> Option<SocketAddr> {
    if header.len() < SPP_HEADER || header[..2] != SPP_MAGIC {
        return None;
    }
    let ip: [u8; 16] = header[2..18].try_into().ok()?;
    let port = u16::from_be_bytes([header[34], header[35]]);
    Some(SocketAddr::new(Ipv6Addr::from(ip).to_canonical(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn v1_is_the_text_line_haproxy_reads() {
        assert_eq!(
            v1(a("192.0.2.1:5000"), a("198.51.100.2:22")),
            b"PROXY TCP4 192.0.2.1 198.51.100.2 5000 22\r\n"
        );
        assert_eq!(
            v1(a("[2001:db8::1]:5000"), a("198.51.100.2:22")),
            b"PROXY TCP6 2001:db8::1 ::ffff:198.51.100.2 5000 22\r\n"
        );
    }

    #[test]
    fn v2_has_the_signature_family_and_addresses() {
        let h = v2(Transport::Tcp, a("192.0.2.1:5000"), a("198.51.100.2:22"));
        assert_eq!(&h[..12], &V2_SIGNATURE);
        assert_eq!((h[12], h[13]), (0x21, 0x11));
        assert_eq!(u16::from_be_bytes([h[14], h[15]]), 12);
        assert_eq!(&h[16..20], &[192, 0, 2, 1]);
        assert_eq!(&h[24..26], &5000u16.to_be_bytes());
        assert_eq!(h.len(), 28);
        let u = v2(Transport::Udp, a("[2001:db8::1]:53"), a("[2001:db8::2]:53"));
        assert_eq!((u[13], u.len()), (0x22, 16 + 36));
    }

    #[test]
    fn simple_round_trips_and_replies_lose_their_header() {
        let h = simple(a("192.0.2.1:5000"), a("198.51.100.2:53"));
        assert_eq!(h.len(), 38);
        assert_eq!(simple_client(&h), Some(a("192.0.2.1:5000")));
        let mut reply = h.to_vec();
        reply.extend_from_slice(b"answer");
        assert_eq!(strip_simple(&reply), b"answer");
        assert_eq!(strip_simple(b"plain"), b"plain");
    }
}
