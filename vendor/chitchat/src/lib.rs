#![allow(clippy::type_complexity)]
#![allow(clippy::derive_partial_eq_without_eq)]

mod bounded;
mod configuration;
mod delta;
mod digest;
mod failure_detector;
mod listener;
mod message;
mod message_serialize;
pub(crate) mod serialize;
mod server;
mod state;
mod tier;
pub mod transport;
mod types;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::iter::once;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use delta::Delta;
use failure_detector::FailureDetector;
pub use failure_detector::FailureDetectorConfig;
pub use listener::ListenerHandle;
pub use serialize::{Deserializable, Serializable};
use tokio::sync::watch;
use tokio_stream::wrappers::WatchStream;
use tracing::{error, info, warn};

pub use self::bounded::BoundedGossip;
pub use self::tier::{MAX_CARDS, PeerCard, Tier, ViewSettings};
use self::tier::View;
use self::bounded::Recency;
pub use self::configuration::{CatchupCallback, ChitchatConfig};
pub use self::state::{ClusterStateSnapshot, NodeState};
use crate::digest::Digest;
pub use crate::message::{ChitchatEnvelope, ChitchatMessage, ProtocolVersion};
pub use crate::server::{ChitchatHandle, spawn_chitchat};
use crate::state::ClusterState;
pub use crate::types::{ChitchatId, DeletionStatus, Heartbeat, Version, VersionedValue};

/// meshlb patch: deltas refused as malformed (a key version above the delta's `max_version`,
/// see `NodeState::check_delta_status`), for meshlb's metrics.
pub static MALFORMED_DELTAS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets up a tracing subscriber writing to the test harness's captured
/// output, so `cargo test` can display logs on failure.
///
/// Guarded by a `OnceLock` because `tracing::subscriber::set_global_default`
/// can only be called once per process, and all tests in a given test
/// binary run in the same process.
#[cfg(any(test, feature = "testsuite"))]
pub fn setup_tracing_for_tests() {
    use std::sync::OnceLock;

    static TRACING_INIT: OnceLock<()> = OnceLock::new();
    TRACING_INIT.get_or_init(|| {
        let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    });
}

/// Maximum UDP datagram payload size (in bytes).
///
/// Note that 65KB typically won't fit in a single IP packet,
/// so long messages will be sent over several IP fragments of MTU size.
///
/// We pick a large payload size because at the moment because
/// we send the self digest "in full".
/// An Ethernet frame size of 1400B would limit us to 20 nodes
/// or so.
pub(crate) const MAX_UDP_DATAGRAM_PAYLOAD_SIZE: usize = 65_507;

/// Number of bytes left for a delta payload in a single reply datagram, once
/// the message header and `reserved_len` bytes (e.g. a digest carried in the
/// same message) are accounted for.
pub(crate) const fn delta_mtu(reserved_len: usize) -> usize {
    MAX_UDP_DATAGRAM_PAYLOAD_SIZE
        .saturating_sub(ChitchatEnvelope::HEADER_LEN)
        .saturating_sub(reserved_len)
}

/// meshlb patch: the smallest room a bounded message leaves a delta (`DeltaSerializer` asks
/// for at least 100 bytes).
const MIN_DELTA_MTU: usize = 100;

/// meshlb patch: how often bounded gossip sweeps deleted keys past their grace period.
const GC_SWEEP_EVERY: Duration = Duration::from_secs(10);

/// meshlb patch: how many members a round of bounded gossip judges live or dead.
const LIVENESS_PER_ROUND: usize = 512;

/// meshlb patch: with bounded gossip, each member is judged live or dead at least this often
/// (`liveness_per_round`).
const LIVENESS_PERIOD: Duration = Duration::from_secs(1);

/// meshlb patch: a round of bounded gossip judges every member of a small cluster, and of a
/// large one enough that each is judged once per [`LIVENESS_PERIOD`], at most
/// [`LIVENESS_PER_ROUND`]: at 1,000 members and 100 ms rounds, 100 a round instead of every
/// member every round (5,000 phi computations per node per second saved, where a failure
/// takes seconds to show anyway).
fn liveness_per_round(members: usize, gossip_interval: Duration) -> usize {
    let rounds_per_period =
        (LIVENESS_PERIOD.as_secs_f64() / gossip_interval.as_secs_f64().max(1e-3)).max(1.0);
    let share = (members as f64 / rounds_per_period).ceil() as usize;
    share.max(members.min(32)).min(LIVENESS_PER_ROUND)
}

/// meshlb patch: with bounded gossip, members dead longer than the grace period are removed
/// at most this often (`update_nodes_liveness`).
const DEAD_GC_EVERY: Duration = Duration::from_secs(1);

/// meshlb patch: the members a node can name by id hash (`src/bounded.rs`), a bound on what a
/// stream of forged digest entries can make it hold.
const MAX_MEMBERS_BY_HASH: usize = 65_536;

/// meshlb patch: a later generation of `id`'s node id is in the cluster state: `id` is a
/// restarted node's old self, left out of partial digests. Ids order by node id, then
/// generation, so the next id in the map tells.
fn superseded(state: &ClusterState, id: &ChitchatId) -> bool {
    state
        .nodes_after(Some(id))
        .next()
        .is_some_and(|next| next.node_id == id.node_id && next.generation_id > id.generation_id)
}

/// To prevent dead nodes from being recorded again after deletion,
/// we keep a local memory of the last nodes that were garbage collected.
pub(crate) const GARBAGE_COLLECTED_NODE_HISTORY_SIZE: NonZeroUsize =
    NonZeroUsize::new(5_000).unwrap();

pub struct Chitchat {
    config: ChitchatConfig,
    cluster_state: ClusterState,
    failure_detector: FailureDetector,
    /// Notifies listeners when a change has occurred in the set of live nodes.
    previous_live_nodes: HashMap<ChitchatId, Version>,
    live_nodes_watcher_tx: watch::Sender<BTreeMap<ChitchatId, NodeState>>,
    live_nodes_watcher_rx: watch::Receiver<BTreeMap<ChitchatId, NodeState>>,
    /// meshlb patch: what bounded gossip remembers (`src/bounded.rs`).
    recency: Recency,
    /// meshlb patch: the edges this node knows of (`src/tier.rs`).
    view: View,
}

impl Chitchat {
    pub fn with_chitchat_id_and_seeds(
        config: ChitchatConfig,
        seed_addrs: watch::Receiver<HashSet<SocketAddr>>,
        initial_key_values: Vec<(String, String)>,
    ) -> Self {
        let failure_detector = FailureDetector::new(config.failure_detector_config.clone());
        let view = View::new(config.view.clone());
        let previous_live_nodes = HashMap::new();
        let (live_nodes_watcher_tx, live_nodes_watcher_rx) = watch::channel(BTreeMap::new());
        let mut chitchat = Chitchat {
            config,
            cluster_state: ClusterState::with_seed_addrs(seed_addrs),
            failure_detector,
            previous_live_nodes,
            live_nodes_watcher_tx,
            live_nodes_watcher_rx,
            recency: Recency::default(),
            view,
        };

        let self_node_state = chitchat.self_node_state();

        // Immediately mark the node as alive to ensure it responds to SYN messages.
        self_node_state.inc_heartbeat();

        // Set initial key/value pairs.
        for (key, value) in initial_key_values {
            self_node_state.set(key, value);
        }
        chitchat
    }

    /// meshlb patch: `reserved` bytes of a bounded message are left for its cards
    /// (`src/tier.rs`).
    pub(crate) fn create_syn_message(&mut self, reserved: usize) -> ChitchatMessage {
        if let Some(bounded) = self.config.bounded.clone() {
            return self.create_bounded_syn(&bounded, reserved);
        }
        let scheduled_for_deletion: HashSet<_> = self.scheduled_for_deletion_nodes().collect();
        let digest = self.compute_digest(&scheduled_for_deletion);
        ChitchatMessage::Syn {
            cluster_id: self.config.cluster_id.clone(),
            digest,
            delta: Delta::default(),
        }
    }

    /// meshlb patch: a Syn of bounded gossip, its digest bounded and its rumours pushed
    /// (`src/bounded.rs`).
    fn create_bounded_syn(&mut self, bounded: &BoundedGossip, reserved: usize) -> ChitchatMessage {
        let now = tokio::time::Instant::now();
        self.recency.expire(now, bounded.hot_for);
        self.note_self_moved(now);
        let fixed =
            ChitchatEnvelope::HEADER_LEN + self.config.cluster_id.serialized_len() + reserved;
        let room = bounded.max_message.saturating_sub(fixed);
        let mut digest = self.bounded_digest(None, room / 2);
        let mtu = room.saturating_sub(digest.serialized_len(ProtocolVersion::V2));
        let delta = self.bounded_delta(None, mtu, bounded.rumour_pushes);
        let left = mtu.saturating_sub(delta.serialized_len());
        self.add_heartbeats(&mut digest, left, bounded.heartbeats);
        ChitchatMessage::Syn {
            cluster_id: self.config.cluster_id.clone(),
            digest,
            delta,
        }
    }

    /// meshlb patch: this node's own changes become hot as any member's do.
    fn note_self_moved(&mut self, now: tokio::time::Instant) {
        if self.is_edge() {
            // An edge's own state is never sent (`src/tier.rs`).
            return;
        }
        let self_max = self.self_node_state().max_version();
        if self_max > self.recency.self_max {
            let from = self.recency.self_max;
            self.recency.self_max = self_max;
            let self_id = self.config.chitchat_id.clone();
            self.recency.moved(&self_id, from, now);
        }
    }

    /// meshlb patch: a digest of at most `budget` bytes (`src/bounded.rs`). The whole cluster
    /// when it fits; else this node, the members `echo` lists, the wanted ones, the hot ones,
    /// and the window.
    fn bounded_digest(&mut self, echo: Option<&Digest>, budget: usize) -> Digest {
        let node_count = self.cluster_state.node_states().len();
        // An entry is at least ~35 bytes (a short id, a v4 address, three u64s).
        let edge = self.is_edge();
        if node_count.saturating_mul(35) <= budget {
            let mut scheduled: HashSet<&ChitchatId> = self
                .failure_detector
                .scheduled_for_deletion_nodes()
                .collect();
            if edge {
                scheduled.insert(&self.config.chitchat_id);
            }
            let full = self.cluster_state.compute_digest(&scheduled);
            if full.serialized_len(ProtocolVersion::V2) <= budget {
                return full;
            }
        }
        let detector = &self.failure_detector;
        let state = &self.cluster_state;
        let self_id = &self.config.chitchat_id;
        let mut digest = Digest {
            node_digests: BTreeMap::new(),
            partial: true,
            heartbeats: Vec::new(),
        };
        // The flags byte and the entry count.
        let mut used = 3usize;
        let add = |id: &ChitchatId, limit: usize, digest: &mut Digest, used: &mut usize| -> bool {
            if digest.node_digests.contains_key(id) || detector.is_scheduled_for_deletion(id) {
                return true;
            }
            if edge && id == self_id {
                return true;
            }
            if id != self_id && (detector.is_dead(id) || superseded(state, id)) {
                return true;
            }
            let len = bounded::entry_len(id);
            if *used + len > limit {
                return false;
            }
            let Some(node_digest) = state.node_digest(id) else {
                return true;
            };
            *used += len;
            digest.node_digests.insert(id.clone(), node_digest);
            true
        };
        add(self_id, budget, &mut digest, &mut used);
        if let Some(echo) = echo {
            for id in echo.node_digests.keys() {
                if !add(id, budget, &mut digest, &mut used) {
                    break;
                }
            }
        }
        let quarter = used + budget.saturating_sub(used) / 4;
        for id in self.recency.wanted() {
            if !add(id, quarter, &mut digest, &mut used) {
                break;
            }
        }
        let half = used + budget.saturating_sub(used) / 3;
        for id in self.recency.hot_newest() {
            if !add(id, half, &mut digest, &mut used) {
                break;
            }
        }
        let mut last = None;
        for id in state
            .nodes_after(self.recency.cursor.as_ref())
            .take(node_count)
        {
            if !add(id, budget, &mut digest, &mut used) {
                break;
            }
            last = Some(id.clone());
        }
        if last.is_some() {
            self.recency.cursor = last;
        }
        digest
    }

    /// meshlb patch: the delta for a peer's `digest` and this node's rumours, within `mtu`
    /// (`src/bounded.rs`).
    fn bounded_delta(&mut self, digest: Option<&Digest>, mtu: usize, pushes: u32) -> Delta {
        let rumours = self.recency.rumours(pushes);
        let detector = &self.failure_detector;
        let hidden = self.is_edge().then_some(&self.config.chitchat_id);
        let (delta, pushed) = self.cluster_state.compute_bounded_delta(
            digest,
            &rumours,
            mtu.max(MIN_DELTA_MTU),
            |id| detector.is_scheduled_for_deletion(id) || hidden == Some(id),
        );
        for id in &pushed {
            self.recency.pushed(id);
        }
        delta
    }

    /// meshlb patch: members a peer's digest shows this node is behind on become wanted.
    fn note_wanted(&mut self, digest: &Digest) {
        if self.config.bounded.is_none() {
            return;
        }
        for (id, node_digest) in &digest.node_digests {
            if id == self.self_chitchat_id() {
                continue;
            }
            let mine = self
                .cluster_state
                .node_state(id)
                .map(NodeState::max_version)
                .unwrap_or(0);
            if node_digest.max_version > mine {
                self.recency.want(id, node_digest.max_version);
            }
        }
    }

    /// Digest contains important information about the list of members in
    /// the cluster.
    fn report_heartbeats_in_digest(&mut self, digest: &Digest) {
        for (chitchat_id, node_digest) in &digest.node_digests {
            self.report_heartbeat(chitchat_id, node_digest.heartbeat);
        }
        // meshlb patch (`src/bounded.rs`): members a digest named by their id hash.
        if self.config.bounded.is_some() {
            for chitchat_id in digest.node_digests.keys() {
                if self.recency.by_hash.len() < MAX_MEMBERS_BY_HASH {
                    self.recency
                        .by_hash
                        .entry(bounded::id_hash(chitchat_id))
                        .or_insert_with(|| chitchat_id.clone());
                }
            }
        }
        for (hash, heartbeat) in &digest.heartbeats {
            if let Some(chitchat_id) = self.recency.by_hash.get(hash).cloned() {
                if self.cluster_state.node_state(&chitchat_id).is_some() {
                    self.report_heartbeat(&chitchat_id, *heartbeat);
                }
            }
        }
    }

    /// meshlb patch: fills what `room` leaves of a bounded digest with the heartbeats of
    /// members it does not list, walking the member list round by round.
    fn add_heartbeats(&mut self, digest: &mut Digest, room: usize, cap: usize) {
        if !digest.partial {
            return;
        }
        let count = cap.min(room / 16);
        let hidden = self.is_edge().then_some(&self.config.chitchat_id);
        let mut last = None;
        let node_count = self.cluster_state.node_states().len();
        for id in self
            .cluster_state
            .nodes_after(self.recency.heartbeat_cursor.as_ref())
            .take(node_count)
        {
            if digest.heartbeats.len() >= count {
                break;
            }
            last = Some(id);
            if digest.node_digests.contains_key(id)
                || self.failure_detector.is_dead(id)
                || hidden == Some(id)
            {
                continue;
            }
            if let Some(node_state) = self.cluster_state.node_state(id) {
                digest
                    .heartbeats
                    .push((bounded::id_hash(id), node_state.heartbeat()));
            }
        }
        if let Some(last) = last {
            self.recency.heartbeat_cursor = Some(last.clone());
        }
    }

    fn process_delta(&mut self, delta: Delta) {
        let mut moved = Vec::new();
        let was_reset_triggered = self.cluster_state.apply_delta(delta, &mut moved);
        if self.config.bounded.is_some() {
            let now = tokio::time::Instant::now();
            for (id, from, to) in &moved {
                self.recency.moved(id, *from, now);
                self.recency.caught_up(id, *to);
            }
        }
        if was_reset_triggered {
            if let Some(catchup_callback) = &self.config.catchup_callback {
                info!("executing catch-up callback");
                catchup_callback();
            }
        }
    }

    /// meshlb patch: `reserved` bytes of a bounded reply are left for its cards (`src/tier.rs`).
    pub(crate) fn process_message(
        &mut self,
        msg: ChitchatMessage,
        reserved: usize,
    ) -> Option<ChitchatMessage> {
        self.update_self_heartbeat();

        match msg {
            ChitchatMessage::Syn {
                cluster_id,
                digest,
                delta,
            } => {
                if cluster_id != self.cluster_id() {
                    warn!(
                        our_cluster_id=%self.cluster_id(),
                        their_cluster_id=%cluster_id,
                        "received SYN message addressed to a different cluster"
                    );
                    return Some(ChitchatMessage::BadCluster);
                }
                self.report_heartbeats_in_digest(&digest);
                self.note_wanted(&digest);
                self.process_delta(delta);
                if let Some(bounded) = self.config.bounded.clone() {
                    self.note_self_moved(tokio::time::Instant::now());
                    let room = bounded
                        .max_message
                        .saturating_sub(ChitchatEnvelope::HEADER_LEN + reserved);
                    let bulk = bounded
                        .max_bulk_message
                        .max(bounded.max_message)
                        .saturating_sub(ChitchatEnvelope::HEADER_LEN + reserved);
                    let mut self_digest = self.bounded_digest(Some(&digest), room / 2);
                    let digest_len = self_digest.serialized_len(ProtocolVersion::V2);
                    let mtu = bulk.saturating_sub(digest_len);
                    let delta = self.bounded_delta(Some(&digest), mtu, bounded.rumour_pushes);
                    // Heartbeats only fill what the first datagram leaves.
                    let left = room
                        .saturating_sub(digest_len)
                        .saturating_sub(delta.serialized_len());
                    self.add_heartbeats(&mut self_digest, left, bounded.heartbeats);
                    return Some(ChitchatMessage::SynAck {
                        digest: self_digest,
                        delta,
                    });
                }
                let scheduled_for_deletion: HashSet<_> =
                    self.scheduled_for_deletion_nodes().collect();
                let self_digest = self.compute_digest(&scheduled_for_deletion);
                let protocol_version = self.config.protocol_version;
                let mtu = delta_mtu(self_digest.serialized_len(protocol_version));
                let delta = if digest.partial {
                    self.cluster_state
                        .compute_bounded_delta(Some(&digest), &[], mtu, |id| {
                            scheduled_for_deletion.contains(id)
                        })
                        .0
                } else {
                    self.cluster_state.compute_partial_delta_respecting_mtu(
                        &digest,
                        mtu,
                        &scheduled_for_deletion,
                    )
                };
                Some(ChitchatMessage::SynAck {
                    digest: self_digest,
                    delta,
                })
            }
            ChitchatMessage::SynAck { digest, delta } => {
                self.report_heartbeats_in_digest(&digest);
                self.note_wanted(&digest);
                self.process_delta(delta);
                if let Some(bounded) = self.config.bounded.clone() {
                    let mtu = bounded
                        .max_bulk_message
                        .max(bounded.max_message)
                        .saturating_sub(ChitchatEnvelope::HEADER_LEN + reserved);
                    let delta = self.bounded_delta(Some(&digest), mtu, bounded.rumour_pushes);
                    return Some(ChitchatMessage::Ack { delta });
                }
                let scheduled_for_deletion =
                    self.scheduled_for_deletion_nodes().collect::<HashSet<_>>();
                let delta = if digest.partial {
                    self.cluster_state
                        .compute_bounded_delta(Some(&digest), &[], delta_mtu(0), |id| {
                            scheduled_for_deletion.contains(id)
                        })
                        .0
                } else {
                    self.cluster_state.compute_partial_delta_respecting_mtu(
                        &digest,
                        delta_mtu(0),
                        &scheduled_for_deletion,
                    )
                };
                Some(ChitchatMessage::Ack { delta })
            }
            ChitchatMessage::Ack { delta } => {
                self.process_delta(delta);
                None
            }
            ChitchatMessage::BadCluster => {
                warn!("message rejected by peer: wrong cluster");
                None
            }
            #[cfg(test)]
            ChitchatMessage::PanicForTest => {
                panic!("panic message received");
            }
        }
    }

    /// meshlb patch: whether this node is an edge (`src/tier.rs`). Tiers need bounded gossip:
    /// without it a node is core, whatever its config says.
    pub fn is_edge(&self) -> bool {
        self.config.tier == Tier::Edge && self.config.bounded.is_some()
    }

    /// meshlb patch: the gossip addresses of the edges this node knows of (`src/tier.rs`).
    pub fn view(&self) -> Vec<SocketAddr> {
        self.view.addrs()
    }

    /// meshlb patch: keeps what a message's cards say (`src/tier.rs`).
    pub(crate) fn note_cards(&mut self, cards: &[PeerCard]) {
        if self.config.bounded.is_none() || cards.is_empty() {
            return;
        }
        let own = self.config.chitchat_id.gossip_advertise_addr;
        self.view.merge(cards, own, tokio::time::Instant::now());
    }

    /// meshlb patch: the cards of this node's next message (`src/tier.rs`): an edge's own
    /// and a sample of the view; none from a core node that knows no edge.
    pub(crate) fn cards(&mut self) -> Vec<PeerCard> {
        if self.config.bounded.is_none() {
            return Vec::new();
        }
        let own = self
            .is_edge()
            .then_some(self.config.chitchat_id.gossip_advertise_addr);
        self.view.cards(own, tokio::time::Instant::now())
    }

    /// meshlb patch: this round's gossip targets in a tiered mesh (`src/tier.rs`), from the
    /// `drawn` ones chitchat picked among the members it holds. An edge that knows other edges
    /// gossips with them, and with one drawn (core) member every `core_every` rounds; a core
    /// node that knows edges gives one of its targets to an edge. Returns whether the round is
    /// an edge's among edges, which skips chitchat's dead-member and seed gossip (each of
    /// thousands of edges would otherwise reach the few seeds every few seconds).
    pub(crate) fn tier_targets(
        &mut self,
        mut drawn: Vec<SocketAddr>,
        count: usize,
    ) -> (Vec<SocketAddr>, bool) {
        if self.config.bounded.is_none() {
            return (drawn, false);
        }
        self.view.expire(tokio::time::Instant::now());
        if self.view.is_empty() {
            return (drawn, false);
        }
        if self.is_edge() {
            let core_turn = self.view.core_turn();
            let from_view = if core_turn {
                count.saturating_sub(1)
            } else {
                count
            };
            let mut targets = self.view.targets(from_view);
            // The core's turn, or a view smaller than a round: drawn members fill the rest.
            for addr in drawn {
                if targets.len() >= count {
                    break;
                }
                if !targets.contains(&addr) {
                    targets.push(addr);
                }
            }
            return (targets, true);
        }
        if let Some(edge) = self.view.targets(1).pop() {
            if drawn.len() >= count {
                drawn.pop();
            }
            drawn.push(edge);
        }
        (drawn, false)
    }

    fn gc_keys_marked_for_deletion(&mut self) {
        // meshlb patch: with bounded gossip, a sweep of every key of every member runs once per
        // `GC_SWEEP_EVERY`, not every round: it is O(members x keys) and the grace period it
        // enforces is an hour in meshlb (`mesh/src/node.rs`).
        if self.config.bounded.is_some() {
            let now = tokio::time::Instant::now();
            if self
                .recency
                .last_gc_sweep
                .is_some_and(|at| now.saturating_duration_since(at) < GC_SWEEP_EVERY)
            {
                return;
            }
            self.recency.last_gc_sweep = Some(now);
        }
        self.cluster_state
            .gc_keys_marked_for_deletion(self.config.marked_for_deletion_grace_period);
    }

    /// Reports heartbeats to the failure detector for nodes in the delta for which we received an
    /// update.
    fn report_heartbeat(&mut self, chitchat_id: &ChitchatId, heartbeat: Heartbeat) {
        if chitchat_id == self.self_chitchat_id() {
            return;
        }

        let should_init_if_absent = self
            .cluster_state
            .last_heartbeat_if_deleted(chitchat_id)
            .map(|last_heartbeat| last_heartbeat < heartbeat)
            .unwrap_or(true);

        let node_state = if should_init_if_absent {
            self.cluster_state.node_state_mut_or_init(chitchat_id)
        } else if let Some(node_state) = self.cluster_state.node_state_mut(chitchat_id) {
            node_state
        } else {
            return;
        };

        if node_state.try_set_heartbeat(heartbeat) {
            self.failure_detector.report_heartbeat(chitchat_id);
        }
    }

    /// Marks the node as dead or alive depending on the new phi values and updates the live nodes
    /// watcher accordingly.
    pub(crate) fn update_nodes_liveness(&mut self) {
        if self.config.bounded.is_some() {
            // meshlb patch: with bounded gossip, a round judges at most `LIVENESS_PER_ROUND`
            // members, walking the list, so a round's cost does not grow with the cluster: at
            // 10,000 members each is judged every ~20 rounds, well within the seconds its
            // heartbeats take to arrive at that size.
            let count = liveness_per_round(
                self.cluster_state.node_states().len(),
                self.config.gossip_interval,
            );
            let mut last = None;
            for chitchat_id in self
                .cluster_state
                .nodes_after(self.recency.liveness_cursor.as_ref())
                .take(count)
            {
                if chitchat_id != &self.config.chitchat_id {
                    self.failure_detector.update_node_liveness(chitchat_id);
                }
                last = Some(chitchat_id);
            }
            self.recency.liveness_cursor = last.cloned();
        } else {
            for chitchat_id in self.cluster_state.nodes() {
                if chitchat_id != self.self_chitchat_id() {
                    self.failure_detector.update_node_liveness(chitchat_id);
                }
            }
        }
        // meshlb patch: the map below is only compared with the last one sent to a watcher;
        // without one it is not built (every live member's id cloned and hashed every round).
        let watched = self.live_nodes_watcher_tx.receiver_count() > 1;
        let current_live_nodes = if !watched {
            HashMap::new()
        } else {
            self.live_nodes()
                .flat_map(|chitchat_id| {
                    if let Some(node_state) = self.node_state(chitchat_id) {
                        return Some((chitchat_id.clone(), node_state.max_version()));
                    }
                    warn!("node state for {chitchat_id:?} is absent");
                    None
                })
                .collect::<HashMap<_, _>>()
        };

        // meshlb patch: the map sent below is a deep copy of every live node's whole state
        // (for meshlb, ~2 KB per pool per prober: megabytes), and every key change of any
        // node makes it due again, so upstream copies it nearly every round. Only build it
        // when someone outside holds a receiver (`live_nodes_watcher`); this struct's own
        // receiver is the one counted otherwise. `previous_live_nodes` is left as it was, so
        // a receiver taken later gets the map at the next round.
        if watched && self.previous_live_nodes != current_live_nodes {
            let live_nodes = current_live_nodes
                .keys()
                .cloned()
                .flat_map(|chitchat_id| {
                    let node_state = self.node_state(&chitchat_id)?;
                    if let Some(liveness_extra_predicate) = &self.config.extra_liveness_predicate {
                        if !liveness_extra_predicate(node_state) {
                            return None;
                        }
                    }
                    Some((chitchat_id, node_state.clone()))
                })
                .collect::<BTreeMap<_, _>>();
            self.previous_live_nodes = current_live_nodes;

            if self.live_nodes_watcher_tx.send(live_nodes).is_err() {
                error!(current_node = ?self.self_chitchat_id(), "error while reporting membership change event.")
            }
        }
        // Perform garbage collection.
        // meshlb patch: with bounded gossip, once per `DEAD_GC_EVERY`: the sweep walks every
        // dead member, and while a large cluster joins most members are dead.
        if self.config.bounded.is_some() {
            let now = tokio::time::Instant::now();
            if self
                .recency
                .last_dead_gc
                .is_some_and(|at| now.saturating_duration_since(at) < DEAD_GC_EVERY)
            {
                return;
            }
            self.recency.last_dead_gc = Some(now);
        }
        let garbage_collected_nodes = self.failure_detector.garbage_collect();
        for chitchat_id in &garbage_collected_nodes {
            if chitchat_id != self.self_chitchat_id() {
                self.cluster_state.remove_node(chitchat_id);
                self.recency.forget(chitchat_id);
            } else {
                error!("self node was marked dead, please report");
            }
        }
    }

    pub fn node_states(&self) -> &BTreeMap<ChitchatId, NodeState> {
        self.cluster_state.node_states()
    }

    pub fn node_state(&self, chitchat_id: &ChitchatId) -> Option<&NodeState> {
        self.cluster_state.node_state(chitchat_id)
    }

    pub fn self_node_state(&mut self) -> &mut NodeState {
        self.cluster_state
            .node_state_mut_or_init(&self.config.chitchat_id)
    }

    /// Returns the set of nodes considered alive by the failure detector. It includes the
    /// current node (also called "self node"), which is always considered alive.
    pub fn live_nodes(&self) -> impl Iterator<Item = &ChitchatId> {
        once(self.self_chitchat_id()).chain(self.failure_detector.live_nodes())
    }

    /// Returns the current adaptive failure detection timeout for a remote node.
    ///
    /// The timeout is the elapsed time since the node's last heartbeat at which its phi value
    /// reaches the configured [`FailureDetectorConfig::phi_threshold`]. It changes as new
    /// heartbeat intervals are observed and does not include the delay until the next liveness
    /// update, which normally occurs during a gossip round.
    ///
    /// Returns `None` for the current node, unknown nodes, nodes without a valid heartbeat interval
    /// sample, and nodes whose samples were reset after they were declared dead.
    pub fn failure_detection_timeout(&self, chitchat_id: &ChitchatId) -> Option<Duration> {
        if chitchat_id == self.self_chitchat_id() {
            return None;
        }
        self.failure_detector.failure_detection_timeout(chitchat_id)
    }

    /// Returns a watch stream for monitoring changes in the cluster.
    ///
    /// The stream will emit a new value whenever a node:
    /// - joins the cluster
    /// - leaves the cluster
    /// - updates its max version
    ///
    /// Heartbeats are not notified.
    pub fn live_nodes_watch_stream(&self) -> WatchStream<BTreeMap<ChitchatId, NodeState>> {
        WatchStream::new(self.live_nodes_watcher_rx.clone())
    }

    pub fn live_nodes_watcher(&self) -> watch::Receiver<BTreeMap<ChitchatId, NodeState>> {
        self.live_nodes_watcher_rx.clone()
    }

    /// Returns the set of nodes considered dead by the failure detector.
    pub fn dead_nodes(&self) -> impl Iterator<Item = &ChitchatId> {
        self.failure_detector.dead_nodes()
    }

    /// Returns the set of nodes considered dead by the failure detector.
    pub fn scheduled_for_deletion_nodes(&self) -> impl Iterator<Item = &ChitchatId> {
        self.failure_detector.scheduled_for_deletion_nodes()
    }

    /// Returns the set of seed nodes.
    pub fn seed_nodes(&self) -> HashSet<SocketAddr> {
        self.cluster_state.seed_addrs()
    }

    pub fn cluster_id(&self) -> &str {
        &self.config.cluster_id
    }

    /// Returns the current node's Chitchat ID.
    pub fn self_chitchat_id(&self) -> &ChitchatId {
        &self.config.chitchat_id
    }

    /// Returns a serializable snapshot of the cluster state.
    pub fn state_snapshot(&self) -> ClusterStateSnapshot {
        ClusterStateSnapshot::from(&self.cluster_state)
    }

    /// Fast forward the entire node state.
    ///
    /// This method is meant to be called as a follow up to a
    /// [`ChitchatConfig::catchup_callback`], to communicate back the caught up
    /// state to Chitchat.
    ///
    /// Updated key-values will see their listeners called. The order of calls
    /// is arbitrary.
    ///
    /// Existing key-values that are not present in `key_values` will be deleted
    /// (not marked with a tombstone).
    ///
    /// A node state that doesn't exist will be created, except if it was
    /// recently deleted and garbage collected. We leave the responsibility of
    /// forcing the garbage collected node's recreation to the regular chitchat
    /// heartbeat protocol.
    pub fn reset_node_state_if_update(
        &mut self,
        chitchat_id: &ChitchatId,
        key_values: impl Iterator<Item = (String, VersionedValue)>,
        max_version: Version,
        last_gc_version: Version,
    ) {
        let should_init_if_absent = self
            .cluster_state
            .last_heartbeat_if_deleted(chitchat_id)
            .is_none();

        let node_state = if should_init_if_absent {
            self.cluster_state.node_state_mut_or_init(chitchat_id)
        } else if let Some(node_state) = self.cluster_state.node_state_mut(chitchat_id) {
            node_state
        } else {
            info!("skip reset_node_state because the node was recently garbage collected");
            return;
        };

        let monotonic_property_before: (Version, Version) = node_state.monotonic_property();
        let monotonic_property_if_we_applied_reset_state: (Version, Version) =
            (last_gc_version, max_version);

        if monotonic_property_before >= monotonic_property_if_we_applied_reset_state {
            // If we reach this point, we had a race condition and went through a reset via chitchat
            // gossip.
            // Now we are trying to reset our state via grpc gossip, but the new state is already
            // be out of date.
            warn!(
                node_max_version = node_state.max_version(),
                node_last_gc_version = node_state.last_gc_version(),
                delta_max_version = max_version,
                delta_last_gc_version = last_gc_version,
                "attempted to reset node with an obsolete state (rare race condition)"
            );
            return;
        }

        // We make sure that the node is listed in the failure detector,
        // so that we won't forget to GC the state.
        //
        // We don't report the heartbeat however, to make sure that we
        // avoid identifying resetted node as alive.
        self.failure_detector
            .get_or_create_sampling_window(chitchat_id);

        node_state.set_max_version(max_version);

        // We don't want to call listeners for keys that are already up to date so we must do this
        // dance instead of clearing the node state and then setting the new values.
        let mut previous_keys: HashSet<String> = node_state
            .key_values_including_deleted()
            .map(|(key, _)| key.to_string())
            .collect();
        for (key, value) in key_values {
            previous_keys.remove(&key);
            node_state.set_versioned_value(key, value)
        }
        for key in previous_keys {
            node_state.remove_key_value_internal(&key);
        }
        node_state.set_last_gc_version(last_gc_version);

        let monotonic_property_after = node_state.monotonic_property();

        assert!(monotonic_property_after > monotonic_property_before);
    }

    pub(crate) fn update_self_heartbeat(&mut self) {
        self.self_node_state().inc_heartbeat();
    }

    pub(crate) fn cluster_state(&self) -> &ClusterState {
        &self.cluster_state
    }

    /// Computes the node's digest.
    fn compute_digest(&self, scheduled_for_deletion_nodes: &HashSet<&ChitchatId>) -> Digest {
        self.cluster_state
            .compute_digest(scheduled_for_deletion_nodes)
    }

    /// Subscribes a callback that will be called every time a key matching the supplied prefix
    /// is inserted or updated.
    ///
    /// Disclaimer:
    /// The callback is required to be as light as possible.
    /// In particular,
    /// - it should not access the cluster state (as it is locked at the moment of the execution of
    ///   the callback.
    /// - it should be fast: the callback is executed in an async context.
    ///
    /// The callback is called with a [`KeyChangeEvent`] that contains the key stripped of the
    /// prefix, the new value and the node that owns this key/value.
    ///
    /// Deleted keys are not notified.
    #[must_use]
    pub fn subscribe_event(
        &self,
        key_prefix: impl ToString,
        callback: impl Fn(KeyChangeEvent) + 'static + Send + Sync,
    ) -> ListenerHandle {
        self.cluster_state()
            .listeners
            .subscribe_event(key_prefix, callback)
    }
}

#[derive(Debug, Copy, Clone, Eq, PartialEq)]
pub struct KeyChangeEvent<'a> {
    /// The matching key without the prefix used to subscribe to the event.
    pub key: &'a str,
    /// The new value.
    pub value: &'a str,
    /// The node for which the event was triggered.
    pub node: &'a ChitchatId,
}

impl KeyChangeEvent<'_> {
    fn strip_key_prefix(&self, prefix: &str) -> Option<KeyChangeEvent> {
        let key_without_prefix = self.key.strip_prefix(prefix)?;
        Some(KeyChangeEvent {
            key: key_without_prefix,
            value: self.value,
            node: self.node,
        })
    }
}
