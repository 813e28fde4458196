//! The aggregator's loop: read the mesh, tally, apply the drains, publish the snapshot
//! (arc-swap, read by the frontends without a lock), log every health change with the votes
//! behind it. The decisions are pure functions elsewhere (`tally`, `drains`, `events`); this
//! file only feeds them and publishes what they return.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitchat::Chitchat;
use lb_core::clock::unix_ms;
use mesh::keys::{self, DrainDecision};

use crate::mesh_view::MeshView;
use crate::shared::Shared;
use crate::tally::{tally, TallyState};

/// Without mesh changes the tally still reruns this often, since votes go stale with time.
const RETALLY_EVERY: Duration = Duration::from_millis(500);

/// Runs until the task is dropped: polls the mesh every `poll` and tallies at once when
/// something changed.
pub async fn run(
    shared: Arc<Shared>,
    chitchat: Arc<tokio::sync::Mutex<Chitchat>>,
    gossip: Option<Arc<mesh::TransportStats>>,
    poll: Duration,
) {
    let config = Arc::clone(shared.config());
    let settings = &shared.setup.settings;
    let mut view = MeshView::default();
    let mut state = TallyState::new(&config);
    let mut last: Option<Instant> = None;
    let mut ticker = tokio::time::interval(poll);
    let mut published_drains = String::new();
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let mine: Vec<DrainDecision> = shared
            .drains
            .decisions
            .lock()
            .map(|d| d.values().cloned().collect())
            .unwrap_or_default();
        let changed = {
            let mut c = chitchat.lock().await;
            let value = keys::encode_drains(&mine);
            if value != published_drains {
                c.self_node_state().set(keys::DRAINS, value.clone());
                published_drains = value;
                if let Some(Err(e)) = shared.drains.state_file.get().map(|st| st.save(&mine)) {
                    tracing::error!(error = %e, "drain decisions not saved");
                }
            }
            view.refresh(&c, &shared.setup.config_hash, now)
        };
        if !changed && last.is_some_and(|l| now.duration_since(l) < RETALLY_EVERY) {
            continue;
        }
        last = Some(now);
        if let Some(n) = shared.outputs.notifier.get() {
            n.elect(
                view.members()
                    .iter()
                    .filter(|m| m.role == mesh::Role::Aggregator && m.alive && !m.config_drift)
                    .map(|m| m.node_id.as_str()),
            );
        }
        let ballots = view.ballots(&config, now);
        let mut outcome = tally(&config, &ballots, &state, settings, now);
        // In force: the newest decision from any live aggregator (ours included, also before
        // gossip has carried it back); published from the next tick on, so a drain outlives
        // the aggregator that made it.
        let newest = crate::drains::newest(&config, view.drains().iter().chain(mine.iter()));
        if let Ok(mut own) = shared.drains.decisions.lock() {
            crate::drains::adopt(&mut own, &newest);
        }
        let in_force = crate::drains::in_force(&newest);
        crate::drains::apply(&mut outcome.snapshot, &in_force);
        if let Ok(mut drains) = shared.drains.in_force.lock() {
            *drains = in_force;
        }
        let took = now.elapsed();
        shared
            .latest
            .votes_counted
            .store(outcome.votes_counted, Ordering::Relaxed);
        let mut lb_states = (**shared.latest.lb_states.load()).clone();
        for change in &outcome.changes {
            if let crate::tally::HealthChange::LoadBalancer { lb, to, .. } = *change {
                lb_states[lb.0] = Some(to);
            }
        }
        if !outcome.changes.is_empty() {
            let before = shared.latest.snapshot.load();
            let events =
                crate::events::from_changes(&config, &outcome.changes, &before, unix_ms(), {
                    |pool, endpoint| shared.endpoint_votes(&ballots, pool, endpoint)
                });
            if let Ok(mut log) = shared.events.lock() {
                for event in events {
                    if let Some(n) = shared.outputs.notifier.get() {
                        n.offer(&event);
                    }
                    log.push(event);
                }
            }
        }
        crate::metrics::record_tally(
            &config,
            &outcome.snapshot,
            settings.region,
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
        shared.latest.lb_states.store(Arc::new(lb_states));
        shared.latest.snapshot.store(Arc::new(outcome.snapshot));
        crate::metrics::record_ready(shared.readiness().ready);
        shared.latest.ballots.store(Arc::new(ballots));
        shared
            .latest
            .members
            .store(Arc::new(view.members().to_vec()));
    }
}
