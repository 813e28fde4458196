//! What one round changed, from the endpoints counted as changed: each check's and endpoint's
//! new verdict, then each pool's and load balancer's state, into the next state.

use lb_core::config::{Config, PoolId};
use lb_core::health::HealthSnapshot;

use super::count::Counted;
use super::{HealthChange, LbState, TallySettings, TallyState};

/// The changed endpoints' verdicts and their checks' into `state`, each change recorded: a
/// grouped pool's checks change one by one, a single monitor's counts go with its endpoint.
pub(super) fn endpoints(
    config: &Config,
    changed: Vec<Counted>,
    previous: &TallyState,
    state: &mut TallyState,
    changes: &mut Vec<HealthChange>,
) {
    for Counted {
        pool,
        endpoint,
        verdict,
        checks,
    } in changed
    {
        let grouped = config.pool(pool).monitor_group.is_some();
        let mut members = Vec::new();
        let mut single_counts = Vec::new();
        for (ci, (to, regions)) in checks.into_iter().enumerate() {
            let slot = &mut state.check_verdicts[pool.0][ci][endpoint.0];
            let from = *slot;
            *slot = to;
            if !grouped {
                single_counts = regions;
                continue;
            }
            members.push((to, to != from));
            if to != from {
                changes.push(HealthChange::Check {
                    pool,
                    endpoint,
                    check: ci,
                    from,
                    to,
                    regions,
                });
            }
        }
        let from = previous.verdicts[pool.0][endpoint.0];
        if verdict != from {
            changes.push(HealthChange::Endpoint {
                pool,
                endpoint,
                from,
                to: verdict,
                regions: single_counts,
                members,
            });
        }
        state.verdicts[pool.0][endpoint.0] = verdict;
    }
}

/// Each pool's state as seen from this aggregator's region.
pub(super) fn pools(
    config: &Config,
    snapshot: &HealthSnapshot,
    previous: &TallyState,
    settings: &TallySettings,
    state: &mut TallyState,
    changes: &mut Vec<HealthChange>,
) {
    for (pi, _) in config.pools.iter().enumerate() {
        let to = snapshot.shown_pool_state(config, PoolId(pi), settings.region);
        let from = previous.pool_states[pi];
        if to != from {
            changes.push(HealthChange::Pool {
                pool: PoolId(pi),
                from,
                to,
            });
        }
        state.pool_states[pi] = to;
    }
}

/// Each load balancer's state from its default pools' (docs/design.md#load-balancer-states).
pub(super) fn load_balancers(
    config: &Config,
    previous: &TallyState,
    state: &mut TallyState,
    changes: &mut Vec<HealthChange>,
) {
    for (id, lb) in config.lbs() {
        let li = id.0;
        let pools = &lb.settings.default_pools;
        let up = pools
            .iter()
            .filter(|&&p| state.pool_states[p.0].takes_traffic())
            .count();
        let to = if up == pools.len() {
            LbState::Healthy
        } else if up > 0 {
            LbState::Degraded
        } else {
            LbState::Critical
        };
        let from = previous.lb_states[li];
        if Some(to) != from {
            changes.push(HealthChange::LoadBalancer { lb: id, from, to });
        }
        state.lb_states[li] = Some(to);
    }
}
