//! Validated pools and their endpoints.

use std::net::IpAddr;

use crate::geo::Coordinates;
use crate::region::Region;

/// Index of a pool in [`crate::config::Config::pools`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(pub usize);

/// Index of an endpoint within its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub usize);

/// A pool (Cloudflare: origin pool / endpoint pool).
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    pub description: String,
    pub enabled: bool,
    /// Healthy endpoints needed for the pool not to be Critical (default 1).
    pub minimum_origins: u32,
    /// The monitors its endpoints are probed with: the pool's `monitor` (one `Decides`
    /// check), or the enabled members of its `monitor_group`, in the group's order. Empty:
    /// not health-checked, endpoints count as healthy.
    pub checks: Vec<super::PoolCheck>,
    /// Index into `Config::monitor_groups` when the checks come from a group.
    pub monitor_group: Option<usize>,
    /// Regions whose probers check this pool (all 13 when unset or `ALL_REGIONS`).
    pub check_regions: Vec<Region>,
    /// For proximity steering.
    pub coordinates: Option<Coordinates>,
    pub endpoints: Vec<Endpoint>,
    pub load_shedding: LoadShedding,
    pub origin_steering: OriginSteering,
    pub health_sources: HealthSources,
    /// Which of this pool's health changes are notified (Cloudflare's notification_filter).
    pub notification_filter: super::NotificationFilter,
    /// Cloudflare's `notification_email`: this pool's health changes (as its filter lets
    /// through) are also mailed here, through the first `[[notifications.email]]` channel's
    /// SMTP server.
    pub notification_email: Vec<String>,
}

impl Pool {
    /// Whether any monitor checks its endpoints (else they always count as healthy).
    pub fn is_monitored(&self) -> bool {
        !self.checks.is_empty()
    }

    pub fn endpoint_by_name(&self, name: &str) -> Option<EndpointId> {
        self.endpoints
            .iter()
            .position(|e| e.name == name)
            .map(EndpointId)
    }
}

/// An endpoint (Cloudflare: origin).
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub name: String,
    pub address: Address,
    /// 0: the protocol's default port.
    pub port: u16,
    pub enabled: bool,
    /// 0.00..=1.00; 0 takes no new traffic but is still probed.
    pub weight: f64,
    /// 1..=5, lower first (Azure Front Door priority; used by the `latency` origin policy).
    pub priority: u8,
    /// Host header override (proxy and monitors).
    pub host_header: Option<String>,
    /// The virtual network of a private endpoint, reached through a tunnel
    /// (`config/private.rs`); `None`: the public internet.
    pub network: Option<super::private::NetworkIndex>,
}

/// Where an endpoint lives: an address answers A/AAAA, a hostname answers CNAME.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    Ip(IpAddr),
    Hostname(String),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Ip(ip) => write!(f, "{ip}"),
            Address::Hostname(h) => f.write_str(h),
        }
    }
}

/// Load shedding: a share of a pool's traffic leaves it for the next pool.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadShedding {
    /// Percent (0..=100) of new, non-affinity traffic shed.
    pub default_percent: f64,
    pub default_policy: ShedPolicy,
    /// Percent (0..=100) of affinity-bound traffic shed.
    pub session_percent: f64,
    pub session_policy: ShedPolicy,
}

crate::choice! {
    /// Whether a shed decision is a coin toss per request or a stable function of the client IP.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ShedPolicy {
        #[default]
        Random => "random",
        Hash => "hash",
    }
}

/// Endpoint steering within a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OriginSteering {
    pub policy: OriginPolicy,
    /// For `latency`: endpoints within this many ms of the fastest are kept (default 0).
    pub latency_sensitivity_ms: u32,
}

crate::choice! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum OriginPolicy {
        /// Weighted random (Cloudflare's default).
        #[default]
        Random => "random",
        /// Client IP and weight; consistent, so removing an endpoint moves only its clients.
        Hash => "hash",
        LeastOutstandingRequests => "least_outstanding_requests",
        LeastConnections => "least_connections",
        /// Azure Front Door: priority, then latency sensitivity, then weights.
        Latency => "latency",
    }
}

/// Which verdicts a PoP trusts for this pool: the global one only (Cloudflare), or its own
/// region's when it has one and the global one otherwise (meshlb's `["regional", "global"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthSources {
    #[default]
    Global,
    RegionalThenGlobal,
}
