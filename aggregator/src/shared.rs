//! What the tally loop publishes and the admin API, the frontends and the metrics read,
//! grouped by concern: the setup fixed at start, the latest tally (swapped whole, read without
//! a lock), the event log, the drains, and where health goes out.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::HealthSnapshot;
use lb_core::RegionsTable;
use mesh::keys::DrainDecision;

use crate::drain_state::DrainState;
use crate::events::{DatacenterVote, EventLog, RegionVotes};
use crate::mesh_view::Member;
use crate::notify::Notifier;
use crate::tally::{count_region, Ballot, LbState, TallySettings};

/// What the aggregator was started with; fixed for its life.
pub struct Setup {
    pub config: Arc<Config>,
    /// The regions table of `--regions` (or the embedded one).
    pub regions: Arc<RegionsTable>,
    pub settings: TallySettings,
    pub config_hash: String,
    /// When this aggregator started (its warm-up counts from here).
    pub started: Instant,
}

/// The latest tally, each part swapped whole by the loop.
pub struct Latest {
    pub snapshot: ArcSwap<HealthSnapshot>,
    pub ballots: ArcSwap<Vec<Ballot>>,
    pub members: ArcSwap<Vec<Member>>,
    pub lb_states: ArcSwap<Vec<Option<LbState>>>,
    pub votes_counted: AtomicUsize,
}

/// Drains made through `/drain` here and on other aggregators.
#[derive(Default)]
pub struct Drains {
    /// The drains in force (every aggregator's newest decision per endpoint): (pool,
    /// endpoint) -> since (unix s).
    pub in_force: Mutex<BTreeMap<(PoolId, EndpointId), u64>>,
    /// The drain decisions this aggregator publishes in gossip: its admin API's and the newer
    /// ones it adopted from other aggregators (`drains::adopt`).
    pub decisions: Mutex<BTreeMap<(PoolId, EndpointId), DrainDecision>>,
    /// Where the decisions are kept across restarts (`--state-dir`), when set.
    pub state_file: OnceLock<DrainState>,
}

/// Where health goes out besides the frontends.
#[derive(Default)]
pub struct Outputs {
    /// Renders `/metrics` when a Prometheus recorder is installed.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Set once at start when the config has notification channels.
    pub notifier: OnceLock<Notifier>,
}

/// Everything the aggregator's tasks share.
pub struct Shared {
    pub setup: Setup,
    pub latest: Latest,
    /// Health changes kept for `GET /events`.
    pub events: Mutex<EventLog>,
    pub drains: Drains,
    pub outputs: Outputs,
}

/// The DNS server and the proxy read the latest tally from here.
impl lb_edge::HealthSource for Shared {
    fn current(&self) -> arc_swap::Guard<Arc<HealthSnapshot>> {
        self.latest.snapshot.load()
    }
}

impl Shared {
    pub fn new(
        config: Arc<Config>,
        regions: Arc<RegionsTable>,
        settings: TallySettings,
        config_hash: String,
        metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            latest: Latest {
                snapshot: ArcSwap::from_pointee(HealthSnapshot::initial(&config)),
                ballots: ArcSwap::from_pointee(Vec::new()),
                members: ArcSwap::from_pointee(Vec::new()),
                lb_states: ArcSwap::from_pointee(vec![None; config.load_balancers.len()]),
                votes_counted: AtomicUsize::new(0),
            },
            events: Mutex::new(EventLog::default()),
            drains: Drains::default(),
            outputs: Outputs {
                metrics,
                notifier: OnceLock::new(),
            },
            setup: Setup {
                config,
                regions,
                settings,
                config_hash,
                started: Instant::now(),
            },
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.setup.config
    }

    /// Whether this aggregator's answers can be trusted yet (`GET /readyz`).
    pub fn readiness(&self) -> crate::readiness::Readiness {
        crate::readiness::assess(
            &self.setup.config,
            &self.latest.snapshot.load(),
            self.setup.started.elapsed(),
            self.setup.settings.warmup_timeout,
        )
    }

    /// The votes behind one endpoint's verdict, region by region and node by node.
    pub fn endpoint_votes(
        &self,
        ballots: &[Ballot],
        pool: PoolId,
        endpoint: EndpointId,
    ) -> Vec<RegionVotes> {
        let config = &self.setup.config;
        let p = config.pool(pool);
        let max_age = p
            .monitor
            .and_then(|m| config.monitors.get(m))
            .map_or(Duration::MAX, |m| {
                m.interval.mul_f64(self.setup.settings.max_age_intervals)
            });
        p.check_regions
            .iter()
            .map(|&region| {
                let mine: Vec<&Ballot> = ballots
                    .iter()
                    .filter(|b| b.prober.region == region)
                    .collect();
                let mut dcs: Vec<Vec<&Ballot>> = Vec::new();
                let mut names: Vec<&str> = Vec::new();
                for b in mine.iter().filter(|b| b.alive) {
                    match names.iter().position(|n| *n == b.prober.datacenter) {
                        Some(i) => dcs[i].push(b),
                        None => {
                            names.push(&b.prober.datacenter);
                            dcs.push(vec![b]);
                        }
                    }
                }
                let (count, _, _) = count_region(&dcs, pool.0, endpoint.0, max_age);
                let datacenters = mine
                    .iter()
                    .map(|b| {
                        let v = b
                            .votes
                            .get(pool.0)
                            .and_then(|v| v.get(endpoint.0))
                            .and_then(Option::as_ref);
                        DatacenterVote {
                            datacenter: b.prober.datacenter.clone(),
                            node: b.prober.node.clone(),
                            alive: b.alive,
                            healthy: v.map(|v| v.healthy),
                            stale: v.is_some_and(|v| v.age > max_age),
                            rtt_ms: v.and_then(|v| v.rtt_ms),
                            code: v.and_then(|v| v.code),
                            reason: v.and_then(|v| v.reason.clone()),
                        }
                    })
                    .collect();
                RegionVotes {
                    region: region.code().to_string(),
                    verdict: count.verdict,
                    healthy_dcs: count.healthy_dcs,
                    unhealthy_dcs: count.unhealthy_dcs,
                    silent_dcs: count.silent_dcs,
                    datacenters,
                }
            })
            .collect()
    }
}
