//! The health snapshot: what the aggregator's tally knows about every endpoint and pool, in
//! the shape the steering engine reads. Immutable once built; the aggregator swaps in a new
//! one (arc-swap) instead of mutating it.

use crate::config::{Config, EndpointId, HealthSources, Pool, PoolId};
use crate::region::{Region, RegionMap};

/// A tally's verdict on one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Healthy,
    Unhealthy,
    /// Never voted on yet: takes no traffic (Cloudflare treats it as down).
    #[default]
    Unknown,
}

impl Verdict {
    /// `Some(healthy)`, or `None` while Unknown.
    pub fn known(self) -> Option<bool> {
        match self {
            Verdict::Healthy => Some(true),
            Verdict::Unhealthy => Some(false),
            Verdict::Unknown => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Unhealthy => "unhealthy",
            Verdict::Unknown => "unknown",
        }
    }
}

/// What is known about one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EndpointHealth {
    /// The global verdict (majority of regions).
    pub verdict: Verdict,
    /// Each region's own verdict, for pools with `health_sources = ["regional", "global"]`.
    pub regional: RegionMap<bool>,
    /// EWMA of probe RTT from each region, milliseconds.
    pub rtt_ms: RegionMap<f64>,
    /// Requests in flight through the proxy (least_outstanding_requests).
    pub outstanding: u32,
    /// Open proxied connections (least_connections).
    pub connections: u32,
    /// Unix seconds when the endpoint was disabled at runtime (the admin API's drain): it
    /// takes no new traffic, and keeps its affinity sessions for `drain_duration`.
    pub disabled_at: Option<u64>,
}

/// What is known about one pool beyond its endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PoolHealth {
    /// EWMA of RTT from each region to the pool, milliseconds (dynamic steering).
    pub rtt_ms: RegionMap<f64>,
    pub outstanding: u32,
    pub connections: u32,
}

/// Pool state (docs/design.md#pool-states, as Cloudflare's): Healthy, Degraded, Critical, Unknown; the fallback pool's is never
/// consulted and shows as NoHealth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolState {
    Healthy,
    Degraded,
    Critical,
    Unknown,
    NoHealth,
}

impl PoolState {
    /// Whether steering may send new traffic to the pool.
    pub fn takes_traffic(self) -> bool {
        matches!(self, PoolState::Healthy | PoolState::Degraded)
    }

    pub fn name(self) -> &'static str {
        match self {
            PoolState::Healthy => "healthy",
            PoolState::Degraded => "degraded",
            PoolState::Critical => "critical",
            PoolState::Unknown => "unknown",
            PoolState::NoHealth => "no_health",
        }
    }
}

/// What `HealthSnapshot::endpoint` gives for an endpoint it does not have (the default).
static NO_ENDPOINT: EndpointHealth = EndpointHealth {
    verdict: Verdict::Unknown,
    regional: RegionMap::EMPTY,
    rtt_ms: RegionMap::EMPTY,
    outstanding: 0,
    connections: 0,
    disabled_at: None,
};

/// What `HealthSnapshot::pool` gives for a pool it does not have (the default).
static NO_POOL: PoolHealth = PoolHealth {
    rtt_ms: RegionMap::EMPTY,
    outstanding: 0,
    connections: 0,
};

/// The health of everything in a config, indexed like the config.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HealthSnapshot {
    /// Increases with every snapshot the aggregator publishes.
    pub version: u64,
    /// The configuration generation this snapshot is indexed by (`lb_edge::Generation`): its
    /// pools and endpoints are that config's, position for position.
    pub generation: u64,
    pub pools: Vec<PoolHealth>,
    /// `endpoints[pool][endpoint]`.
    pub endpoints: Vec<Vec<EndpointHealth>>,
    /// The aggregator lost every vote and kept the last known health ("fail static").
    pub fail_static: bool,
}

impl HealthSnapshot {
    /// Every endpoint with the given verdict and nothing else known.
    pub fn uniform(config: &Config, verdict: Verdict) -> Self {
        HealthSnapshot {
            version: 0,
            generation: 0,
            pools: vec![PoolHealth::default(); config.pools.len()],
            endpoints: config
                .pools
                .iter()
                .map(|p| {
                    vec![
                        EndpointHealth {
                            verdict,
                            ..Default::default()
                        };
                        p.endpoints.len()
                    ]
                })
                .collect(),
            fail_static: false,
        }
    }

    /// The first snapshot before any vote: monitored endpoints are Unknown.
    pub fn initial(config: &Config) -> Self {
        Self::uniform(config, Verdict::Unknown)
    }

    /// An endpoint's health; Unknown for one the snapshot does not have. A reference: the
    /// steering engine asks several times per endpoint per decision, and a copy is 264 bytes.
    pub fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> &EndpointHealth {
        self.endpoints
            .get(pool.0)
            .and_then(|e| e.get(endpoint.0))
            .unwrap_or(&NO_ENDPOINT)
    }

    /// A pool's health; empty for a pool the snapshot does not have.
    pub fn pool(&self, pool: PoolId) -> &PoolHealth {
        self.pools.get(pool.0).unwrap_or(&NO_POOL)
    }

    /// Whether the endpoint is healthy as seen from `pop`: unmonitored pools count every
    /// endpoint healthy; `health_sources = ["regional", "global"]` prefers the PoP region's
    /// own verdict.
    pub fn endpoint_healthy(
        &self,
        pool_cfg: &Pool,
        pool: PoolId,
        endpoint: EndpointId,
        pop: Region,
    ) -> bool {
        if !pool_cfg.is_monitored() {
            return true;
        }
        let h = self.endpoint(pool, endpoint);
        if pool_cfg.health_sources == HealthSources::RegionalThenGlobal {
            if let Some(regional) = h.regional.get(pop) {
                return regional;
            }
        }
        h.verdict == Verdict::Healthy
    }

    /// Enabled in the config and not disabled (drained) at runtime.
    pub fn endpoint_enabled(&self, config: &Config, pool: PoolId, endpoint: EndpointId) -> bool {
        let p = config.pool(pool);
        p.enabled
            && p.endpoints.get(endpoint.0).is_some_and(|e| e.enabled)
            && self.endpoint(pool, endpoint).disabled_at.is_none()
    }

    /// Whether an endpoint may take new traffic: pool and endpoint enabled, healthy.
    pub fn endpoint_usable(
        &self,
        config: &Config,
        pool: PoolId,
        endpoint: EndpointId,
        pop: Region,
    ) -> bool {
        self.endpoint_enabled(config, pool, endpoint)
            && self.endpoint_healthy(config.pool(pool), pool, endpoint, pop)
    }

    /// The pool's state as shown in `/status`, metrics and events: `NoHealth` for a pool that
    /// serves only as a fallback pool, whose state is never consulted (Cloudflare; docs/design.md#the-fallback-pool), else
    /// [`HealthSnapshot::pool_state`].
    pub fn shown_pool_state(&self, config: &Config, pool: PoolId, pop: Region) -> PoolState {
        if config.fallback_only(pool) {
            PoolState::NoHealth
        } else {
            self.pool_state(config, pool, pop)
        }
    }

    /// The pool's state as seen from `pop` (docs/design.md#pool-states).
    pub fn pool_state(&self, config: &Config, pool: PoolId, pop: Region) -> PoolState {
        let p = config.pool(pool);
        if !p.enabled {
            return PoolState::Critical;
        }
        let mut enabled = 0u32;
        let mut healthy = 0u32;
        let mut unknown = 0u32;
        for (i, e) in p.endpoints.iter().enumerate() {
            if !e.enabled || self.endpoint(pool, EndpointId(i)).disabled_at.is_some() {
                continue;
            }
            enabled += 1;
            let id = EndpointId(i);
            if self.endpoint_healthy(p, pool, id, pop) {
                healthy += 1;
            } else if p.is_monitored() && self.endpoint(pool, id).verdict == Verdict::Unknown {
                unknown += 1;
            }
        }
        if enabled > 0 && unknown == enabled {
            PoolState::Unknown
        } else if healthy < p.minimum_origins {
            PoolState::Critical
        } else if healthy == enabled {
            PoolState::Healthy
        } else {
            PoolState::Degraded
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_snapshot_lacks_reads_as_the_default() {
        let empty = HealthSnapshot::default();
        assert_eq!(
            *empty.endpoint(PoolId(3), EndpointId(7)),
            EndpointHealth::default()
        );
        assert_eq!(*empty.pool(PoolId(3)), PoolHealth::default());
    }
}
