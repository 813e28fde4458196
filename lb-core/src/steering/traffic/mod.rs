//! Traffic steering: which pools, in what order of preference. The first usable one takes the
//! request; later ones take it when the first sheds load or has no usable endpoint, and the
//! fallback pool is the last resort (docs/design.md#the-fallback-pool has its participation table; [`candidates`] follows it).

mod dynamic_latency;
mod geo;
mod proximity;
mod weighted;

use rand::RngCore;

use crate::config::{Config, PoolId, SteeringPolicy, SteeringSettings};
use crate::health::{HealthSnapshot, PoolState};
use crate::request::Mode;
use crate::steering::location::ClientLocation;
use crate::steering::trace::Trace;
use crate::steering::PoolList;

/// Pools in preference order (the fallback among them where the policy lets it take part,
/// with its health counted), and the fallback pool as the last resort after all of them,
/// its health not counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidates {
    pub pools: PoolList,
    pub last_resort: Option<PoolId>,
}

/// What traffic steering reads: the config, the snapshot, and who is asking from where.
pub(crate) struct PoolView<'a> {
    pub config: &'a Config,
    pub health: &'a HealthSnapshot,
    pub location: ClientLocation,
    pub mode: Mode,
    /// Regional health is judged from the serving PoP's region.
    pub pop_region: crate::region::Region,
    /// The serving PoP's datacenter code, for `pop_pools`.
    pub pop_datacenter: Option<&'a str>,
    pub load: Option<&'a dyn crate::request::LoadCounts>,
}

impl PoolView<'_> {
    pub fn state(&self, pool: PoolId) -> PoolState {
        self.health.pool_state(self.config, pool, self.pop_region)
    }

    pub fn usable(&self, pool: PoolId) -> bool {
        self.state(pool).takes_traffic()
    }

    pub fn name(&self, pool: PoolId) -> &str {
        &self.config.pool(pool).name
    }

    /// `[a (healthy), b (critical)]`, for explanations.
    pub fn describe(&self, pools: &[PoolId]) -> String {
        let parts: Vec<String> = pools
            .iter()
            .map(|&p| format!("{} ({})", self.name(p), self.state(p).name()))
            .collect();
        format!("[{}]", parts.join(", "))
    }
}

pub(crate) fn candidates(
    settings: &SteeringSettings,
    view: &PoolView<'_>,
    rng: &mut dyn RngCore,
    trace: &mut Trace,
) -> Candidates {
    let fallback = settings.fallback_pool;
    let defaults: PoolList = settings
        .default_pools
        .iter()
        .copied()
        .filter(|&p| view.usable(p))
        .collect();
    // Cloudflare (docs/design.md#the-fallback-pool): dynamic and geo (and, by our choice, proximity and the least-* policies) let
    // the fallback pool take part when it is healthy; random always puts it in the draw;
    // off uses it only when every other pool is critical.
    let with_healthy_fallback = |mut pools: PoolList| {
        if let Some(f) = fallback {
            if !pools.contains(&f) && view.usable(f) {
                pools.push(f);
            }
        }
        pools
    };
    let policy = settings.steering_policy;
    trace.note(|| {
        format!(
            "traffic steering `{}`: default pools {}",
            policy.name(),
            view.describe(&settings.default_pools)
        )
    });
    let pools = match policy {
        SteeringPolicy::Off => {
            trace.note(|| "failover order: first usable default pool".to_string());
            defaults
        }
        SteeringPolicy::Random => {
            let mut drawable = PoolList::from_slice(&settings.default_pools);
            if let Some(f) = fallback {
                if !drawable.contains(&f) && view.config.pool(f).enabled {
                    drawable.push(f);
                }
            }
            // The fallback's state is never consulted (docs/design.md#the-fallback-pool); other pools must be usable.
            drawable.retain(|p| Some(*p) == fallback || view.usable(*p));
            weighted::random_order(settings, view, &drawable, None, rng, trace)
        }
        SteeringPolicy::LeastOutstandingRequests | SteeringPolicy::LeastConnections => {
            let pools = with_healthy_fallback(defaults);
            weighted::random_order(settings, view, &pools, Some(policy), rng, trace)
        }
        SteeringPolicy::Geo => with_healthy_fallback(geo::order(settings, view, trace)),
        SteeringPolicy::DynamicLatency => {
            dynamic_latency::order(&with_healthy_fallback(defaults), view, trace)
        }
        SteeringPolicy::Proximity => {
            proximity::order(&with_healthy_fallback(defaults), view, trace)
        }
    };
    Candidates {
        pools,
        last_resort: fallback,
    }
}

/// Appends the pools of `rest` not yet in `order`, keeping `rest`'s (failover) order.
fn append_missing(order: &mut PoolList, rest: &[PoolId]) {
    for &p in rest {
        if !order.contains(&p) {
            order.push(p);
        }
    }
}
