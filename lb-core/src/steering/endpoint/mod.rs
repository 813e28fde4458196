//! Endpoint steering within the chosen pool (`origin_steering.policy`): which endpoints are
//! eligible, which one takes a proxied request, which set a DNS answer carries.

mod hash;
mod latency;

use std::net::IpAddr;

use rand::RngCore;
use smallvec::SmallVec;

use crate::config::{Config, EndpointId, OriginPolicy, PoolId};
use crate::health::HealthSnapshot;
use crate::region::Region;
use crate::request::Mode;
use crate::steering::trace::Trace;
use crate::steering::weighted::{transformed_weight, weighted_pick};
use crate::steering::EndpointList;

/// What endpoint steering reads.
pub(crate) struct EndpointView<'a> {
    pub config: &'a Config,
    pub health: &'a HealthSnapshot,
    pub mode: Mode,
    /// Region whose verdicts count for `health_sources = ["regional", "global"]`, and whose
    /// RTT the `latency` policy compares.
    pub pop_region: Region,
    pub client_ip: Option<IpAddr>,
    pub load: Option<&'a dyn crate::request::LoadCounts>,
}

impl EndpointView<'_> {
    pub fn usable(&self, pool: PoolId, endpoint: EndpointId) -> bool {
        self.health
            .endpoint_usable(self.config, pool, endpoint, self.pop_region)
    }

    pub fn weight(&self, pool: PoolId, endpoint: EndpointId) -> f64 {
        self.config.pool(pool).endpoints[endpoint.0].weight
    }

    pub fn name(&self, pool: PoolId, endpoint: EndpointId) -> &str {
        &self.config.pool(pool).endpoints[endpoint.0].name
    }
}

/// Which endpoints a pool admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Enabled and healthy: every pool, as steering reaches it.
    Healthy,
    /// Enabled, whatever their health: the fallback pool as the last resort, whose "state is
    /// not considered when routing" (Cloudflare; docs/design.md#the-fallback-pool).
    Enabled,
}

/// The endpoints that may take new traffic: enabled, healthy unless `admit` says otherwise,
/// weight above 0, not excluded, and for the `latency` policy within the priority and
/// latency-sensitivity cut.
pub(crate) fn eligible(
    view: &EndpointView<'_>,
    pool: PoolId,
    exclude: Option<EndpointId>,
    admit: Admit,
    trace: &mut Trace,
) -> EndpointList {
    let p = view.config.pool(pool);
    let admitted = |e: EndpointId| match admit {
        Admit::Healthy => view.usable(pool, e),
        Admit::Enabled => view.health.endpoint_enabled(view.config, pool, e),
    };
    let usable: EndpointList = (0..p.endpoints.len())
        .map(EndpointId)
        .filter(|&e| Some(e) != exclude && admitted(e) && view.weight(pool, e) > 0.0)
        .collect();
    if p.origin_steering.policy == OriginPolicy::Latency {
        latency::filter(
            view,
            pool,
            usable,
            p.origin_steering.latency_sensitivity_ms,
            trace,
        )
    } else {
        usable
    }
}

/// Picks one endpoint of `eligible` by the pool's policy.
pub(crate) fn pick(
    view: &EndpointView<'_>,
    pool: PoolId,
    eligible: &[EndpointId],
    rng: &mut dyn RngCore,
    trace: &mut Trace,
) -> Option<EndpointId> {
    let policy = view.config.pool(pool).origin_steering.policy;
    let chosen = match (policy, view.client_ip) {
        (OriginPolicy::Hash, Some(ip)) => hash::pick(view, pool, eligible, ip),
        _ => weighted_pick(&weighted_choices(view, pool, eligible), rng),
    };
    trace.note(|| match chosen {
        Some(e) => format!(
            "endpoint steering `{}` in pool {}: {} of {} eligible",
            policy.name(),
            view.config.pool(pool).name,
            view.name(pool, e),
            eligible.len()
        ),
        None => format!(
            "endpoint steering in pool {}: no eligible endpoint",
            view.config.pool(pool).name
        ),
    });
    chosen
}

/// The weights the pool's policy draws `eligible` by (every policy but `hash`, which does
/// not draw when it knows the client).
pub(crate) fn weighted_choices(
    view: &EndpointView<'_>,
    pool: PoolId,
    eligible: &[EndpointId],
) -> SmallVec<[(EndpointId, f64); 8]> {
    let policy = view.config.pool(pool).origin_steering.policy;
    // Read only for the policies that weigh them (the other policies ran this per request
    // for nothing).
    let counts = |e: EndpointId| {
        let live = || match view.load {
            Some(live) => live.endpoint(pool, e),
            None => {
                let h = view.health.endpoint(pool, e);
                (h.outstanding, h.connections)
            }
        };
        match (policy, view.mode) {
            // Cloudflare: without the proxy's counts LORS is plain weighted random
            // (docs/design.md#endpoint-steering).
            (_, Mode::Dns) => 0,
            (OriginPolicy::LeastOutstandingRequests, _) => live().0,
            (OriginPolicy::LeastConnections, _) => live().1,
            _ => 0,
        }
    };
    eligible
        .iter()
        .map(|&e| (e, transformed_weight(view.weight(pool, e), counts(e))))
        .collect()
}

/// Whether every eligible endpoint has the same weight: then a DNS answer carries them all
/// (Cloudflare's DNS-only rule), else exactly one.
pub(crate) fn equal_weights(
    view: &EndpointView<'_>,
    pool: PoolId,
    eligible: &[EndpointId],
) -> bool {
    let mut weights = eligible.iter().map(|&e| view.weight(pool, e));
    match weights.next() {
        Some(first) => weights.all(|w| (w - first).abs() < 1e-9),
        None => true,
    }
}
