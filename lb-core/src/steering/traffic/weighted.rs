//! Random and least-outstanding pool steering: a weighted draw for the first pool, the rest
//! in failover order behind it.

use rand::RngCore;

use crate::config::{PoolId, SteeringPolicy, SteeringSettings};
use crate::request::Mode;
use crate::steering::trace::Trace;
use crate::steering::traffic::PoolView;
use crate::steering::weighted::{transformed_weight, weighted_pick};
use crate::steering::PoolList;

/// `least`: `Some(LeastOutstandingRequests | LeastConnections)` transforms each weight by the
/// pool's open count (Cloudflare: weight / (count + 1)); DNS has no counts, so it is random.
pub(super) fn random_order(
    settings: &SteeringSettings,
    view: &PoolView<'_>,
    pools: &[PoolId],
    least: Option<SteeringPolicy>,
    rng: &mut dyn RngCore,
    trace: &mut Trace,
) -> PoolList {
    let weighted: smallvec::SmallVec<[(PoolId, f64); 4]> = pools
        .iter()
        .map(|&p| {
            let w = settings.random_steering.weight(p);
            let (outstanding, connections) = match view.load {
                Some(live) => live.pool(p),
                None => (
                    view.health.pool(p).outstanding,
                    view.health.pool(p).connections,
                ),
            };
            let count = match (least, view.mode) {
                (_, Mode::Dns) => 0,
                (Some(SteeringPolicy::LeastOutstandingRequests), _) => outstanding,
                (Some(SteeringPolicy::LeastConnections), _) => connections,
                _ => 0,
            };
            (p, transformed_weight(w, count))
        })
        .collect();
    trace.note(|| {
        let parts: Vec<String> = weighted
            .iter()
            .map(|&(p, w)| format!("{}={w:.4}", view.name(p)))
            .collect();
        format!("weighted draw over [{}]", parts.join(", "))
    });
    let mut order = PoolList::new();
    if let Some(first) = weighted_pick(&weighted, rng) {
        order.push(first);
    }
    super::append_missing(&mut order, pools);
    order
}
