//! Validated load balancers, their steering settings and custom rules.

use std::collections::BTreeMap;

use crate::config::pool::PoolId;
use crate::region::Region;
use crate::regions_table::CountryCode;
use crate::rules::Condition;

/// Index of a load balancer in [`crate::config::Config::load_balancers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LbId(pub usize);

/// A load balancer: a hostname answered by DNS or proxied.
#[derive(Debug, Clone)]
pub struct LoadBalancer {
    /// The hostname, lower-case, without a trailing dot.
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub proxied: bool,
    /// Custom rules, sorted by priority (lower first; ties keep file order).
    pub rules: Vec<Rule>,
    /// Everything a rule can override.
    pub settings: SteeringSettings,
    /// How the proxy connects to this load balancer's origins.
    pub origin_tls: OriginTls,
    /// Extra trust anchors for `OriginTls::Strict`.
    pub origin_ca_file: Option<std::path::PathBuf>,
    /// The client certificate presented to origins (authenticated origin pulls).
    pub origin_client_cert: Option<ClientCertFiles>,
    /// `Some` for a layer-4 (TCP or UDP) load balancer, which is always `proxied`; `None`
    /// for HTTP.
    pub layer4: Option<crate::config::Layer4>,
}

/// A client certificate chain and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientCertFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// How a connection to an origin is made over TLS: the proxy's for a load balancer, and a
/// `probe_zone` monitor's, which probes as the zone's proxied traffic connects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OriginTlsSettings {
    pub mode: OriginTls,
    /// Extra trust anchors for `OriginTls::Strict`.
    pub ca_file: Option<std::path::PathBuf>,
    pub client_cert: Option<ClientCertFiles>,
}

impl OriginTlsSettings {
    /// `full`: any certificate is accepted (the handshake's signatures are still checked).
    pub fn accepts_any_certificate(&self) -> bool {
        self.mode == OriginTls::Full
    }

    /// Trust anchors added to the public roots (`strict` only).
    pub fn trust_anchors(&self) -> Option<&std::path::Path> {
        (self.mode == OriginTls::Strict)
            .then_some(self.ca_file.as_deref())
            .flatten()
    }

    /// The client certificate and key files presented to origins.
    pub fn identity(&self) -> Option<(&std::path::Path, &std::path::Path)> {
        self.client_cert
            .as_ref()
            .map(|c| (c.cert.as_path(), c.key.as_path()))
    }
}

impl LoadBalancer {
    /// How the proxy connects to this load balancer's origins.
    pub fn origin_tls_settings(&self) -> OriginTlsSettings {
        OriginTlsSettings {
            mode: self.origin_tls,
            ca_file: self.origin_ca_file.clone(),
            client_cert: self.origin_client_cert.clone(),
        }
    }

    /// Whether the HTTP proxy serves this load balancer (proxied, and not layer 4).
    pub fn proxied_http(&self) -> bool {
        self.proxied && self.layer4.is_none()
    }
}

/// Cloudflare's SSL modes as they concern the origin side of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OriginTls {
    /// Plain HTTP to origins ("off" and "flexible"); port 80 by default.
    #[default]
    Off,
    /// HTTPS, any certificate ("full"); a failed handshake is a 525. Port 443 by default.
    Full,
    /// HTTPS with a certificate valid for the name sent ("full (strict)"); an invalid one
    /// is a 526. Port 443 by default.
    Strict,
}

/// The overridable part of a load balancer.
#[derive(Debug, Clone, PartialEq)]
pub struct SteeringSettings {
    pub default_pools: Vec<PoolId>,
    pub fallback_pool: Option<PoolId>,
    pub region_pools: BTreeMap<Region, Vec<PoolId>>,
    pub country_pools: BTreeMap<CountryCode, Vec<PoolId>>,
    /// Keyed by datacenter code (lower-case), the PoP that serves the request.
    pub pop_pools: BTreeMap<String, Vec<PoolId>>,
    pub steering_policy: SteeringPolicy,
    pub random_steering: RandomSteering,
    pub session_affinity: SessionAffinity,
    pub adaptive_routing: AdaptiveRouting,
    pub location_strategy: LocationStrategy,
    /// DNS answer TTL, seconds (default 30).
    pub ttl: u32,
}

impl SteeringSettings {
    /// Whether this load balancer can send traffic to `pool` (no allocation: hot path).
    pub fn uses_pool(&self, pool: PoolId) -> bool {
        self.default_pools.contains(&pool)
            || self.fallback_pool == Some(pool)
            || self
                .region_pools
                .values()
                .chain(self.country_pools.values())
                .chain(self.pop_pools.values())
                .any(|l| l.contains(&pool))
    }

    /// Every pool this load balancer can send traffic to, each once.
    pub fn all_pools(&self) -> Vec<PoolId> {
        let mut all: Vec<PoolId> = self.default_pools.clone();
        let maps = self
            .region_pools
            .values()
            .chain(self.country_pools.values())
            .chain(self.pop_pools.values());
        for p in maps.flatten().chain(self.fallback_pool.iter()) {
            if !all.contains(p) {
                all.push(*p);
            }
        }
        all
    }
}

crate::choice! {
    /// Traffic steering: how a pool is chosen.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SteeringPolicy {
        /// Failover: the first usable pool of `default_pools`.
        Off => "off",
        Random => "random",
        Geo => "geo",
        DynamicLatency => "dynamic_latency",
        Proximity => "proximity",
        LeastOutstandingRequests => "least_outstanding_requests",
        LeastConnections => "least_connections",
    }
}

impl SteeringPolicy {
    /// Reads where the client is (its ECS subnet, its resolver or the PoP): the answer
    /// depends on the client's location, so it is explained with it and its ECS scope is the
    /// subnet's when the subnet located it.
    pub const fn reads_location(self) -> bool {
        match self {
            SteeringPolicy::Geo | SteeringPolicy::DynamicLatency | SteeringPolicy::Proximity => {
                true
            }
            SteeringPolicy::Off
            | SteeringPolicy::Random
            | SteeringPolicy::LeastOutstandingRequests
            | SteeringPolicy::LeastConnections => false,
        }
    }

    /// Draws a pool per decision, weighted by `random_steering` (and by the pools' loads for
    /// the least-* policies): no two queries need get the same answer, so DNS cannot plan it
    /// ahead, and weights that are all 0 can never pick.
    pub const fn draws(self) -> bool {
        match self {
            SteeringPolicy::Random
            | SteeringPolicy::LeastOutstandingRequests
            | SteeringPolicy::LeastConnections => true,
            SteeringPolicy::Off
            | SteeringPolicy::Geo
            | SteeringPolicy::DynamicLatency
            | SteeringPolicy::Proximity => false,
        }
    }

    /// What the policy does, in a sentence (`meshlb explain`, docs).
    pub const fn help(self) -> &'static str {
        match self {
            SteeringPolicy::Off => "failover: the first usable pool of default_pools, in order",
            SteeringPolicy::Random => "a pool drawn by random_steering's weights",
            SteeringPolicy::Geo => {
                "the pools mapped to the client's country, region or PoP, then default_pools"
            }
            SteeringPolicy::DynamicLatency => {
                "the pool with the lowest RTT measured from the client's region"
            }
            SteeringPolicy::Proximity => "the pool nearest the client's coordinates",
            SteeringPolicy::LeastOutstandingRequests => {
                "a pool drawn by weight divided by its requests in flight"
            }
            SteeringPolicy::LeastConnections => {
                "a pool drawn by weight divided by its open connections"
            }
        }
    }
}

/// Pool weights of random (and least-outstanding) steering.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RandomSteering {
    /// Weight of a pool missing from `pool_weights` (default 1).
    pub default_weight: f64,
    pub pool_weights: BTreeMap<PoolId, f64>,
}

impl RandomSteering {
    pub fn weight(&self, pool: PoolId) -> f64 {
        self.pool_weights
            .get(&pool)
            .copied()
            .unwrap_or(self.default_weight)
    }
}

/// Session affinity and its attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionAffinity {
    pub kind: AffinityKind,
    /// Seconds. Cookie: default 82800, 1800..=604800, never reset. Header: default 1800,
    /// 30..=3600, reset on activity.
    pub ttl: u32,
    pub samesite: SameSite,
    pub secure: Secure,
    /// Seconds a disabled endpoint keeps its existing sessions (0: none).
    pub drain_duration: u32,
    pub zero_downtime_failover: ZeroDowntimeFailover,
    /// For `header` affinity: 1..=5 header names, `cookie:<name>` for a cookie.
    pub headers: Vec<String>,
    pub require_all_headers: bool,
}

crate::choice! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AffinityKind {
        None => "none",
        Cookie => "cookie",
        IpCookie => "ip_cookie",
        Header => "header",
    }
}

crate::choice! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SameSite {
        Auto => "Auto",
        Lax => "Lax",
        None => "None",
        Strict => "Strict",
    }
}

crate::choice! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Secure {
        Auto => "Auto",
        Always => "Always",
        Never => "Never",
    }
}

crate::choice! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ZeroDowntimeFailover {
        None => "none",
        /// Retry elsewhere; the affinity cookie keeps naming the original endpoint.
        Temporary => "temporary",
        /// Retry elsewhere and rewrite the affinity cookie to the new endpoint.
        Sticky => "sticky",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdaptiveRouting {
    /// The zero-downtime retry may go to the next pool when the pool has no other endpoint.
    pub failover_across_pools: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocationStrategy {
    pub prefer_ecs: PreferEcs,
    pub mode: LocationMode,
}

impl Default for LocationStrategy {
    fn default() -> Self {
        LocationStrategy {
            prefer_ecs: PreferEcs::Proximity,
            mode: LocationMode::Pop,
        }
    }
}

crate::choice! {
    /// When the EDNS Client Subnet locates the client.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PreferEcs {
        Always => "always",
        Never => "never",
        /// Only for proximity steering (Cloudflare's default).
        Proximity => "proximity",
        /// Only for geo steering.
        Geo => "geo",
    }
}

impl PreferEcs {
    /// Whether the client's ECS subnet locates it under `policy`.
    pub fn applies_to(self, policy: SteeringPolicy) -> bool {
        match self {
            PreferEcs::Always => true,
            PreferEcs::Never => false,
            PreferEcs::Proximity => policy == SteeringPolicy::Proximity,
            PreferEcs::Geo => policy == SteeringPolicy::Geo,
        }
    }
}

crate::choice! {
    /// Where the client is when the ECS is not used.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum LocationMode {
        /// The serving node's region and coordinates.
        Pop => "pop",
        /// The resolver's geolocation, falling back to the PoP.
        ResolverIp => "resolver_ip",
    }
}

/// A custom rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub condition: Condition,
    pub priority: u32,
    /// Stop evaluating further rules after this one matches.
    pub terminates: bool,
    pub action: RuleAction,
}

#[derive(Debug, Clone)]
pub enum RuleAction {
    /// Answer directly (proxy only); always terminates.
    FixedResponse(FixedResponse),
    Overrides(Box<Overrides>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedResponse {
    pub status_code: u16,
    pub message_body: String,
    pub content_type: String,
    pub location: Option<String>,
}

/// Replacements for parts of [`SteeringSettings`]; `None` keeps the load balancer's own.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Overrides {
    pub default_pools: Option<Vec<PoolId>>,
    pub fallback_pool: Option<PoolId>,
    pub region_pools: Option<BTreeMap<Region, Vec<PoolId>>>,
    pub country_pools: Option<BTreeMap<CountryCode, Vec<PoolId>>>,
    pub pop_pools: Option<BTreeMap<String, Vec<PoolId>>>,
    pub steering_policy: Option<SteeringPolicy>,
    pub random_steering: Option<RandomSteering>,
    pub session_affinity: Option<SessionAffinity>,
    pub adaptive_routing: Option<AdaptiveRouting>,
    pub location_strategy: Option<LocationStrategy>,
    pub ttl: Option<u32>,
}

impl Overrides {
    /// Applies these overrides on top of `settings`.
    pub fn apply_to(&self, settings: &mut SteeringSettings) {
        macro_rules! take {
            ($($f:ident),*) => {$(
                if let Some(v) = &self.$f {
                    settings.$f = v.clone();
                }
            )*};
        }
        take!(
            default_pools,
            region_pools,
            country_pools,
            pop_pools,
            steering_policy,
            random_steering,
            session_affinity,
            adaptive_routing,
            location_strategy,
            ttl
        );
        if let Some(p) = self.fallback_pool {
            settings.fallback_pool = Some(p);
        }
    }
}
