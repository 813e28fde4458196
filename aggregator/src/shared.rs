//! What the tally loop publishes and the admin API, the frontends and the metrics read,
//! grouped by concern: the setup fixed at start, the config in force with what was tallied for
//! it (swapped whole, read without a lock), the event log, the drains, and where health goes
//! out.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::Verdict;
use lb_core::RegionsTable;
use lb_edge::Generation;
use mesh::keys::DrainDecision;

use crate::drain_state::DrainState;
use crate::events::{DatacenterVote, EventLog, RegionVotes};
use crate::mesh_view::Member;
use crate::notify::Notifier;
use crate::tally::{count_region, Ballot, LbState, TallySettings};

/// What the aggregator was started with (its flags); fixed for its life. The config is not
/// here: it changes on reload (`InForce`).
pub struct Setup {
    /// This node's id in the mesh (`--node-id`).
    pub node_id: String,
    /// The regions table of `--regions` (or the embedded one).
    pub regions: Arc<RegionsTable>,
    pub settings: TallySettings,
    /// When this aggregator started (its warm-up counts from here).
    pub started: Instant,
    /// Parses the documents the API checks before a write, reusing the resources of the one
    /// checked before (`lb_core::config::IncrementalParser`).
    pub parser: lb_core::config::IncrementalParser,
}

/// The configuration in force and everything tallied for it, indexed like it. Replaced whole
/// on reload, so a reader that loads it once sees one config with its own snapshot, ballots
/// and states, never one config's positions with another's.
pub struct InForce {
    /// The config with its live health (read by the DNS server and the proxy too).
    pub generation: Arc<Generation>,
    /// The hash of the file's text (`mesh::node::config_hash`), gossiped as `config_hash`.
    pub config_hash: String,
    /// When this config was loaded (unix seconds).
    pub loaded_at: u64,
    /// The ballots of the latest tally, `votes[pool][check][endpoint]` of this config.
    pub ballots: ArcSwap<Vec<Ballot>>,
    pub lb_states: ArcSwap<Vec<Option<LbState>>>,
    /// Each check's own verdict, `[pool][check][endpoint]` (`Pool::checks`): a monitor group
    /// member's, shown in `/status`.
    pub check_verdicts: ArcSwap<Vec<Vec<Vec<Verdict>>>>,
    /// Endpoints disabled by the config (`enabled = false`, or their pool's) -> since when
    /// (unix seconds): they drain for `drain_duration` as a drain through `/drain` does.
    pub config_drains: BTreeMap<(PoolId, EndpointId), u64>,
    /// The notifier of this config's channels, when it has any. The one it replaces empties
    /// its queue and stops.
    pub notifier: Option<Notifier>,
}

impl InForce {
    pub fn new(
        generation: Arc<Generation>,
        config_hash: String,
        loaded_at: u64,
        config_drains: BTreeMap<(PoolId, EndpointId), u64>,
        notifier: Option<Notifier>,
    ) -> InForce {
        let lbs = generation.config().load_balancers.len();
        InForce {
            generation,
            config_hash,
            loaded_at,
            ballots: ArcSwap::from_pointee(Vec::new()),
            lb_states: ArcSwap::from_pointee(vec![None; lbs]),
            check_verdicts: ArcSwap::from_pointee(Vec::new()),
            config_drains,
            notifier,
        }
    }

    pub fn config(&self) -> &Arc<Config> {
        self.generation.config()
    }
}

/// What the latest tally saw of the mesh, whatever the config.
pub struct Latest {
    pub members: ArcSwap<Vec<Member>>,
    pub votes_counted: AtomicUsize,
    /// Why the latest tally counted no vote (`None` while it counts some).
    pub silence: ArcSwap<Option<crate::tally::Silence>>,
}

/// The drain tables, indexed by the config they were made for.
pub struct DrainTables {
    /// The config whose positions the tables use; re-keyed by name on reload.
    pub config: Arc<Config>,
    /// The drains in force (every aggregator's newest decision per endpoint): (pool,
    /// endpoint) -> since (unix s).
    pub in_force: BTreeMap<(PoolId, EndpointId), u64>,
    /// The drain decisions this aggregator publishes in gossip: its admin API's and the newer
    /// ones it adopted from other aggregators (`drains::adopt`).
    pub decisions: BTreeMap<(PoolId, EndpointId), DrainDecision>,
}

/// Drains made through `/drain` here and on other aggregators.
pub struct Drains {
    pub tables: Mutex<DrainTables>,
    /// Where the decisions are kept across restarts (`--state-dir`), when set.
    pub state_file: OnceLock<DrainState>,
}

/// Where health goes out besides the frontends.
#[derive(Default)]
pub struct Outputs {
    /// Renders `/metrics` when a Prometheus recorder is installed.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

/// Everything the aggregator's tasks share.
pub struct Shared {
    pub setup: Setup,
    /// The config in force; swapped whole by the tally loop when it adopts a reload.
    pub in_force: ArcSwap<InForce>,
    pub latest: Latest,
    /// Health changes kept for `GET /events`.
    pub events: Mutex<EventLog>,
    pub drains: Drains,
    pub outputs: Outputs,
    /// Where `POST /-/reload` asks for a reload (the node's config task reads it).
    pub reload_requests: tokio::sync::mpsc::Sender<meshlb_node::reload::Request>,
    /// The live, ready PoPs of the mesh (DNS answers proxied names with them); the loop
    /// updates it from gossip.
    pub pops: Arc<lb_edge::Pops>,
    /// The live PoPs holding tunnels (private endpoints are reached through them); the loop
    /// updates it from gossip.
    pub tunnel_holders: Arc<tunnel::HolderList>,
    /// This aggregator's tunnel hub (`--tunnel-listen`), for the API's views of tunnels.
    pub tunnel_hub: OnceLock<Arc<tunnel::Hub>>,
    /// The control plane: the mesh config's generation, the primary, the API's writes.
    pub control: Arc<meshlb_node::control::ControlPlane>,
    /// The API's monitor previews, run by the mesh's probers.
    pub previews: crate::previews::Previews,
    /// Each pool's EWMA RTT over the last hour, for the console.
    pub rtt_history: crate::console::history::RttHistory,
}

impl Shared {
    pub fn new(
        in_force: InForce,
        setup: Setup,
        outputs: Outputs,
        control: Arc<meshlb_node::control::ControlPlane>,
        reload_requests: tokio::sync::mpsc::Sender<meshlb_node::reload::Request>,
        previews: crate::previews::Previews,
    ) -> Arc<Shared> {
        let config = Arc::clone(in_force.config());
        Arc::new(Shared {
            in_force: ArcSwap::from_pointee(in_force),
            latest: Latest {
                members: ArcSwap::from_pointee(Vec::new()),
                votes_counted: AtomicUsize::new(0),
                silence: ArcSwap::from_pointee(None),
            },
            events: Mutex::new(EventLog::default()),
            drains: Drains {
                tables: Mutex::new(DrainTables {
                    config,
                    in_force: BTreeMap::new(),
                    decisions: BTreeMap::new(),
                }),
                state_file: OnceLock::new(),
            },
            outputs,
            setup,
            reload_requests,
            pops: Arc::new(lb_edge::Pops::from_pointee(Vec::new())),
            tunnel_holders: Arc::default(),
            tunnel_hub: OnceLock::new(),
            control,
            previews,
            rtt_history: Default::default(),
        })
    }

    /// The config in force now.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(self.in_force.load().config())
    }

    /// Whether this aggregator's answers can be trusted yet (`GET /readyz`).
    pub fn readiness(&self) -> crate::readiness::Readiness {
        let in_force = self.in_force.load();
        crate::readiness::assess(
            in_force.config(),
            &in_force.generation.snapshot(),
            self.setup.started.elapsed(),
            self.setup.settings.warmup_timeout,
        )
    }

    /// The votes behind the verdict of a pool's one monitor on an endpoint; none for a pool
    /// without a monitor, or with a monitor group (whose members each have their own).
    pub fn monitor_votes(
        &self,
        config: &Config,
        ballots: &[Ballot],
        pool: PoolId,
        endpoint: EndpointId,
    ) -> Vec<RegionVotes> {
        let p = config.pool(pool);
        if p.is_monitored() && p.monitor_group.is_none() {
            self.endpoint_votes(config, ballots, pool, 0, endpoint)
        } else {
            Vec::new()
        }
    }

    /// The votes behind one check's verdict on an endpoint (`check` indexes `Pool::checks`),
    /// region by region and node by node; none for a check the pool does not have.
    pub fn endpoint_votes(
        &self,
        config: &Config,
        ballots: &[Ballot],
        pool: PoolId,
        check: usize,
        endpoint: EndpointId,
    ) -> Vec<RegionVotes> {
        let p = config.pool(pool);
        let Some(c) = p.checks.get(check) else {
            return Vec::new();
        };
        let max_age = config
            .check_monitor(c)
            .interval
            .mul_f64(self.setup.settings.max_age_intervals);
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
                let (count, _, _) = count_region(&dcs, pool.0, check, endpoint.0, max_age);
                let datacenters = mine
                    .iter()
                    .map(|b| {
                        let v = b.vote(pool.0, check, endpoint.0);
                        DatacenterVote {
                            datacenter: b.prober.datacenter.clone(),
                            node: b.prober.node.clone(),
                            alive: b.alive,
                            healthy: v.map(|v| v.healthy),
                            stale: v.is_some() && b.age > max_age,
                            age_s: (b.age.as_secs_f64() * 10.0).round() / 10.0,
                            rtt_ms: v.and_then(|v| v.rtt_ms),
                            code: v.and_then(|v| v.code),
                            reason: v.and_then(|v| v.reason.as_deref().map(str::to_string)),
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
