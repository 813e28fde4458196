//! The aggregator's loop: read the mesh, tally, apply the drains, publish the snapshot
//! (arc-swap, read by the frontends without a lock), log every health change with the votes
//! behind it; and adopt a reloaded config between two tallies. The decisions are pure
//! functions elsewhere (`tally`, `drains`, `events`); this file only feeds them and publishes
//! what they return.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitchat::Chitchat;
use lb_core::clock::unix_ms;
use mesh::keys::{self, DrainDecision};
use tokio::sync::mpsc;

use crate::adopt::Adopt;
use crate::mesh_view::MeshView;
use crate::shared::{InForce, Shared};
use crate::tally::{tally, TallyState};

/// Without mesh changes the tally still reruns this often, since votes go stale with time.
const RETALLY_EVERY: Duration = Duration::from_millis(500);

/// What the loop keeps from one tally to the next.
struct Loop {
    shared: Arc<Shared>,
    chitchat: Arc<tokio::sync::Mutex<Chitchat>>,
    gossip: Option<Arc<mesh::TransportStats>>,
    view: MeshView,
    state: TallyState,
    published_drains: String,
    /// The readiness last published in gossip (`keys::READY`).
    published_ready: Option<bool>,
    /// The tally's gauges, registered once per config.
    gauges: crate::metrics::TallyGauges,
}

/// Runs until the task is dropped: polls the mesh every `poll` and tallies at once when
/// something changed; adopts each generation `reloads` brings.
pub async fn run(
    shared: Arc<Shared>,
    chitchat: Arc<tokio::sync::Mutex<Chitchat>>,
    gossip: Option<Arc<mesh::TransportStats>>,
    poll: Duration,
    mut reloads: mpsc::Receiver<Adopt>,
) {
    let state = TallyState::new(shared.in_force.load().config());
    let mut me = Loop {
        shared,
        chitchat,
        gossip,
        view: MeshView::default(),
        state,
        published_drains: String::new(),
        published_ready: None,
        gauges: crate::metrics::TallyGauges::default(),
    };
    let mut last: Option<Instant> = None;
    let mut ticker = tokio::time::interval(poll);
    let mut reloads_open = true;
    loop {
        let adopt = tokio::select! {
            _ = ticker.tick() => None,
            a = reloads.recv(), if reloads_open => {
                reloads_open = a.is_some();
                a
            }
        };
        if let Some(Adopt { next, done }) = adopt {
            me.adopt(next).await;
            last = Some(Instant::now());
            let _ = done.send(());
            continue;
        }
        let now = Instant::now();
        let hash = me.shared.in_force.load().config_hash.clone();
        let changed = me.refresh(now, &hash).await;
        // The members (`GET /members`, the console) as of this tick, not the last tally's: a
        // config generation reaching a node shows within a tick.
        if **me.shared.latest.members.load() != *me.view.members() {
            me.shared
                .latest
                .members
                .store(Arc::new(me.view.members().to_vec()));
        }
        if !changed && last.is_some_and(|l| now.duration_since(l) < RETALLY_EVERY) {
            continue;
        }
        last = Some(now);
        let in_force = me.shared.in_force.load_full();
        me.tally_into(&in_force, now);
        me.shared.rtt_history.sample(
            in_force.config(),
            &in_force.generation.snapshot(),
            lb_core::clock::unix_secs(),
        );
    }
}

impl Loop {
    /// Publishes this aggregator's drain decisions and reads the mesh (drift judged against
    /// `config_hash`); whether it changed.
    async fn refresh(&mut self, now: Instant, config_hash: &str) -> bool {
        let mine: Vec<DrainDecision> = self
            .shared
            .drains
            .tables
            .lock()
            .map(|t| t.decisions.values().cloned().collect())
            .unwrap_or_default();
        let mut c = self.chitchat.lock().await;
        let value = keys::encode_drains(&mine);
        if value != self.published_drains {
            c.self_node_state().set(keys::DRAINS, value.clone());
            self.published_drains = value;
            if let Some(Err(e)) = self.shared.drains.state_file.get().map(|st| st.save(&mine)) {
                tracing::error!(error = %e, "drain decisions not saved");
            }
        }
        let ready = self.shared.readiness().ready;
        if self.published_ready != Some(ready) {
            c.self_node_state()
                .set(keys::READY, if ready { "1" } else { "0" });
            self.published_ready = Some(ready);
        }
        self.shared
            .previews
            .sweep(&mut c, lb_core::clock::unix_ms());
        let changed = self.view.refresh(&c, config_hash, now);
        let pops = self.view.proxy_pops();
        if **self.shared.pops.load() != pops {
            self.shared.pops.store(Arc::new(pops));
        }
        self.shared.tunnel_holders.set(self.view.tunnel_holders());
        changed
    }

    /// Makes `next` the config in force: the tally's state, the drain tables and the load
    /// balancers' states carried over by identity, one event per endpoint gone, a first tally
    /// on the new config published into its generation before anything reads it, then the
    /// swap and the gossiped config hash.
    async fn adopt(&mut self, next: InForce) {
        let before = self.shared.in_force.load_full();
        let (old, new) = (Arc::clone(before.config()), Arc::clone(next.config()));
        self.state = self.state.carry_over(&old, &new);
        crate::metrics::record_gone(&old, &new);
        let removed = crate::tally::removed_endpoints(&old, &new);
        let gone = crate::events::removed(&old, &removed, &before.generation.snapshot(), unix_ms());
        if let Ok(mut log) = self.shared.events.lock() {
            for event in gone {
                log.push(event);
            }
        }
        if let Ok(mut tables) = self.shared.drains.tables.lock() {
            tables.decisions = crate::drains::newest(&new, tables.decisions.values());
            tables.in_force = crate::drains::in_force(&tables.decisions);
            tables.config = Arc::clone(&new);
        }
        // The new generation starts from the carried verdicts (not all Unknown), so the first
        // tally's changes are news, told and notified as such, not first verdicts.
        let mut carried = lb_core::health::HealthSnapshot::initial(&new);
        for (pi, pool) in new.pools.iter().enumerate() {
            for ei in 0..pool.endpoints.len() {
                let (p, e) = (lb_core::config::PoolId(pi), lb_core::config::EndpointId(ei));
                carried.endpoints[pi][ei].verdict = self.state.verdict(p, e);
            }
        }
        carried.generation = next.generation.id();
        if let Err(e) = next.generation.publish(carried) {
            tracing::error!(error = %e, "carried snapshot not published");
        }
        let next = Arc::new(next);
        let now = Instant::now();
        // The first tally of the new config, before it is in force: a reader never sees its
        // generation's placeholder snapshot. Drift is judged against the new config already.
        let _ = self.refresh(now, &next.config_hash).await;
        self.tally_into(&next, now);
        self.shared.in_force.store(Arc::clone(&next));
        let loaded_at = next.loaded_at.to_string();
        let mut c = self.chitchat.lock().await;
        let me = c.self_node_state();
        me.set(keys::CONFIG_HASH, &next.config_hash);
        me.set(keys::CONFIG_LOADED_AT, &loaded_at);
    }

    /// One tally of `in_force`'s config over the mesh as last read, published into its
    /// generation.
    fn tally_into(&mut self, in_force: &InForce, now: Instant) {
        let shared = &*self.shared;
        let config = Arc::clone(in_force.config());
        let settings = &shared.setup.settings;
        if let Some(n) = &in_force.notifier {
            n.elect(
                self.view
                    .members()
                    .iter()
                    .filter(|m| m.role == mesh::Role::Aggregator && m.alive && !m.config_drift)
                    .map(|m| m.node_id.as_str()),
            );
        }
        let roster = &shared.setup.regions;
        let ballots = self.view.ballots(&config, roster, now);
        metrics::gauge!("meshlb_off_roster_probers")
            .set(self.view.off_roster(roster).count() as f64);
        let mut outcome = tally(&config, &ballots, &self.state, settings, now);
        // In force: the newest decision from any live aggregator (ours included, also before
        // gossip has carried it back); published from the next tick on, so a drain outlives
        // the aggregator that made it.
        if let Ok(mut tables) = shared.drains.tables.lock() {
            let now_ms = lb_core::clock::unix_ms();
            let seen = self.view.drains();
            let believable = seen.iter().filter(|d| crate::drains::plausible(d, now_ms));
            let refused = seen.len() - believable.clone().count();
            if refused > 0 {
                metrics::counter!("meshlb_drain_decisions_refused_total").increment(refused as u64);
            }
            let newest =
                crate::drains::newest(&config, believable.chain(tables.decisions.values()));
            crate::drains::adopt(&mut tables.decisions, &newest);
            tables.in_force = crate::drains::in_force(&newest);
            let drained = crate::drains::merged(&tables.in_force, &in_force.config_drains);
            crate::drains::apply(&mut outcome.snapshot, &drained);
        }
        let took = now.elapsed();
        shared
            .latest
            .votes_counted
            .store(outcome.votes_counted, Ordering::Relaxed);
        log_silence(&shared.latest.silence.load(), outcome.silence.as_ref());
        shared.latest.silence.store(Arc::new(outcome.silence));
        if !outcome.changes.is_empty() {
            let before = in_force.generation.snapshot();
            let events =
                crate::events::from_changes(&config, &outcome.changes, &before, unix_ms(), {
                    |pool, check, endpoint| {
                        shared.endpoint_votes(&config, &ballots, pool, check, endpoint)
                    }
                });
            if let Ok(mut log) = shared.events.lock() {
                for event in events {
                    if let Some(n) = &in_force.notifier {
                        n.offer(&event);
                    }
                    log.push(event);
                }
            }
        }
        let lb_states = outcome.state.lb_states().to_vec();
        crate::metrics::record_tally(
            &mut self.gauges,
            &config,
            &outcome.snapshot,
            settings.region,
            &lb_states,
            &outcome.changes,
            outcome.votes_counted,
            took,
        );
        crate::metrics::record_group_members(&config, outcome.state.check_verdicts());
        crate::metrics::record_members(self.view.members());
        if let Some(g) = &self.gossip {
            meshlb_node::metrics::record_gossip(g);
        }
        in_force
            .check_verdicts
            .store(Arc::new(outcome.state.check_verdicts().to_vec()));
        self.state = outcome.state;
        in_force.lb_states.store(Arc::new(lb_states));
        let mut snapshot = outcome.snapshot;
        snapshot.generation = in_force.generation.id();
        if let Err(e) = in_force.generation.publish(snapshot) {
            // Only a bug can get here: the snapshot was tallied for this very config.
            tracing::error!(error = %e, "snapshot not published");
        }
        crate::metrics::record_ready(shared.readiness().ready);
        in_force.ballots.store(Arc::new(ballots));
        shared
            .latest
            .members
            .store(Arc::new(self.view.members().to_vec()));
    }
}

/// Says when the tally goes fail static, why, when the reason changes, and when it counts
/// votes again (`before`: the last tally's reason).
fn log_silence(before: &Option<crate::tally::Silence>, now: Option<&crate::tally::Silence>) {
    use std::mem::discriminant;
    match (before, now) {
        (None, Some(s)) => {
            tracing::warn!(cause = ?s, "fail static: no vote counted, keeping the last known health: {}", s.describe());
        }
        (Some(b), Some(s)) if discriminant(b) != discriminant(s) => {
            tracing::warn!(cause = ?s, "still fail static: {}", s.describe());
        }
        (Some(_), None) => tracing::info!("votes counted again: fail static over"),
        _ => {}
    }
}
