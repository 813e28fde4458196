//! `[[tunnels]]`, `[[virtual_networks]]`, `[[routes]]` and an endpoint's `virtual_network_id`
//! (`config/private.rs`): ids are UUIDs, unique; a tunnel's secret is base64 of 32 bytes or
//! more; at most one default network; a route names a known tunnel and network (or the
//! default one) and no other route of that network has its CIDR; a private endpoint's address
//! is an IP inside a route of its network.

use std::collections::HashMap;
use std::net::IpAddr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ipnet::IpNet;

use super::Validator;
use crate::config::private::*;
use crate::config::raw::{RawRoute, RawTunnel, RawVirtualNetwork};

/// The shortest tunnel secret accepted (Cloudflare's `tunnel_secret`: at least 32 bytes).
pub const MIN_TUNNEL_SECRET_BYTES: usize = 32;

/// What pools' endpoints are checked against: each network's id and routes.
#[derive(Debug, Default)]
pub(in crate::config) struct Networks {
    by_id: HashMap<String, NetworkIndex>,
    routes: Vec<(NetworkIndex, IpNet)>,
}

impl Validator<'_> {
    pub(super) fn private_networks(
        &mut self,
        tunnels: &[RawTunnel],
        networks: &[RawVirtualNetwork],
        routes: &[RawRoute],
    ) -> PrivateNetworks {
        let tunnels = self.tunnels(tunnels);
        let tunnel_index: HashMap<&str, TunnelIndex> = tunnels
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), TunnelIndex(i)))
            .collect();
        let virtual_networks = self.virtual_networks(networks);
        let network_index: HashMap<String, NetworkIndex> = virtual_networks
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), NetworkIndex(i)))
            .collect();
        let default = virtual_networks
            .iter()
            .position(|n| n.is_default)
            .map(NetworkIndex);
        let mut seen: HashMap<(NetworkIndex, IpNet), usize> = HashMap::new();
        let mut route_ids = HashMap::new();
        let mut out = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            let path = format!("routes[{i}]");
            if let Some(id) = &r.id {
                self.uuid(&format!("{path}.id"), id, &mut route_ids);
            }
            self.timestamp(&path, r.created_at.as_deref());
            let network = match r.network.parse::<IpNet>() {
                Ok(n) if n.trunc() == n => Some(n),
                Ok(n) => {
                    self.sink.push(
                        format!("{path}.network"),
                        format!("`{n}` has host bits set (the network is {})", n.trunc()),
                    );
                    None
                }
                Err(_) => {
                    self.sink.push(
                        format!("{path}.network"),
                        format!("`{}` is not a CIDR (10.1.0.0/24, fd00::/64)", r.network),
                    );
                    None
                }
            };
            let tunnel =
                canonical_uuid(&r.tunnel_id).and_then(|id| tunnel_index.get(id.as_str()).copied());
            if tunnel.is_none() {
                self.sink.push(
                    format!("{path}.tunnel_id"),
                    format!("no tunnel `{}` in [[tunnels]]", r.tunnel_id),
                );
            }
            let vnet = match &r.virtual_network_id {
                Some(id) => {
                    let found = canonical_uuid(id).and_then(|id| network_index.get(&id).copied());
                    if found.is_none() {
                        self.sink.push(
                            format!("{path}.virtual_network_id"),
                            format!("no virtual network `{id}` in [[virtual_networks]]"),
                        );
                    }
                    found
                }
                None => {
                    if default.is_none() {
                        self.sink.push(
                            format!("{path}.virtual_network_id"),
                            "no default virtual network: give the route its virtual_network_id, or mark a network is_default_network = true",
                        );
                    }
                    default
                }
            };
            let (Some(network), Some(tunnel), Some(vnet)) = (network, tunnel, vnet) else {
                continue;
            };
            if let Some(first) = seen.insert((vnet, network), i) {
                self.sink.push(
                    format!("{path}.network"),
                    format!("routes[{first}] already routes {network} in this virtual network"),
                );
                continue;
            }
            out.push(Route {
                network,
                tunnel,
                virtual_network: vnet,
                comment: r.comment.clone(),
            });
        }
        self.networks = Networks {
            by_id: network_index,
            routes: out.iter().map(|r| (r.virtual_network, r.network)).collect(),
        };
        PrivateNetworks {
            tunnels,
            virtual_networks,
            routes: out,
        }
    }

    fn tunnels(&mut self, raw: &[RawTunnel]) -> Vec<Tunnel> {
        let mut ids = HashMap::new();
        let mut names = HashMap::new();
        let mut out = Vec::new();
        for (i, t) in raw.iter().enumerate() {
            let path = format!("tunnels[{i}]");
            let id = self.uuid(&format!("{path}.id"), &t.id, &mut ids);
            self.timestamp(&path, t.created_at.as_deref());
            if t.name.trim().is_empty() {
                self.sink
                    .push(format!("{path}.name"), "a tunnel needs a name");
            } else if let Some(first) = names.insert(t.name.clone(), i) {
                self.sink.push(
                    format!("{path}.name"),
                    format!("tunnels[{first}] is already named `{}`", t.name),
                );
            }
            let secret = match STANDARD.decode(t.tunnel_secret.trim()) {
                Ok(s) if s.len() >= MIN_TUNNEL_SECRET_BYTES => Some(s),
                // Neither error quotes the secret.
                Ok(s) => {
                    self.sink.push(
                        format!("{path}.tunnel_secret"),
                        format!(
                            "must be at least {MIN_TUNNEL_SECRET_BYTES} bytes (got {})",
                            s.len()
                        ),
                    );
                    None
                }
                Err(_) => {
                    self.sink
                        .push(format!("{path}.tunnel_secret"), "must be base64");
                    None
                }
            };
            if let (Some(id), Some(secret)) = (id, secret) {
                out.push(Tunnel {
                    id,
                    name: t.name.clone(),
                    secret,
                });
            }
        }
        out
    }

    fn virtual_networks(&mut self, raw: &[RawVirtualNetwork]) -> Vec<VirtualNetwork> {
        let mut ids = HashMap::new();
        let mut names = HashMap::new();
        let mut default = None;
        let mut out = Vec::new();
        for (i, n) in raw.iter().enumerate() {
            let path = format!("virtual_networks[{i}]");
            let id = self.uuid(&format!("{path}.id"), &n.id, &mut ids);
            self.timestamp(&path, n.created_at.as_deref());
            if n.name.trim().is_empty() {
                self.sink
                    .push(format!("{path}.name"), "a virtual network needs a name");
            } else if let Some(first) = names.insert(n.name.clone(), i) {
                self.sink.push(
                    format!("{path}.name"),
                    format!("virtual_networks[{first}] is already named `{}`", n.name),
                );
            }
            if n.is_default_network {
                if let Some(first) = default.replace(i) {
                    self.sink.push(
                        format!("{path}.is_default_network"),
                        format!("virtual_networks[{first}] is already the default"),
                    );
                }
            }
            if let Some(id) = id {
                out.push(VirtualNetwork {
                    id,
                    name: n.name.clone(),
                    comment: n.comment.clone(),
                    is_default: n.is_default_network,
                });
            }
        }
        out
    }

    /// A resource's `created_at`, when set: RFC 3339 in UTC, as the API writes it and
    /// Cloudflare's SDKs read it (`2026-12-07T16:25:00Z`, fractions of a second allowed).
    fn timestamp(&mut self, path: &str, at: Option<&str>) {
        if let Some(at) = at.filter(|at| !is_utc_timestamp(at)) {
            self.sink.push(
                format!("{path}.created_at"),
                format!(
                    "`{}` is not an RFC 3339 time in UTC (2026-12-07T16:25:00Z)",
                    at.chars().take(40).collect::<String>()
                ),
            );
        }
    }

    /// `raw` as a canonical UUID, unique among `seen`; an error at `path` otherwise.
    fn uuid(
        &mut self,
        path: &str,
        raw: &str,
        seen: &mut HashMap<String, String>,
    ) -> Option<String> {
        let Some(id) = canonical_uuid(raw) else {
            self.sink
                .push(path, format!("`{raw}` is not a UUID (32 hex digits)"));
            return None;
        };
        if let Some(first) = seen.insert(id.clone(), path.to_string()) {
            self.sink
                .push(path, format!("{first} already has the id {id}"));
            return None;
        }
        Some(id)
    }

    /// An endpoint's `virtual_network_id`: a known network whose routes hold its address.
    pub(super) fn endpoint_network(
        &mut self,
        path: &dyn Fn() -> String,
        id: &str,
        address: Option<IpAddr>,
    ) -> Option<NetworkIndex> {
        let Some(network) = canonical_uuid(id).and_then(|id| self.networks.by_id.get(&id).copied())
        else {
            self.sink.push(
                format!("{}.virtual_network_id", path()),
                format!("no virtual network `{id}` in [[virtual_networks]]"),
            );
            return None;
        };
        let Some(ip) = address else {
            self.sink.push(
                format!("{}.address", path()),
                "an endpoint in a virtual network needs an IP address (its route is found by it)",
            );
            return None;
        };
        let routed = self
            .networks
            .routes
            .iter()
            .any(|(n, net)| *n == network && net.contains(&ip));
        if !routed {
            self.sink.push(
                format!("{}.address", path()),
                format!("{ip} is in no route of virtual network `{id}`: add a [[routes]] entry holding it"),
            );
        }
        Some(network)
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, each field in range.
pub(crate) fn is_utc_timestamp(at: &str) -> bool {
    let b = at.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let s = at.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b.last() == Some(&b'Z');
    if !shape {
        return false;
    }
    let fraction = &at[19..at.len() - 1];
    let fraction_ok = fraction.is_empty()
        || (fraction.len() >= 2
            && fraction.starts_with('.')
            && fraction.len() <= 10
            && fraction[1..].bytes().all(|c| c.is_ascii_digit()));
    matches!(
        (
            digits(0..4),
            digits(5..7),
            digits(8..10),
            digits(11..13),
            digits(14..16),
            digits(17..19)
        ),
        (
            Some(_),
            Some(1..=12),
            Some(1..=31),
            Some(0..=23),
            Some(0..=59),
            Some(0..=60)
        )
    ) && fraction_ok
}
