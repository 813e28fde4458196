//! How this aggregator reaches a private endpoint (docs/private-networks.md), for the
//! console's pool view and `/explain`: the endpoint's virtual network, the tunnel whose route
//! holds its address, this PoP's live connections of that tunnel and the PoPs gossip names as
//! its holders.

use lb_core::config::Address;
use lb_core::config::{Config, EndpointId, PoolId};
use serde::Serialize;

use crate::shared::Shared;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrivateReach {
    /// The virtual network's name.
    pub network: String,
    /// The tunnel's id and name; none when no route of the network holds the address (the
    /// config refuses that, so only a stale view shows it).
    pub tunnel_id: Option<String>,
    pub tunnel: Option<String>,
    /// This aggregator's live connections of the tunnel.
    pub connections_here: usize,
    /// The nodes gossip names as holding live connections of it.
    pub holders: Vec<String>,
}

impl PrivateReach {
    /// The reach of endpoint `e` of pool `p`; `None` for a public endpoint.
    pub fn of(shared: &Shared, config: &Config, p: PoolId, e: EndpointId) -> Option<PrivateReach> {
        let endpoint = config.pool(p).endpoints.get(e.0)?;
        let network = endpoint.network?;
        let private = &config.private;
        let route = match endpoint.address {
            Address::Ip(ip) => private.route(network, ip),
            Address::Hostname(_) => None,
        };
        let tunnel = route.map(|r| private.tunnel(r.tunnel));
        let id = tunnel.and_then(|t| t.id.parse::<tunnel::TunnelId>().ok());
        let connections_here = id
            .zip(shared.tunnel_hub.get())
            .map_or(0, |(id, hub)| hub.connections(&id).len());
        let holders = id
            .map(|id| shared.tunnel_holders.nodes_holding(&id))
            .unwrap_or_default();
        Some(PrivateReach {
            network: private
                .virtual_networks
                .get(network.0)
                .map(|n| n.name.clone())
                .unwrap_or_default(),
            tunnel_id: tunnel.map(|t| t.id.clone()),
            tunnel: tunnel.map(|t| t.name.clone()),
            connections_here,
            holders,
        })
    }

    /// One line for `/explain`'s steps: how `endpoint` is reached from here, or why not.
    pub fn in_words(&self, endpoint: &str) -> String {
        let Some(tunnel) = &self.tunnel else {
            return format!(
                "{endpoint} is private (network {}) but no route of it holds its address",
                self.network
            );
        };
        let through = if self.connections_here > 0 {
            format!(
                "through this PoP's {} connection(s) of it",
                self.connections_here
            )
        } else if !self.holders.is_empty() {
            format!("through a PoP holding it: {}", self.holders.join(", "))
        } else {
            "by no PoP: no connector of it is connected (HTTP 530, error 1033)".to_string()
        };
        format!(
            "{endpoint} is private (network {}): reached through tunnel {tunnel}, {through}",
            self.network
        )
    }
}

#[cfg(test)]
mod tests {
    use super::PrivateReach;

    fn reach(here: usize, holders: &[&str]) -> PrivateReach {
        PrivateReach {
            network: "office".into(),
            tunnel_id: Some("f70ff985-a4ef-4643-bbbc-4a0ed4fc8415".into()),
            tunnel: Some("hq".into()),
            connections_here: here,
            holders: holders.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_tunnel_held_here_is_told_as_this_pops_connections() {
        assert_eq!(
            reach(2, &["pop1"]).in_words("office/app"),
            "office/app is private (network office): reached through tunnel hq, through this PoP's 2 connection(s) of it"
        );
    }

    #[test]
    fn a_tunnel_held_elsewhere_names_its_holders() {
        assert!(reach(0, &["pop1", "pop3"])
            .in_words("office/app")
            .ends_with("through a PoP holding it: pop1, pop3"));
    }

    #[test]
    fn a_tunnel_held_nowhere_says_530() {
        assert!(reach(0, &[])
            .in_words("office/app")
            .ends_with("(HTTP 530, error 1033)"));
    }
}
