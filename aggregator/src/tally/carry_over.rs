//! A tally's state carried from one configuration to the next, by identity rather than by
//! position: an endpoint is the same one when its pool's name, its own name, what is probed
//! (address, port, Host override) and how (the monitors that decide its verdict: the pool's
//! monitor, or its group's deciding members, each by name, check and role) are the same. Such
//! an endpoint keeps its verdict and RTT averages, and each of its checks that is still there
//! (by monitor name and check) keeps its own verdict, so a reload causes no Unknown blip and
//! no health event; adding or removing a `monitoring_only` member keeps the identity. A new
//! endpoint starts Unknown until voted on; one that is gone leaves nothing behind. Pools keep their state and RTT averages by name, load balancers by name.
//! Changing only how often or how patiently a monitor probes (interval, timeout, retries,
//! thresholds) keeps the identity: the same thing is still checked the same way.

use lb_core::config::{Config, Endpoint, EndpointId, MemberRole, MonitorKind, Pool, PoolId};

use super::TallyState;

/// What makes an endpoint the same one across configurations.
#[derive(Debug, PartialEq)]
struct EndpointIdentity<'a> {
    pool: &'a str,
    endpoint: &'a str,
    address: &'a lb_core::config::Address,
    port: u16,
    host_header: Option<&'a str>,
    /// The deciding checks, by monitor name (sorted), check and role.
    deciding: Vec<(&'a str, &'a MonitorKind, MemberRole)>,
}

/// A check as the same one across configurations: its monitor's name and check.
fn check_identity<'a>(config: &'a Config, pool: &Pool, ci: usize) -> (&'a str, &'a MonitorKind) {
    let m = config.check_monitor(&pool.checks[ci]);
    (&m.name, &m.kind)
}

fn identity<'a>(config: &'a Config, pool: &'a Pool, e: &'a Endpoint) -> EndpointIdentity<'a> {
    EndpointIdentity {
        pool: &pool.name,
        endpoint: &e.name,
        address: &e.address,
        port: e.port,
        host_header: e.host_header.as_deref(),
        deciding: {
            let mut d: Vec<_> = pool
                .checks
                .iter()
                .filter(|c| c.role.decides())
                .map(|c| {
                    let m = config.check_monitor(c);
                    (m.name.as_str(), &m.kind, c.role)
                })
                .collect();
            d.sort_by(|a, b| a.0.cmp(b.0));
            d
        },
    }
}

/// The endpoints of `old` (by position) that `new` does not have as the same identity: gone,
/// or changed in what or how it is probed.
pub fn removed(old: &Config, new: &Config) -> Vec<(PoolId, EndpointId)> {
    let mut gone = Vec::new();
    for (pi, pool) in old.pools.iter().enumerate() {
        let kept = new.pool_by_name(&pool.name).map(|np| new.pool(np));
        for (ei, e) in pool.endpoints.iter().enumerate() {
            let same = kept.is_some_and(|np| {
                np.endpoint_by_name(&e.name).is_some_and(|ne| {
                    identity(old, pool, e) == identity(new, np, &np.endpoints[ne.0])
                })
            });
            if !same {
                gone.push((PoolId(pi), EndpointId(ei)));
            }
        }
    }
    gone
}

impl TallyState {
    /// This state (aligned with `old`) re-aligned with `new`.
    pub fn carry_over(&self, old: &Config, new: &Config) -> TallyState {
        let mut next = TallyState::new(new);
        next.version = self.version;
        if !self.fits(old) {
            return next;
        }
        for (pi, pool) in new.pools.iter().enumerate() {
            let Some(old_pi) = old.pool_by_name(&pool.name) else {
                continue;
            };
            let old_pool = old.pool(old_pi);
            next.pool_states[pi] = self.pool_states[old_pi.0];
            next.pool_rtt[pi] = self.pool_rtt[old_pi.0];
            for (ei, e) in pool.endpoints.iter().enumerate() {
                let Some(old_ei) = old_pool.endpoint_by_name(&e.name) else {
                    continue;
                };
                let was = &old_pool.endpoints[old_ei.0];
                if identity(old, old_pool, was) != identity(new, pool, e) {
                    continue;
                }
                next.verdicts[pi][ei] = self.verdicts[old_pi.0][old_ei.0];
                next.endpoint_rtt[pi][ei] = self.endpoint_rtt[old_pi.0][old_ei.0];
                for ci in 0..pool.checks.len() {
                    let same = (0..old_pool.checks.len()).find(|&oc| {
                        check_identity(old, old_pool, oc) == check_identity(new, pool, ci)
                    });
                    if let Some(oc) = same {
                        next.check_verdicts[pi][ci][ei] =
                            self.check_verdicts[old_pi.0][oc][old_ei.0];
                    }
                }
            }
        }
        for (li, lb) in new.lbs() {
            if let Some(old_li) = old.load_balancer_id(&lb.name) {
                next.lb_states[li.0] = self.lb_states[old_li.0];
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use lb_core::config::{EndpointId, PoolId};
    use lb_core::health::Verdict;
    use lb_core::{Region, RegionsTable};

    use super::super::{tally, Ballot, ProberId, TallySettings, Vote};
    use super::*;

    fn config(pools: &str) -> Config {
        config_probing_every(60, pools)
    }

    fn config_probing_every(interval: u32, pools: &str) -> Config {
        let text = format!(
            r#"
[[monitors]]
name = "m"
path = "/health"
interval = {interval}
[[monitors]]
name = "tcp"
type = "tcp"
port = 443
{pools}
[[load_balancers]]
name = "lb.test"
default_pools = ["web"]
"#
        );
        Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions")).expect("config")
    }

    const BEFORE: &str = r#"
[[pools]]
name = "web"
monitor = "m"
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "192.0.2.2" }, { name = "c", address = "192.0.2.3" }]
"#;

    /// Every region votes healthy on every endpoint of every pool.
    fn ballots(config: &Config) -> Vec<Ballot> {
        Region::ALL
            .iter()
            .flat_map(|&region| {
                (0..3).map(move |dc| Ballot {
                    prober: ProberId {
                        region,
                        datacenter: format!("dc{dc}"),
                        node: format!("{region}-{dc}"),
                    },
                    alive: true,
                    age: Duration::from_secs(1),
                    votes: config
                        .pools
                        .iter()
                        .map(|p| {
                            p.checks
                                .iter()
                                .map(|_| {
                                    p.endpoints
                                        .iter()
                                        .map(|_| {
                                            Some(Vote {
                                                healthy: true,
                                                rtt_ms: Some(30.0),
                                                code: Some(200),
                                                reason: None,
                                            })
                                        })
                                        .collect()
                                })
                                .collect()
                        })
                        .collect(),
                })
            })
            .collect()
    }

    fn settled(config: &Config) -> TallyState {
        let settings = TallySettings::default();
        let state = TallyState::new(config);
        tally(config, &ballots(config), &state, &settings, Instant::now()).state
    }

    #[test]
    fn unchanged_endpoints_keep_their_verdicts_and_new_ones_start_unknown() {
        let old = config(BEFORE);
        let state = settled(&old);
        assert_eq!(state.verdict(PoolId(0), EndpointId(2)), Verdict::Healthy);
        // b's address changes, c goes, d comes, a moves to another position.
        let new = config(
            r#"
[[pools]]
name = "web"
monitor = "m"
origins = [{ name = "d", address = "192.0.2.4" }, { name = "b", address = "192.0.2.22" }, { name = "a", address = "192.0.2.1", weight = 0.5 }]
"#,
        );
        let next = state.carry_over(&old, &new);
        assert!(next.fits(&new));
        assert_eq!(
            next.verdict(PoolId(0), EndpointId(0)),
            Verdict::Unknown,
            "d is new"
        );
        assert_eq!(
            next.verdict(PoolId(0), EndpointId(1)),
            Verdict::Unknown,
            "b moved"
        );
        assert_eq!(
            next.verdict(PoolId(0), EndpointId(2)),
            Verdict::Healthy,
            "a is a"
        );
        assert!(next.endpoint_rtt[0][2].iter().any(Option::is_some));
        assert_eq!(next.pool_states, state.pool_states);
        assert_eq!(next.lb_states, state.lb_states);
        assert_eq!(next.version, state.version);
    }

    #[test]
    fn a_changed_check_is_a_new_identity_a_changed_cadence_is_not() {
        let old = config(BEFORE);
        let state = settled(&old);
        let other_monitor = config(&BEFORE.replace("monitor = \"m\"", "monitor = \"tcp\""));
        let next = state.carry_over(&old, &other_monitor);
        assert_eq!(next.verdict(PoolId(0), EndpointId(0)), Verdict::Unknown);
        let slower = config_probing_every(120, BEFORE);
        let next = state.carry_over(&old, &slower);
        assert_eq!(next.verdict(PoolId(0), EndpointId(0)), Verdict::Healthy);
    }

    #[test]
    fn a_tally_after_a_carried_reload_reports_no_change_for_what_stayed() {
        let old = config(BEFORE);
        let state = settled(&old);
        let new = config(&BEFORE.replace(
            "{ name = \"c\", address = \"192.0.2.3\" }",
            "{ name = \"c\", address = \"192.0.2.3\" }, { name = \"e\", address = \"192.0.2.5\" }",
        ));
        let carried = state.carry_over(&old, &new);
        let outcome = tally(
            &new,
            &ballots(&new),
            &carried,
            &TallySettings::default(),
            Instant::now(),
        );
        // Only the added endpoint changes (its first verdict); a, b, c and the pool stay.
        let changed: Vec<_> = outcome
            .changes
            .iter()
            .map(|c| match c {
                super::super::HealthChange::Endpoint { endpoint, .. } => format!("e{}", endpoint.0),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(changed, ["e3"]);
    }

    #[test]
    fn a_state_that_does_not_fit_its_config_starts_over() {
        let old = config(BEFORE);
        let other = config(
            r#"
[[pools]]
name = "web"
monitor = "m"
origins = [{ name = "a", address = "192.0.2.1" }]
"#,
        );
        let state = settled(&other);
        let next = state.carry_over(&old, &old);
        assert_eq!(next.verdict(PoolId(0), EndpointId(0)), Verdict::Unknown);
    }
}
