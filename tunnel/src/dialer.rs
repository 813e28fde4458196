//! Reaching a private endpoint from anywhere in the mesh: through this PoP's own connections
//! of the tunnel when it holds some, else through a PoP that does (a *holder*, as gossip
//! names them), connected holders nearest first by their measured handshake. A holder that
//! has lost its connections, or cannot be reached, is passed over for the next; a connector
//! that answered (the target unreachable from inside, or not a configured endpoint) ends the
//! search, since every replica sits in the same network.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use lb_edge::private_dial::PrivateDial;
use lb_edge::{Dial, PrivateDialError, PrivateStream};

use crate::holders::{Holder, HolderList};
use crate::pop::{Hub, HubLimits, OpenError};
use crate::relay::{Rank, RelayKey, Relays};
use crate::stream::TunnelStream;
use crate::token::TunnelId;

/// Opens streams through tunnels: locally, or through holders.
pub struct TunnelDialer {
    hub: Option<Arc<Hub>>,
    relays: Arc<Relays>,
    holders: Arc<HolderList>,
    /// This PoP's own tunnel address, as its gossip names it: never relayed through.
    me: Option<SocketAddr>,
    /// Holders being connected to in the background, to learn their handshake time.
    warming: Arc<Mutex<HashSet<SocketAddr>>>,
}

impl TunnelDialer {
    /// `hub` is this PoP's own (none on a prober, or a PoP without `--tunnel-listen`);
    /// `holders` is kept current from gossip by the caller; `timeout` bounds each connect
    /// to a holder and each stream's opening there. Connections to holders are pinged at
    /// the hub's default ping interval and timeout ([`HubLimits`]).
    pub fn new(
        hub: Option<Arc<Hub>>,
        key: RelayKey,
        holders: Arc<HolderList>,
        timeout: Duration,
    ) -> TunnelDialer {
        TunnelDialer {
            hub,
            relays: Arc::new(Relays::new(key, timeout, {
                let limits = HubLimits::default();
                (limits.ping_interval, limits.ping_timeout)
            })),
            holders,
            me: None,
            warming: Arc::default(),
        }
    }

    /// This PoP publishes `relay` as its tunnel address: it is no holder to relay through.
    pub fn with_self(self, relay: SocketAddr) -> TunnelDialer {
        TunnelDialer {
            me: Some(relay),
            ..self
        }
    }

    /// A stream to `target` through `tunnel`.
    pub async fn open(
        &self,
        tunnel: &TunnelId,
        target: SocketAddr,
    ) -> Result<TunnelStream, OpenError> {
        let mut last = OpenError::NoConnection;
        if let Some(hub) = self.hub.as_ref().filter(|h| h.holds(tunnel)) {
            match hub.open_tcp(tunnel, target).await {
                Ok(stream) => return Ok(stream),
                Err(e) if answered(&e) => return Err(e),
                Err(e) => last = e,
            }
        }
        for holder in self.order(tunnel) {
            match self.relays.open(&holder, tunnel, target).await {
                Ok(stream) => {
                    metrics::counter!("meshlb_tunnel_relayed_streams_total", "result" => "opened")
                        .increment(1);
                    return Ok(stream);
                }
                Err(e) if answered(&e) => return Err(e),
                Err(e) => last = e,
            }
        }
        metrics::counter!("meshlb_tunnel_relayed_streams_total", "result" => "failed").increment(1);
        Err(last)
    }

    /// The holders of `tunnel` in the order to try; the others never connected to are
    /// connected to in the background, so the next stream knows which is nearest.
    fn order(&self, tunnel: &TunnelId) -> Vec<Holder> {
        let holders = self.holders.get();
        let mut ranked: Vec<(Rank, &Holder)> = holders
            .iter()
            .filter(|h| h.holds(tunnel))
            .filter(|h| !self.is_me(h))
            .map(|h| (self.relays.rank(h), h))
            .collect();
        ranked.sort_by_key(|(rank, _)| *rank);
        // The first is connected to by the stream itself.
        for (_, holder) in ranked.iter().skip(1).filter(|(r, _)| *r == Rank::Untried) {
            self.warm((*holder).clone());
        }
        ranked.into_iter().map(|(_, h)| h.clone()).collect()
    }

    /// Whether `holder` is this PoP (whose own connections were tried first).
    fn is_me(&self, holder: &Holder) -> bool {
        self.me == Some(holder.relay)
    }

    fn warm(&self, holder: Holder) {
        let Ok(mut warming) = self.warming.lock() else {
            return;
        };
        if !warming.insert(holder.relay) {
            return;
        }
        let (relays, warming) = (Arc::clone(&self.relays), Arc::clone(&self.warming));
        tokio::spawn(async move {
            relays.warm(&holder).await;
            if let Ok(mut w) = warming.lock() {
                w.remove(&holder.relay);
            }
        });
    }
}

/// The seam the proxy, layer 4 and the monitors dial private endpoints through: the tunnel
/// is the one whose route in the endpoint's network holds its address.
impl Dial for TunnelDialer {
    fn dial<'a>(
        &'a self,
        networks: &'a PrivateNetworks,
        network: NetworkIndex,
        to: SocketAddr,
    ) -> PrivateDial<'a> {
        Box::pin(async move {
            let route = networks
                .route(network, to.ip())
                .ok_or(PrivateDialError::NoTunnel)?;
            let id: TunnelId = networks
                .tunnel(route.tunnel)
                .id
                .parse()
                .map_err(|_| PrivateDialError::NoTunnel)?;
            match self.open(&id, to).await {
                Ok(stream) => Ok(Box::new(stream) as Box<dyn PrivateStream>),
                Err(OpenError::NoConnection | OpenError::NotRouted) => {
                    Err(PrivateDialError::NoTunnel)
                }
                Err(OpenError::Unreachable(_)) => Err(PrivateDialError::Unreachable),
                Err(OpenError::TimedOut) => Err(PrivateDialError::TimedOut),
            }
        })
    }
}

/// Whether the connector answered: the stream failed past the tunnel, and no other holder or
/// connection would fare better.
fn answered(e: &OpenError) -> bool {
    matches!(e, OpenError::Unreachable(_) | OpenError::NotRouted)
}
