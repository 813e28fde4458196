//! DNS zones served authoritatively, and the geolocation sources of client addresses.

use std::path::PathBuf;

use ipnet::IpNet;

use crate::request::Location;

/// A zone: SOA and NS at its apex, its load-balanced names below.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// Lower-case, without the trailing dot.
    pub name: String,
    /// NS names at the apex (default `ns1.<zone>`).
    pub nameservers: Vec<String>,
    /// The SOA RNAME, as a host name (`hostmaster.example.com`).
    pub hostmaster: String,
    /// TTL of the SOA and NS records.
    pub ttl: u32,
    /// The SOA MINIMUM: how long resolvers cache NXDOMAIN and NODATA (RFC 2308).
    pub negative_ttl: u32,
    /// The SOA serial; default: when the configuration was loaded (Unix seconds).
    pub serial: Option<u32>,
}

impl Zone {
    /// The zone a load balancer is served in when no `[[zones]]` are configured: its own name.
    pub fn implicit(name: &str) -> Zone {
        Zone {
            name: name.to_string(),
            nameservers: vec![format!("ns1.{name}")],
            hostmaster: format!("hostmaster.{name}"),
            ttl: 3600,
            negative_ttl: 60,
            serial: None,
        }
    }

    /// Whether `name` (lower-case, no trailing dot) is the apex or below it.
    pub fn contains(&self, name: &str) -> bool {
        name == self.name
            || (name.len() > self.name.len()
                && name.ends_with(self.name.as_str())
                && name.as_bytes()[name.len() - self.name.len() - 1] == b'.')
    }
}

/// `[geolocation]`: a MaxMind-format database and a CIDR table (which wins: it is the
/// operator's own knowledge, for private networks and tests).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Geolocation {
    pub database: Option<PathBuf>,
    /// Longest prefix first.
    pub networks: Vec<GeoNetwork>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GeoNetwork {
    pub net: IpNet,
    pub location: Location,
}
