//! Which addresses name this node, for datagrams bound to their recipient (formats 3 and 4,
//! `seal.rs`): a sender binds each datagram to the address it sends it to, and a receiver
//! opens only those bound to one of its own. Peers send to the address a node advertises
//! (`--advertise`, else `--listen`); a node that seeds are told to reach at another address
//! (a NAT or a load balancer's) lists it as an alias.

use std::net::SocketAddr;

/// What a node's sealed transport sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendFormat {
    /// Formats 3 and 4, bound to their recipient.
    #[default]
    Bound,
    /// Formats 1 and 2, which every version reads: for a rolling upgrade from a version
    /// that reads no other (docs/operations.md#upgrading-the-sealed-transport).
    Unbound,
}

/// This node's own addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    addresses: Vec<SocketAddr>,
    /// Listening on every address of `port` with none advertised: any address on the port
    /// may be this node's.
    any_on_port: Option<u16>,
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

impl Recipient {
    pub fn new(listen: SocketAddr, advertise: Option<SocketAddr>, aliases: &[SocketAddr]) -> Self {
        let mut addresses: Vec<SocketAddr> = std::iter::once(listen)
            .chain(advertise)
            .chain(aliases.iter().copied())
            .filter(|a| !a.ip().is_unspecified())
            .map(canonical)
            .collect();
        addresses.sort_unstable();
        addresses.dedup();
        let any_on_port =
            (listen.ip().is_unspecified() && advertise.is_none()).then_some(listen.port());
        Recipient {
            addresses,
            any_on_port,
        }
    }

    /// Adds the address the gossip socket got (its port, when `--listen` asked for port 0).
    pub fn bound_at(&mut self, local: SocketAddr) {
        if self.any_on_port == Some(0) {
            self.any_on_port = Some(local.port());
        }
        if !local.ip().is_unspecified() && !self.addresses.contains(&canonical(local)) {
            self.addresses.push(canonical(local));
        }
    }

    /// Whether a datagram bound to `to` is this node's.
    pub fn is_me(&self, to: SocketAddr) -> bool {
        self.any_on_port == Some(to.port()) || self.addresses.contains(&canonical(to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_node_is_its_listen_advertise_and_alias_addresses_only() {
        let me = Recipient::new(
            a("0.0.0.0:7946"),
            Some(a("203.0.113.5:7946")),
            &[a("198.51.100.9:17946")],
        );
        assert!(me.is_me(a("203.0.113.5:7946")));
        assert!(me.is_me(a("198.51.100.9:17946")));
        assert!(
            me.is_me(a("[::ffff:203.0.113.5]:7946")),
            "IPv4-mapped is IPv4"
        );
        // Another node on the same port: the replay this binding refuses.
        assert!(!me.is_me(a("203.0.113.6:7946")));
        assert!(!me.is_me(a("0.0.0.0:7946")));
        assert!(!me.is_me(a("203.0.113.5:7947")));
    }

    #[test]
    fn a_node_listening_everywhere_with_nothing_advertised_is_any_address_on_its_port() {
        let me = Recipient::new(a("0.0.0.0:7946"), None, &[]);
        assert!(me.is_me(a("127.0.0.1:7946")));
        assert!(me.is_me(a("10.0.0.1:7946")));
        assert!(!me.is_me(a("10.0.0.1:7947")));
        let fixed = Recipient::new(a("127.0.0.1:7946"), None, &[]);
        assert!(fixed.is_me(a("127.0.0.1:7946")));
        assert!(!fixed.is_me(a("127.0.0.2:7946")));
    }
}
