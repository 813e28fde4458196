//! What the steering engine knows about one request: where it was served, who asked, and
//! (when proxied) the HTTP fields custom rules and affinity look at.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::config::{EndpointId, PoolId};
use crate::geo::Coordinates;
use crate::region::Region;
use crate::regions_table::CountryCode;

/// Which frontend asks: DNS answers carry address sets, the proxy forwards to one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dns,
    Proxy,
}

/// The serving node (PoP): its region, datacenter and coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pop<'a> {
    pub region: Region,
    /// The datacenter code (`ams`), for `pop_pools`.
    pub datacenter: Option<&'a str>,
    /// The datacenter's country: a PoP-located client's country, for `country_pools`.
    pub country: Option<CountryCode>,
    pub coordinates: Coordinates,
}

/// A geolocation result; any part may be unknown.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Location {
    pub country: Option<CountryCode>,
    pub region: Option<Region>,
    pub coordinates: Option<Coordinates>,
}

/// The HTTP request fields, when proxied. Header names are lower-case.
#[derive(Debug, Clone, Copy)]
pub struct HttpFields<'a> {
    pub method: &'a str,
    pub host: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a [(String, String)],
    pub cookies: &'a [(String, String)],
    pub tls: bool,
}

impl<'a> HttpFields<'a> {
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn cookie(&self, name: &str) -> Option<&'a str> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The DNS question, when answering DNS.
#[derive(Debug, Clone, Copy)]
pub struct DnsQuestion<'a> {
    pub qname: &'a str,
    pub qtype: &'a str,
}

/// A header-affinity session the proxy found in its session table for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderBinding {
    pub pool: PoolId,
    pub endpoint: EndpointId,
    /// Unix seconds of the session's last request (its TTL resets on activity).
    pub last_seen: u64,
}

/// Live request and connection counts kept by the proxy, for `least_outstanding_requests`
/// and `least_connections`; without them the engine reads the snapshot's counts.
pub trait LoadCounts: Sync + std::fmt::Debug {
    /// (outstanding requests, open connections) of one endpoint.
    fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> (u32, u32);
    /// (outstanding requests, open connections) of one pool.
    fn pool(&self, pool: PoolId) -> (u32, u32);
}

/// One request, as the engine sees it.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext<'a> {
    pub mode: Mode,
    pub pop: Pop<'a>,
    /// The client (proxy) or the resolver (DNS).
    pub client_ip: Option<IpAddr>,
    /// The geolocation of `client_ip`, when known.
    pub client_location: Option<Location>,
    /// EDNS Client Subnet and its geolocation.
    pub ecs: Option<(IpNet, Location)>,
    pub http: Option<HttpFields<'a>>,
    pub dns: Option<DnsQuestion<'a>>,
    /// The raw value of the affinity cookie, if the request carried one.
    pub affinity_cookie: Option<&'a str>,
    pub header_binding: Option<HeaderBinding>,
    /// The proxy's live counts, when it has them.
    pub load: Option<&'a dyn LoadCounts>,
    /// The injected clock: Unix seconds.
    pub now: u64,
    /// Record a human-readable explanation of each step (off on hot paths).
    pub explain: bool,
}

impl<'a> RequestContext<'a> {
    /// A request with nothing but a PoP and a time.
    pub fn new(mode: Mode, pop: Pop<'a>, now: u64) -> Self {
        RequestContext {
            mode,
            pop,
            client_ip: None,
            client_location: None,
            ecs: None,
            http: None,
            dns: None,
            affinity_cookie: None,
            header_binding: None,
            load: None,
            now,
            explain: false,
        }
    }
}
