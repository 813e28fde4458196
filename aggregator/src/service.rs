//! The aggregator's loop: read the mesh, tally, publish the snapshot (arc-swap, read by the
//! frontends without a lock), log every health change with the votes behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use chitchat::Chitchat;
use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::HealthSnapshot;

use crate::events::{DatacenterVote, EventLog, HealthEvent, RegionVotes};
use crate::mesh_view::{Member, MeshView};
use crate::tally::{count_region, tally, Ballot, HealthChange, LbState, TallySettings, TallyState};

/// What the loop publishes and the admin API reads.
pub struct Shared {
    pub config: Arc<Config>,
    pub settings: TallySettings,
    pub config_hash: String,
    pub snapshot: ArcSwap<HealthSnapshot>,
    pub ballots: ArcSwap<Vec<Ballot>>,
    pub members: ArcSwap<Vec<Member>>,
    pub lb_states: ArcSwap<Vec<Option<LbState>>>,
    pub events: Mutex<EventLog>,
    pub votes_counted: AtomicUsize,
    /// Renders `/metrics` when a Prometheus recorder is installed.
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// Set once at start when the config has notification channels.
    pub notifier: std::sync::OnceLock<crate::notify::Notifier>,
    /// The drains in force (every aggregator's newest decision per endpoint): (pool,
    /// endpoint) -> since (unix s).
    pub drains: Mutex<std::collections::BTreeMap<(PoolId, EndpointId), u64>>,
    /// The drain decisions this aggregator publishes in gossip: its admin API's and the newer
    /// ones it adopted from other aggregators (`drains::adopt`).
    pub drain_decisions:
        Mutex<std::collections::BTreeMap<(PoolId, EndpointId), mesh::keys::DrainDecision>>,
    /// Where the drain decisions are kept across restarts (`--state-dir`), when set.
    pub drain_state: std::sync::OnceLock<crate::drain_state::DrainState>,
    /// When this aggregator started (its warm-up counts from here).
    pub started: Instant,
}

/// The DNS server and the proxy read the latest tally from here.
impl lb_edge::HealthSource for Shared {
    fn current(&self) -> arc_swap::Guard<Arc<HealthSnapshot>> {
        self.snapshot.load()
    }
}

impl Shared {
    pub fn new(
        config: Arc<Config>,
        settings: TallySettings,
        config_hash: String,
        metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            snapshot: ArcSwap::from_pointee(HealthSnapshot::initial(&config)),
            ballots: ArcSwap::from_pointee(Vec::new()),
            members: ArcSwap::from_pointee(Vec::new()),
            lb_states: ArcSwap::from_pointee(vec![None; config.load_balancers.len()]),
            events: Mutex::new(EventLog::default()),
            votes_counted: AtomicUsize::new(0),
            metrics,
            notifier: std::sync::OnceLock::new(),
            drains: Mutex::new(std::collections::BTreeMap::new()),
            drain_decisions: Mutex::new(std::collections::BTreeMap::new()),
            drain_state: std::sync::OnceLock::new(),
            started: Instant::now(),
            config,
            settings,
            config_hash,
        })
    }

    /// Whether this aggregator's answers can be trusted yet (`GET /readyz`).
    pub fn readiness(&self) -> crate::readiness::Readiness {
        crate::readiness::assess(
            &self.config,
            &self.snapshot.load(),
            self.started.elapsed(),
            self.settings.warmup_timeout,
        )
    }

    /// The votes behind one endpoint's verdict, region by region and node by node.
    pub fn endpoint_votes(
        &self,
        ballots: &[Ballot],
        pool: PoolId,
        endpoint: EndpointId,
    ) -> Vec<RegionVotes> {
        let config = &self.config;
        let p = config.pool(pool);
        let max_age = p
            .monitor
            .and_then(|m| config.monitors.get(m))
            .map_or(Duration::MAX, |m| {
                m.interval.mul_f64(self.settings.max_age_intervals)
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

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Runs until the task is dropped: polls the mesh every `poll` (a change is tallied at once;
/// without changes the tally still reruns every 500 ms, since votes go stale with time).
pub async fn run(
    shared: Arc<Shared>,
    chitchat: Arc<tokio::sync::Mutex<Chitchat>>,
    gossip: Option<Arc<mesh::TransportStats>>,
    poll: Duration,
) {
    let config = Arc::clone(&shared.config);
    let mut view = MeshView::default();
    let mut state = TallyState::new(&config);
    let mut last: Option<Instant> = None;
    let mut ticker = tokio::time::interval(poll);
    let mut published_drains = String::new();
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let mine: Vec<mesh::keys::DrainDecision> = shared
            .drain_decisions
            .lock()
            .map(|d| d.values().cloned().collect())
            .unwrap_or_default();
        let changed = {
            let mut c = chitchat.lock().await;
            let value = mesh::keys::encode_drains(&mine);
            if value != published_drains {
                c.self_node_state().set(mesh::keys::DRAINS, value.clone());
                published_drains = value;
                if let Some(Err(e)) = shared.drain_state.get().map(|st| st.save(&mine)) {
                    tracing::error!(error = %e, "drain decisions not saved");
                }
            }
            view.refresh(&c, &shared.config_hash, now)
        };
        if !changed && last.is_some_and(|l| now.duration_since(l) < Duration::from_millis(500)) {
            continue;
        }
        last = Some(now);
        if let Some(n) = shared.notifier.get() {
            n.elect(
                view.members()
                    .iter()
                    .filter(|m| m.role == "aggregator" && m.alive && !m.config_drift)
                    .map(|m| m.node_id.as_str()),
            );
        }
        let ballots = view.ballots(&config, now);
        let mut outcome = tally(&config, &ballots, &state, &shared.settings, now);
        // Drained endpoints take no new traffic; their sessions drain (lb-core's affinity).
        // In force: the newest decision from any live aggregator (ours included, also before
        // gossip has carried it back).
        let newest = crate::drains::newest(&config, view.drains().iter().chain(mine.iter()));
        // Published from the next tick on: a drain outlives the aggregator that made it.
        if let Ok(mut own) = shared.drain_decisions.lock() {
            crate::drains::adopt(&mut own, &newest);
        }
        let in_force = crate::drains::in_force(&newest);
        if let Ok(mut drains) = shared.drains.lock() {
            *drains = in_force;
            for (&(pool, endpoint), &since) in drains.iter() {
                if let Some(e) = outcome
                    .snapshot
                    .endpoints
                    .get_mut(pool.0)
                    .and_then(|p| p.get_mut(endpoint.0))
                {
                    e.disabled_at = Some(since);
                }
            }
        }
        let took = now.elapsed();
        shared
            .votes_counted
            .store(outcome.votes_counted, Ordering::Relaxed);
        let at_ms = unix_ms();
        let mut lb_states = (**shared.lb_states.load()).clone();
        if !outcome.changes.is_empty() {
            // Whether a pool's state so far still counted endpoints without a verdict: its
            // next change is a first verdict, not news.
            let before = shared.snapshot.load();
            let had_unknown = |pool: PoolId| {
                let p = config.pool(pool);
                p.monitor.is_some()
                    && p.endpoints.iter().enumerate().any(|(i, e)| {
                        e.enabled
                            && before.endpoint(pool, EndpointId(i)).verdict
                                == lb_core::health::Verdict::Unknown
                    })
            };
            if let Ok(mut log) = shared.events.lock() {
                for change in &outcome.changes {
                    let event = match *change {
                        HealthChange::Endpoint {
                            pool,
                            endpoint,
                            from,
                            to,
                            ..
                        } => HealthEvent {
                            at_ms,
                            kind: "endpoint",
                            load_balancer: None,
                            pool: Some(config.pool(pool).name.clone()),
                            endpoint: Some(config.pool(pool).endpoints[endpoint.0].name.clone()),
                            from: format!("{from:?}").to_lowercase(),
                            to: format!("{to:?}").to_lowercase(),
                            regions: shared.endpoint_votes(&ballots, pool, endpoint),
                            initial: from == lb_core::health::Verdict::Unknown,
                        },
                        HealthChange::Pool { pool, from, to } => HealthEvent {
                            at_ms,
                            kind: "pool",
                            load_balancer: None,
                            pool: Some(config.pool(pool).name.clone()),
                            endpoint: None,
                            from: from.name().to_string(),
                            to: to.name().to_string(),
                            regions: Vec::new(),
                            initial: had_unknown(pool),
                        },
                        HealthChange::LoadBalancer { lb, from, to } => {
                            lb_states[lb] = Some(to);
                            HealthEvent {
                                at_ms,
                                kind: "load_balancer",
                                load_balancer: Some(config.load_balancers[lb].name.clone()),
                                pool: None,
                                endpoint: None,
                                from: from.map_or("unknown".to_string(), |s| {
                                    format!("{s:?}").to_lowercase()
                                }),
                                to: format!("{to:?}").to_lowercase(),
                                regions: Vec::new(),
                                initial: from.is_none()
                                    || (0..config.pools.len()).any(|p| {
                                        config.load_balancers[lb].settings.uses_pool(PoolId(p))
                                            && had_unknown(PoolId(p))
                                    }),
                            }
                        }
                    };
                    if let Some(n) = shared.notifier.get() {
                        n.offer(&event);
                    }
                    log.push(event);
                }
            }
        }
        crate::metrics::record_tally(
            &config,
            &outcome.snapshot,
            shared.settings.region,
            &lb_states,
            &outcome.changes,
            outcome.votes_counted,
            took,
        );
        crate::metrics::record_members(view.members());
        if let Some(g) = &gossip {
            crate::metrics::record_gossip(g);
        }
        state = outcome.state;
        shared.lb_states.store(Arc::new(lb_states));
        shared.snapshot.store(Arc::new(outcome.snapshot));
        crate::metrics::record_ready(shared.readiness().ready);
        shared.ballots.store(Arc::new(ballots));
        shared.members.store(Arc::new(view.members().to_vec()));
    }
}
