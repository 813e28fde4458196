//! Private networks, in Cloudflare's shapes: tunnels (`cfd_tunnel`), virtual networks
//! (`teamnet/virtual_networks`) and routes (`teamnet/routes`: a CIDR of a virtual network
//! reached through a tunnel). An endpoint with a `virtual_network_id` is private: the PoPs reach
//! it through the tunnel whose route holds its address (`tunnel/`, docs/design.md#private-endpoints).

use std::net::IpAddr;

use ipnet::IpNet;

/// A tunnel's place in [`PrivateNetworks::tunnels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TunnelIndex(pub usize);

/// A virtual network's place in [`PrivateNetworks::virtual_networks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NetworkIndex(pub usize);

/// `[[tunnels]]`: one tunnel, whatever the number of its connectors (replicas).
#[derive(Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// A UUID, lowercase with dashes.
    pub id: String,
    pub name: String,
    /// `tunnel_secret`: 32 bytes or more; its connectors prove they hold it.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// `[[virtual_networks]]`: a namespace of private addresses (two networks may both hold
/// 10.0.0.0/8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualNetwork {
    pub id: String,
    pub name: String,
    pub comment: String,
    /// `is_default_network`: the network of a route that names none.
    pub is_default: bool,
}

/// `[[routes]]`: a private subnet of a virtual network, reached through a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub network: IpNet,
    pub tunnel: TunnelIndex,
    pub virtual_network: NetworkIndex,
    pub comment: String,
}

/// The tunnels, virtual networks and routes of a config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivateNetworks {
    pub tunnels: Vec<Tunnel>,
    pub virtual_networks: Vec<VirtualNetwork>,
    pub routes: Vec<Route>,
}

impl PrivateNetworks {
    /// The route that carries `ip` in `network`: the longest prefix that holds it.
    pub fn route(&self, network: NetworkIndex, ip: IpAddr) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| r.virtual_network == network && r.network.contains(&ip))
            .max_by_key(|r| r.network.prefix_len())
    }

    pub fn tunnel(&self, index: TunnelIndex) -> &Tunnel {
        &self.tunnels[index.0]
    }

    /// The subnets routed through `tunnel`.
    pub fn routes_of(&self, tunnel: TunnelIndex) -> impl Iterator<Item = IpNet> + '_ {
        self.routes
            .iter()
            .filter(move |r| r.tunnel == tunnel)
            .map(|r| r.network)
    }
}

/// `text` as a UUID, lowercase with dashes (Cloudflare writes them so), or `None`.
pub fn canonical_uuid(text: &str) -> Option<String> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    let dashed_right = text.len() == 36
        && text
            .char_indices()
            .all(|(i, c)| (c == '-') == matches!(i, 8 | 13 | 18 | 23));
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    if text.len() != 32 && !dashed_right {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}
