//! Which PoP holds which tunnel, as gossip carries it: every PoP with a tunnel listener
//! publishes where other PoPs relay through it and the pin of its certificate
//! ([`relay_value`]), and the tunnels it holds live connections of ([`held_value`]). A PoP
//! or a prober that holds no connection of a tunnel reads them back into [`Holder`]s.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use lb_tls::pin::SpkiPin;

use crate::token::TunnelId;

/// The most tunnel ids a `tunnels` value is read for: a hostile or broken member's value
/// costs no more than this.
pub const MAX_HELD: usize = 4096;

/// A PoP holding live connections of some tunnels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its node id in the mesh.
    pub node: String,
    /// Its tunnel listener (`--tunnel-advertise`, else `--tunnel-listen`).
    pub relay: SocketAddr,
    /// The pin of its tunnel certificate's key: gossip is sealed with the cluster key, so
    /// a pin read from it is as trusted as the mesh.
    pub pin: SpkiPin,
    /// The tunnels it holds, in order.
    pub tunnels: Vec<TunnelId>,
}

impl Holder {
    /// A holder from a member's two values; `None` when the relay value does not parse.
    pub fn read(node: &str, relay: &str, held: Option<&str>) -> Option<Holder> {
        let (addr, pin) = relay.trim().split_once(' ')?;
        Some(Holder {
            node: node.to_string(),
            relay: addr.parse().ok()?,
            pin: pin.parse().ok()?,
            tunnels: held.map(read_held).unwrap_or_default(),
        })
    }

    pub fn holds(&self, tunnel: &TunnelId) -> bool {
        self.tunnels.binary_search(tunnel).is_ok()
    }
}

/// The `tunnel_relay` value: the address other PoPs relay through and the certificate's pin.
pub fn relay_value(relay: SocketAddr, pin: &SpkiPin) -> String {
    format!("{relay} {pin}")
}

/// The `tunnels` value: the held tunnels' ids, comma-separated.
pub fn held_value(held: &[TunnelId]) -> String {
    held.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The ids of a `tunnels` value, in order; anything that is not an id is skipped, and no
/// more than [`MAX_HELD`] are read.
pub fn read_held(value: &str) -> Vec<TunnelId> {
    let mut held: Vec<TunnelId> = value
        .split(',')
        .take(MAX_HELD)
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    held.sort();
    held.dedup();
    held
}

/// The holders as last read from gossip, shared by whoever reads gossip and the dialer.
#[derive(Debug, Default)]
pub struct HolderList(RwLock<Arc<Vec<Holder>>>);

impl HolderList {
    pub fn set(&self, holders: Vec<Holder>) {
        if let Ok(mut h) = self.0.write() {
            if **h != holders {
                *h = Arc::new(holders);
            }
        }
    }

    pub fn get(&self) -> Arc<Vec<Holder>> {
        self.0.read().map(|h| Arc::clone(&h)).unwrap_or_default()
    }

    /// The nodes holding live connections of `tunnel`.
    pub fn nodes_holding(&self, tunnel: &TunnelId) -> Vec<String> {
        self.get()
            .iter()
            .filter(|h| h.holds(tunnel))
            .map(|h| h.node.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "sha256//AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    #[test]
    fn a_holder_reads_back_what_a_pop_publishes() {
        let a: TunnelId = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415".parse().expect("id");
        let b = TunnelId([1; 16]);
        let pin: SpkiPin = PIN.parse().expect("pin");
        let relay = relay_value("127.0.0.1:7000".parse().expect("addr"), &pin);
        let h = Holder::read("agg-1", &relay, Some(&held_value(&[b, a]))).expect("holder");
        assert_eq!(h.relay, "127.0.0.1:7000".parse().expect("addr"));
        assert_eq!(h.pin, pin);
        assert!(h.holds(&a) && h.holds(&b));
    }

    #[test]
    fn a_malformed_relay_value_is_no_holder_and_bad_ids_are_skipped() {
        assert_eq!(Holder::read("n", "not an address", None), None);
        assert_eq!(Holder::read("n", "127.0.0.1:1 sha256//short", None), None);
        let many = vec!["x"; MAX_HELD * 2].join(",");
        assert!(read_held(&many).is_empty());
        assert_eq!(read_held("00000000000000000000000000000001,zz").len(), 1);
    }
}
