//! The aggregator's Prometheus metrics (`meshlb_*`, base units, labels bounded by the config):
//! endpoint, monitor group member, pool and load-balancer states as one-hot gauges, EWMA RTTs, health changes, the
//! tally, mesh members and gossip traffic.

use lb_core::metric::{Metric, MetricUnit};
use std::sync::{Arc, Weak};
use std::time::Duration;

use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::{HealthSnapshot, PoolState, Verdict};
use lb_core::Region;
use mesh::Role;
use metrics::Gauge;

use crate::mesh_view::Member;
use crate::tally::{HealthChange, LbState};

const VERDICTS: [(Verdict, &str); 3] = [
    (Verdict::Healthy, "healthy"),
    (Verdict::Unhealthy, "unhealthy"),
    (Verdict::Unknown, "unknown"),
];
const POOL_STATES: [PoolState; 5] = [
    PoolState::Healthy,
    PoolState::Degraded,
    PoolState::Critical,
    PoolState::Unknown,
    PoolState::NoHealth,
];
const LB_STATES: [(LbState, &str); 3] = [
    (LbState::Healthy, "healthy"),
    (LbState::Degraded, "degraded"),
    (LbState::Critical, "critical"),
];

/// After a reload from `old` to `new`: the state gauges of every endpoint, pool and load
/// balancer `new` no longer names are set to 0 in every state, so no alert keeps firing on
/// something that is gone. (The exporter cannot drop a series; they stay at 0 until a restart.)
pub fn record_gone(old: &Config, new: &Config) {
    for pool in &old.pools {
        let kept = new.pool_by_name(&pool.name).map(|p| new.pool(p));
        if kept.is_none() {
            for s in POOL_STATES {
                metrics::gauge!("meshlb_pool_state", "pool" => pool.name.clone(), "state" => s.name())
                    .set(0.0);
            }
        }
        for e in &pool.endpoints {
            for c in pool.checks.iter().filter(|_| pool.monitor_group.is_some()) {
                let monitor = &old.check_monitor(c).name;
                let still = kept.is_some_and(|p| {
                    p.monitor_group.is_some()
                        && p.endpoint_by_name(&e.name).is_some()
                        && p.checks
                            .iter()
                            .any(|nc| new.check_monitor(nc).name == *monitor)
                });
                if !still {
                    for (_, name) in VERDICTS {
                        metrics::gauge!("meshlb_member_state", "pool" => pool.name.clone(), "endpoint" => e.name.clone(), "monitor" => monitor.clone(), "state" => name).set(0.0);
                    }
                }
            }
            if kept.is_some_and(|p| p.endpoint_by_name(&e.name).is_some()) {
                continue;
            }
            for (_, name) in VERDICTS {
                metrics::gauge!("meshlb_endpoint_state", "pool" => pool.name.clone(), "endpoint" => e.name.clone(), "state" => name).set(0.0);
            }
        }
    }
    for lb in &old.load_balancers {
        if new.load_balancer_id(&lb.name).is_none() {
            for (_, name) in LB_STATES {
                metrics::gauge!("meshlb_load_balancer_state", "load_balancer" => lb.name.clone(), "state" => name).set(0.0);
            }
        }
    }
}

/// Each monitor group member's own verdict on each endpoint (`check_verdicts` as
/// `TallyState::check_verdicts`), one-hot like `meshlb_endpoint_state`: what alerts on a
/// `monitoring_only` member read.
pub fn record_group_members(config: &Config, check_verdicts: &[Vec<Vec<Verdict>>]) {
    for (pi, pool) in config.pools.iter().enumerate() {
        if pool.monitor_group.is_none() {
            continue;
        }
        for (ci, c) in pool.checks.iter().enumerate() {
            let monitor = &config.check_monitor(c).name;
            for (ei, e) in pool.endpoints.iter().enumerate() {
                let v = check_verdicts
                    .get(pi)
                    .and_then(|p| p.get(ci))
                    .and_then(|c| c.get(ei))
                    .copied()
                    .unwrap_or_default();
                for (state, name) in VERDICTS {
                    metrics::gauge!("meshlb_member_state", "pool" => pool.name.clone(), "endpoint" => e.name.clone(), "monitor" => monitor.clone(), "state" => name).set(f64::from(u8::from(v == state)));
                }
            }
        }
    }
}

/// A gauge per region, registered when the region first has a value.
type RegionGauges = [Option<Gauge>; 13];

fn region_index(r: Region) -> usize {
    Region::ALL.iter().position(|&x| x == r).unwrap_or(0)
}

struct PoolGauges {
    state: [Gauge; POOL_STATES.len()],
    rtt: RegionGauges,
    endpoints: Vec<EndpointGauges>,
}

struct EndpointGauges {
    state: [Gauge; VERDICTS.len()],
    rtt: RegionGauges,
}

/// The tally's state and RTT gauges, registered once per config: a tally of 10,000 endpoints
/// then stores its values into handles instead of looking up some 40,000 label sets in the
/// exporter's registry every time (bench/aggregator-memory.sh).
pub struct TallyGauges {
    /// The config they were registered for (the `Weak` keeps its allocation: a later config
    /// cannot be mistaken for it).
    config: Weak<Config>,
    pools: Vec<PoolGauges>,
    lbs: Vec<[Gauge; LB_STATES.len()]>,
}

impl Default for TallyGauges {
    fn default() -> Self {
        TallyGauges {
            config: Weak::new(),
            pools: Vec::new(),
            lbs: Vec::new(),
        }
    }
}

impl TallyGauges {
    /// The gauges of `config`, registered now if they are another config's.
    fn of(&mut self, config: &Arc<Config>) -> &mut TallyGauges {
        if !Weak::ptr_eq(&self.config, &Arc::downgrade(config)) {
            self.config = Arc::downgrade(config);
            self.pools = config
                .pools
                .iter()
                .map(|pool| PoolGauges {
                    state: POOL_STATES.map(|s| {
                        metrics::gauge!("meshlb_pool_state", "pool" => pool.name.clone(), "state" => s.name())
                    }),
                    rtt: Default::default(),
                    endpoints: pool
                        .endpoints
                        .iter()
                        .map(|e| EndpointGauges {
                            state: VERDICTS.map(|(_, name)| {
                                metrics::gauge!("meshlb_endpoint_state", "pool" => pool.name.clone(), "endpoint" => e.name.clone(), "state" => name)
                            }),
                            rtt: Default::default(),
                        })
                        .collect(),
                })
                .collect();
            self.lbs = config
                .load_balancers
                .iter()
                .map(|lb| {
                    LB_STATES.map(|(_, name)| {
                        metrics::gauge!("meshlb_load_balancer_state", "load_balancer" => lb.name.clone(), "state" => name)
                    })
                })
                .collect();
        }
        self
    }
}

#[allow(clippy::too_many_arguments)]
pub fn record_tally(
    gauges: &mut TallyGauges,
    config: &Arc<Config>,
    snapshot: &HealthSnapshot,
    region: Region,
    lb_states: &[Option<LbState>],
    changes: &[HealthChange],
    votes: usize,
    took: Duration,
) {
    let gauges = gauges.of(config);
    for ((pi, pool), g) in config.pools.iter().enumerate().zip(&mut gauges.pools) {
        let state = snapshot.shown_pool_state(config, PoolId(pi), region);
        for (s, gauge) in POOL_STATES.iter().zip(&g.state) {
            gauge.set(f64::from(u8::from(*s == state)));
        }
        for (r, rtt) in snapshot.pool(PoolId(pi)).rtt_ms.iter() {
            g.rtt[region_index(r)]
                .get_or_insert_with(|| metrics::gauge!("meshlb_pool_rtt_seconds", "pool" => pool.name.clone(), "region" => r.code()))
                .set(rtt / 1000.0);
        }
        for ((ei, e), eg) in pool.endpoints.iter().enumerate().zip(&mut g.endpoints) {
            let h = snapshot.endpoint(PoolId(pi), EndpointId(ei));
            for ((v, _), gauge) in VERDICTS.iter().zip(&eg.state) {
                gauge.set(f64::from(u8::from(h.verdict == *v)));
            }
            for (r, rtt) in h.rtt_ms.iter() {
                eg.rtt[region_index(r)]
                    .get_or_insert_with(|| metrics::gauge!("meshlb_endpoint_rtt_seconds", "pool" => pool.name.clone(), "endpoint" => e.name.clone(), "region" => r.code()))
                    .set(rtt / 1000.0);
            }
        }
    }
    for (li, g) in gauges.lbs.iter().enumerate() {
        for ((s, _), gauge) in LB_STATES.iter().zip(g) {
            let on = lb_states.get(li).copied().flatten() == Some(*s);
            gauge.set(f64::from(u8::from(on)));
        }
    }
    for c in changes {
        let kind = match c {
            HealthChange::Endpoint { .. } => "endpoint",
            HealthChange::Check { .. } => "member",
            HealthChange::Pool { .. } => "pool",
            HealthChange::LoadBalancer { .. } => "load_balancer",
        };
        metrics::counter!("meshlb_health_changes_total", "kind" => kind).increment(1);
    }
    metrics::gauge!("meshlb_tally_votes").set(votes as f64);
    metrics::gauge!("meshlb_fail_static").set(f64::from(u8::from(snapshot.fail_static)));
    metrics::histogram!("meshlb_tally_duration_seconds").record(took.as_secs_f64());
}

pub fn record_members(members: &[Member]) {
    // Labels of bounded cardinality whatever members say of themselves: a role this
    // version does not know, or no region, each counts as one value.
    let labels = |m: &Member| {
        let role = match m.role {
            Role::Prober => "prober",
            Role::Aggregator => "aggregator",
            Role::Unknown(_) => "unknown",
        };
        (role, m.region.map_or("unknown", Region::code))
    };
    let mut counts: std::collections::BTreeMap<(&str, &str, &str), u32> =
        std::collections::BTreeMap::new();
    for m in members {
        let (role, region) = labels(m);
        *counts
            .entry((role, region, if m.alive { "live" } else { "dead" }))
            .or_default() += 1;
    }
    // Zero the other state of every (role, region) seen, so a region that died shows 0 live.
    let keys: std::collections::BTreeSet<(&str, &str)> =
        counts.keys().map(|&(r, g, _)| (r, g)).collect();
    for (role, region) in keys {
        for state in ["live", "dead"] {
            let n = counts.get(&(role, region, state)).copied().unwrap_or(0);
            metrics::gauge!("meshlb_mesh_members", "role" => role, "region" => region, "state" => state).set(f64::from(n));
        }
    }
    metrics::gauge!("meshlb_config_drift_members")
        .set(members.iter().filter(|m| m.config_drift).count() as f64);
}

/// 1 once the aggregator's answers can be trusted (`GET /readyz`), 0 while it warms up.
pub fn record_ready(ready: bool) {
    metrics::gauge!("meshlb_aggregator_ready").set(f64::from(u8::from(ready)));
}

/// One constant series per region with its name and representative coordinates, for joins in
/// dashboards (the mesh map: `... * on(region) group_left(latitude, longitude) meshlb_region_info`).
pub fn record_regions(regions: &lb_core::regions_table::RegionsTable) {
    for r in regions.regions() {
        metrics::gauge!(
            "meshlb_region_info",
            "region" => r.region.code(),
            "name" => r.name.clone(),
            "latitude" => format!("{:.4}", r.coordinates.latitude),
            "longitude" => format!("{:.4}", r.coordinates.longitude)
        )
        .set(1.0);
    }
}

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_config_fetches_refused_total",
        &[],
        "Config fetches the primary refused: a bad cluster-key signature or a clock off by more than 300 s.",
    ),
    Metric::counter(
        "meshlb_drain_decisions_refused_total",
        &[],
        "Drain decisions from other aggregators refused as stamped beyond now plus the clock skew.",
    ),
    Metric::gauge(
        "meshlb_aggregator_ready",
        &[],
        "1 once the aggregator's answers can be trusted (GET /readyz): every monitored endpoint has a verdict or the warm-up timeout has passed; 0 while it warms up.",
    ),
    Metric::gauge(
        "meshlb_endpoint_state",
        &["endpoint", "pool", "state"],
        "The tally's verdict on an endpoint (one-hot over state).",
    ),
    Metric::gauge(
        "meshlb_off_roster_probers",
        &[],
        "Live probers whose datacenter the regions table does not list for their region: their votes do not count.",
    ),
    Metric::gauge(
        "meshlb_member_state",
        &["endpoint", "monitor", "pool", "state"],
        "A monitor group member's own verdict on an endpoint (one-hot over state); monitoring_only members included.",
    ),
    Metric::gauge(
        "meshlb_pool_state",
        &["pool", "state"],
        "Pool state from this PoP (one-hot over state).",
    ),
    Metric::gauge(
        "meshlb_load_balancer_state",
        &["load_balancer", "state"],
        "Load balancer state (one-hot over state); critical: traffic on the fallback pool.",
    ),
    Metric::gauge(
        "meshlb_endpoint_rtt_seconds",
        &["endpoint", "pool", "region"],
        "EWMA of probe RTT to an endpoint measured from a region.",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::gauge(
        "meshlb_pool_rtt_seconds",
        &["pool", "region"],
        "EWMA of probe RTT to a pool measured from a region.",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::counter(
        "meshlb_health_changes_total",
        &["kind"],
        "Health changes, by kind (endpoint, pool, load_balancer).",
    ),
    Metric::gauge(
        "meshlb_tally_votes",
        &[],
        "Votes counted in the last tally.",
    ),
    Metric::gauge(
        "meshlb_fail_static",
        &[],
        "1 while the aggregator hears from no prober and serves its last known health.",
    ),
    Metric::histogram(
        "meshlb_tally_duration_seconds",
        &[],
        "Time to run one tally.",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::gauge(
        "meshlb_mesh_members",
        &["region", "role", "state"],
        "Mesh members seen by the aggregator, by role, region and state (live/dead).",
    ),
    Metric::gauge(
        "meshlb_config_drift_members",
        &[],
        "Members gossiping a config hash other than the aggregator's.",
    ),
    Metric::gauge(
        "meshlb_region_info",
        &["latitude", "longitude", "name", "region"],
        "Constant 1 per region, labelled with its name and representative coordinates.",
    ),
    Metric::counter(
        "meshlb_notifications_total",
        &["channel", "kind", "result"],
        "Notification attempts by channel, kind and result (sent, retried, failed).",
    ),
    Metric::gauge(
        "meshlb_notifier_sender",
        &[],
        "1 on the aggregator that sends notifications (the live one with the smallest node id).",
    ),
    Metric::counter(
        "meshlb_notifications_dropped_total",
        &[],
        "Health changes not queued for notification because the queue was full.",
    ),
    Metric::counter(
        "meshlb_api_previews_total",
        &["outcome"],
        "Monitor previews asked of this aggregator's API, by outcome: started, or refused (--api-preview-max).",
    ),
    Metric::gauge(
        "meshlb_api_previews_active",
        &[],
        "This aggregator's monitor previews not expired yet.",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
