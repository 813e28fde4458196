//! The gossip sink: turns probe reports into the prober's gossiped keys (see `mesh::keys`).
//!
//! `publish` is called from the scheduler and must not block, so reports go down a channel to
//! a task that folds them into per-pool (per group member) values and writes the changed ones to chitchat in
//! batches. A ticker advances the `progress` key every [`PROGRESS_ROUND`], whatever the config.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chitchat::ChitchatHandle;
use tokio::sync::mpsc;

use crate::sink::{ProbeReport, ResultSink};
use crate::threshold::DebouncedState;
use mesh::keys::{self, EndpointResult};

enum Msg {
    Report(Box<ProbeReport>),
    /// The (gossip key, endpoint) pairs still probed after a config reload.
    Retain(BTreeSet<(String, String)>),
}

/// How often the `progress` key advances: the evidence an aggregator counts this prober's
/// results by (a result is a vote while `progress` moved within three of its monitor's
/// intervals, docs/design.md#votes). A monitor's interval is at least 1 s
/// (`lb-core/src/config/validate/mod.rs`), so one second keeps every result fresh whatever the
/// config says, also while this prober and an aggregator run different generations of it. It
/// was once the shortest interval of the config the prober started with: a prober started
/// before its first config (`--config-from-mesh`, no monitors) ticked once a minute, and every
/// aggregator went fail static three seconds after it counted the first failures.
pub const PROGRESS_ROUND: Duration = Duration::from_secs(1);

/// The sink half; clone-free, shareable as `Arc<dyn ResultSink>`.
pub struct GossipPublisher {
    tx: mpsc::UnboundedSender<Msg>,
}

impl ResultSink for GossipPublisher {
    fn publish(&self, report: ProbeReport) {
        let _ = self.tx.send(Msg::Report(Box::new(report)));
    }
}

impl GossipPublisher {
    /// Starts the publishing task on `node`; `round` is how often `progress` advances
    /// ([`PROGRESS_ROUND`] in a node). The task's handle is for the node's supervision: it
    /// ends only when every sink is dropped.
    pub fn start(
        node: &ChitchatHandle,
        round: Duration,
    ) -> (Arc<GossipPublisher>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(node.chitchat(), rx, round));
        (Arc::new(GossipPublisher { tx }), task)
    }

    /// After a config reload: forget endpoints and pools (or group members) no longer probed,
    /// given as (`TargetKey::gossip_key`, endpoint); their keys are deleted from gossip.
    pub fn retain(&self, targets: BTreeSet<(String, String)>) {
        let _ = self.tx.send(Msg::Retain(targets));
    }
}

async fn run(
    chitchat: Arc<tokio::sync::Mutex<chitchat::Chitchat>>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    round: Duration,
) {
    let mut published: HashMap<String, BTreeMap<String, EndpointResult>> = HashMap::new();
    let mut dirty: BTreeSet<String> = BTreeSet::new();
    let mut deleted: Vec<String> = Vec::new();
    let mut progress: u64 = 0;
    let mut ticker = tokio::time::interval(round.max(Duration::from_millis(100)));
    // Batch: write at most every 20 ms, so a burst of reports is one lock and one version bump.
    let mut flush = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                None => return,
                Some(Msg::Report(r)) => {
                    if r.state == DebouncedState::Unknown {
                        continue;
                    }
                    let healthy = r.state == DebouncedState::Healthy;
                    let a = &r.probe.result.attempt;
                    let result = EndpointResult {
                        healthy,
                        rtt_ms: a.passed.then_some(a.rtt.as_secs_f64() * 1000.0),
                        code: a.code,
                        reason: if healthy {
                            None
                        } else {
                            a.reason.as_ref().map(ToString::to_string)
                        },
                    };
                    let member = r.probe.group.as_ref().map(|_| r.probe.monitor.as_str());
                    let key = keys::pool_key(&r.probe.pool, member);
                    let pool = published.entry(key.clone()).or_default();
                    let changed = pool.get(&r.probe.endpoint).is_none_or(|old| old.differs(&result));
                    if changed {
                        pool.insert(r.probe.endpoint.clone(), result);
                        dirty.insert(key);
                    }
                }
                Some(Msg::Retain(keep)) => {
                    published.retain(|pool, endpoints| {
                        endpoints.retain(|e, _| keep.contains(&(pool.clone(), e.clone())));
                        if endpoints.is_empty() {
                            deleted.push(pool.clone());
                            false
                        } else {
                            dirty.insert(pool.clone());
                            true
                        }
                    });
                }
            },
            _ = ticker.tick() => {
                progress += 1;
                chitchat.lock().await.self_node_state().set(keys::PROGRESS, progress);
            }
            _ = flush.tick(), if !dirty.is_empty() || !deleted.is_empty() => {
                let mut c = chitchat.lock().await;
                let state = c.self_node_state();
                for key in std::mem::take(&mut dirty) {
                    if let Some(endpoints) = published.get(&key) {
                        state.set(&key, keys::encode_pool(endpoints));
                    }
                }
                for key in deleted.drain(..) {
                    state.delete(&key);
                }
            }
        }
    }
}
