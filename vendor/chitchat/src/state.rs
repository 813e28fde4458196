use std::cmp::Ordering;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashSet};
use std::fmt::{Debug, Formatter};
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use itertools::Itertools;
use lru::LruCache;
use rand::Rng;
use rand::prelude::SliceRandom;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::delta::{Delta, DeltaSerializer, NodeDelta};
use crate::digest::{Digest, NodeDigest};
use crate::listener::Listeners;
use crate::types::{DeletionStatus, DeletionStatusMutation};
use crate::{
    ChitchatId, GARBAGE_COLLECTED_NODE_HISTORY_SIZE, Heartbeat, KeyChangeEvent, Version,
    VersionedValue,
};

#[derive(Clone, Serialize, Deserialize)]
pub struct NodeState {
    chitchat_id: ChitchatId,
    heartbeat: Heartbeat,
    key_values: BTreeMap<String, VersionedValue>,
    #[serde(skip)]
    listeners: Listeners,
    max_version: Version,
    // This is the maximum version of the last tombstone GC.
    //
    // Due to the garbage collection of tombstones, we cannot
    // safely do replication with nodes that are asking for a
    // diff from a version lower than this.
    //
    // `last_gc_version` expresses the idea: what is the oldest version from which I can
    // confidently emit delta from. The reason why we update it here, is
    // because a node that was just reset or just joined the cluster will get updates
    // from another node that are actually only make sense in the context of the
    // emission of delta from a `last_gc_version`.
    last_gc_version: Version,
    // A proper interpretation of `max_version` and `last_gc_version` is the following:
    // The state contains exactly:
    // - all of the (non-deleted) key values present at snapshot `max_version`.
    // - all of the tombstones of the entry that were marked for deletion between
    //   (`last_gc_version`, `max_version]`.
    //
    // It does not contain any trace of the tombstones of the entries that were marked for deletion
    // before `<= last_gc_version`.
    //
    // Disclaimer: We do not necessarily have max_version >= last_gc_version.
    // After a reset, a node will have its `last_gc_version` set to the version of the node
    // it is getting its KV from, and it will receive a possible partial set of KVs from that node.
    // As a result it is possible for node to have `last_gc_version` > `max_version`.
}

impl Debug for NodeState {
    fn fmt(&self, f: &mut Formatter) -> std::fmt::Result {
        f.debug_struct("NodeState")
            .field("heartbeat", &self.heartbeat)
            .field("key_values", &self.key_values)
            .field("max_version", &self.max_version)
            .field("last_gc_version", &self.last_gc_version)
            .finish()
    }
}

impl NodeState {
    fn new(chitchat_id: ChitchatId, listeners: Listeners) -> NodeState {
        NodeState {
            chitchat_id,
            heartbeat: Heartbeat(0),
            key_values: Default::default(),
            max_version: 0u64,
            listeners,
            last_gc_version: 0u64,
        }
    }

    pub fn chitchat_id(&self) -> &ChitchatId {
        &self.chitchat_id
    }

    pub fn last_gc_version(&self) -> Version {
        self.last_gc_version
    }

    pub(crate) fn set_last_gc_version(&mut self, last_gc_version: Version) {
        self.last_gc_version = last_gc_version;
    }

    pub fn for_test() -> NodeState {
        NodeState {
            chitchat_id: ChitchatId {
                node_id: Arc::from("test-node"),
                generation_id: 0,
                gossip_advertise_addr: SocketAddr::new(Ipv4Addr::new(127, 0, 0, 1).into(), 7280),
            },
            heartbeat: Heartbeat(0),
            key_values: Default::default(),
            max_version: Default::default(),
            listeners: Listeners::default(),
            last_gc_version: 0u64,
        }
    }

    /// Returns the node's last heartbeat value.
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat
    }

    /// Returns the node's max version.
    pub fn max_version(&self) -> Version {
        self.max_version
    }

    /// Returns an iterator over keys matching the given predicate.
    /// Disclaimer: This also returns keys marked for deletion.
    pub fn key_values_including_deleted(&self) -> impl Iterator<Item = (&str, &VersionedValue)> {
        self.key_values
            .iter()
            .map(|(key, versioned_value)| (key.as_str(), versioned_value))
    }

    /// Returns an iterator over all of the (non-deleted) key-values.
    pub fn key_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.key_values_including_deleted()
            .filter(|(_, versioned_value)| !versioned_value.is_deleted())
            .map(|(key, versioned_value)| (key, versioned_value.value.as_str()))
    }

    pub fn set_max_version(&mut self, max_version: Version) {
        self.max_version = max_version;
    }

    // Assess whether the delta can be applied or not.
    #[must_use]
    fn check_delta_status(&self, node_delta: &NodeDelta) -> DeltaStatus {
        // meshlb patch: a delta holding a key version above its own `max_version` is malformed
        // (no honest sender makes one). Applied, it left `self.max_version` above the delta's and
        // tripped the `assert!` at the end of `apply_delta`, panicking the gossip task: a single
        // peer with the cluster key could freeze every node's gossip. Refused and counted.
        if node_delta
            .key_values
            .iter()
            .any(|kv| kv.version > node_delta.max_version)
        {
            crate::MALFORMED_DELTAS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            warn!(
                node=?node_delta.chitchat_id,
                max_version=node_delta.max_version,
                "received a delta with a key version above its max_version, ignoring it"
            );
            return DeltaStatus::Reject;
        }
        if node_delta.from_version_excluded > self.max_version {
            // This delta is coming from the future.
            // We probably experienced a reset and this delta is not usable for us anymore.
            // This is not a bug, it can happen, but we just need to ignore it!
            // meshlb patch: debug, not info: with bounded gossip (`src/bounded.rs`) a rumour
            // reaches nodes further behind than its base version every round, as designed.
            tracing::debug!(
                node=?node_delta.chitchat_id,
                from_version=node_delta.from_version_excluded,
                last_gc_version=node_delta.last_gc_version,
                current_last_gc_version=self.last_gc_version,
                "received delta from the future, ignoring it"
            );
            return DeltaStatus::Reject;
        }

        let compatible_without_reset =
            // Our last GC epoch happened after the delta's peer's
            node_delta.last_gc_version <= self.last_gc_version ||
            // We know about all of the operations that happened up to this GC.
            node_delta.last_gc_version <= self.max_version();

        if !compatible_without_reset {
            if node_delta.from_version_excluded != 0 {
                warn!(
                    node=?node_delta.chitchat_id,
                    from_version=node_delta.from_version_excluded,
                    last_gc_version=node_delta.last_gc_version,
                    current_last_gc_version=self.last_gc_version,
                    "received an inapplicable delta, ignoring it");
                return DeltaStatus::Reject;
            } else {
                return DeltaStatus::ApplyAfterReset;
            }
        }

        if self.max_version() < node_delta.max_version {
            // This is not an update.
            DeltaStatus::Apply
        } else {
            DeltaStatus::Reject
        }
    }

    /// Whenever we update the state, this key should always be increasing.
    pub fn monotonic_property(&self) -> (Version, Version) {
        (self.last_gc_version(), self.max_version())
    }

    fn reset_node(&mut self, last_gc_version: Version) {
        *self = NodeState::new(self.chitchat_id.clone(), self.listeners.clone());
        self.max_version = 0;
        self.last_gc_version = last_gc_version;
    }

    // Apply delta and returns true if a reset was necessary
    fn apply_delta(&mut self, node_delta: NodeDelta, now: Instant) -> DeltaStatus {
        let delta_status = self.check_delta_status(&node_delta);

        match delta_status {
            DeltaStatus::Reject => {
                return delta_status;
            }
            DeltaStatus::Apply => {}
            DeltaStatus::ApplyAfterReset => {
                info!(
                    "resetting for node id {:?} last_gc_version {}",
                    &node_delta.chitchat_id, node_delta.last_gc_version
                );
                self.reset_node(node_delta.last_gc_version);
            }
        }

        let current_max_version = self.max_version();

        for key_value_mutation in node_delta.key_values {
            if key_value_mutation.version <= current_max_version {
                // We already know about this KV.
                continue;
            }
            if key_value_mutation.status.scheduled_for_deletion() {
                // This KV has already been GCed.
                if key_value_mutation.version <= self.last_gc_version {
                    continue;
                }
            }
            let new_versioned_value = VersionedValue {
                value: key_value_mutation.value,
                version: key_value_mutation.version,
                status: key_value_mutation.status.into_status(now),
            };
            self.set_versioned_value(key_value_mutation.key, new_versioned_value);
        }

        assert!(node_delta.max_version >= self.max_version);
        self.max_version = node_delta.max_version;
        delta_status
    }

    /// Returns key values matching a prefix
    pub fn iter_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a VersionedValue)> + 'a {
        let range = (Bound::Included(prefix), Bound::Unbounded);
        self.key_values
            .range::<str, _>(range)
            .take_while(move |(key, _)| key.starts_with(prefix))
            .filter(|&(_, versioned_value)| !versioned_value.is_deleted())
            .map(|(key, versioned_value)| (key.as_str(), versioned_value))
    }

    /// Returns the number of key-value pairs, excluding keys marked for deletion.
    pub fn num_key_values(&self) -> usize {
        self.key_values().count()
    }

    /// Returns false if the key is inexistant or marked for deletion.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let versioned_value = self.get_versioned(key)?;
        if versioned_value.is_deleted() {
            return None;
        }
        Some(versioned_value.value.as_str())
    }

    /// If the key is tombstoned, this method will still return the versioned value.
    pub fn get_versioned(&self, key: &str) -> Option<&VersionedValue> {
        self.key_values.get(key)
    }

    /// Sets a new value for a given key.
    ///
    /// Setting a new value automatically increments the
    /// version of the entire NodeState unless the value stays
    /// the same.
    pub fn set(&mut self, key: impl ToString, value: impl ToString) {
        let key = key.to_string();
        let value = value.to_string();
        if let Some(previous_versioned_value) = self.get_versioned(&key) {
            if previous_versioned_value.value == value
                && matches!(previous_versioned_value.status, DeletionStatus::Set)
            {
                // No need to change anything, the value is already set!
                return;
            }
        }
        let new_version = self.max_version + 1;
        self.set_with_version(key, value, new_version);
    }

    /// Sets a new value that will be deleted after the grace period but visible
    /// until then
    pub fn set_with_ttl(&mut self, key: impl ToString, value: impl ToString) {
        let key = key.to_string();
        let value = value.to_string();
        if let Some(previous_versioned_value) = self.get_versioned(&key) {
            if previous_versioned_value.value == value
                && matches!(
                    previous_versioned_value.status,
                    DeletionStatus::DeleteAfterTtl(_)
                )
            {
                // No need to change anything, the value is already set!
                return;
            }
        }
        let new_version = self.max_version + 1;
        self.set_versioned_value(
            key.to_string(),
            VersionedValue {
                value: value.to_string(),
                version: new_version,
                status: DeletionStatus::DeleteAfterTtl(Instant::now()),
            },
        );
    }

    /// Deletes the entry associated to the given key.
    ///
    /// From the reader's perspective, the entry is deleted right away.
    ///
    /// In reality, the entry is not removed from memory right away, but rather
    /// marked with a tombstone.
    /// That tombstone is annotated with the time of removal, so that after a configurable
    /// grace period, it will be remove by the garbage collection.
    pub fn delete(&mut self, key: &str) {
        let Some(versioned_value) = self.key_values.get_mut(key) else {
            warn!("Key `{key}` does not exist in the node's state and could not be deleted.",);
            return;
        };
        self.max_version += 1;
        versioned_value.version = self.max_version;
        versioned_value.value = "".to_string();
        versioned_value.status = DeletionStatusMutation::Delete.into_status(Instant::now());
    }

    /// Similar to [`Self::delete`] but does not delete the entry right away,
    /// instead it remains visible until the grace period is reached.
    ///
    /// At the end of the grace period, the entry will be deleted just like a
    /// regular tombstoned entry.
    pub fn delete_after_ttl(&mut self, key: &str) {
        let Some(versioned_value) = self.key_values.get_mut(key) else {
            warn!(
                "Key `{key}` does not exist in the node's state and could not scheduled for an \
                 eventual deletion.",
            );
            return;
        };
        self.max_version += 1;
        versioned_value.version = self.max_version;
        versioned_value.status = DeletionStatusMutation::DeleteAfterTtl.into_status(Instant::now());
    }

    pub(crate) fn inc_heartbeat(&mut self) {
        self.heartbeat.inc();
    }

    /// Attempts to set the heartbeat of another node.
    /// If the value is actually not an update, just ignore the data and return false.
    /// As a corner case, the first value is not considered an update.
    ///
    /// Otherwise, returns true.
    pub fn try_set_heartbeat(&mut self, heartbeat_new_value: Heartbeat) -> bool {
        if self.heartbeat.0 == 0 {
            // This is the first heartbeat.
            // Let's set it, but we do not consider it as an update.
            self.heartbeat = heartbeat_new_value;
            return false;
        }
        if heartbeat_new_value > self.heartbeat {
            self.heartbeat = heartbeat_new_value;
            true
        } else {
            false
        }
    }

    fn digest(&self) -> NodeDigest {
        NodeDigest {
            heartbeat: self.heartbeat,
            last_gc_version: self.last_gc_version,
            max_version: self.max_version,
        }
    }

    /// Removes the keys marked for deletion such that `tombstone + grace_period > heartbeat`.
    fn gc_keys_marked_for_deletion(&mut self, grace_period: Duration) {
        let now = Instant::now();
        let mut max_deleted_version = self.last_gc_version;
        self.key_values
            .retain(|_, versioned_value: &mut VersionedValue| {
                let Some(deleted_start_instant) = versioned_value
                    .status
                    .time_of_start_scheduled_for_deletion()
                else {
                    // The KV is not deleted. We keep it!
                    return true;
                };
                if now < deleted_start_instant + grace_period {
                    // We haved not passed the grace period yet. We keep it!
                    return true;
                }
                // We have exceeded the tombstone grace period. Time to remove it.
                max_deleted_version = versioned_value.version.max(max_deleted_version);
                false
            });
        self.last_gc_version = max_deleted_version;
    }

    /// Removes a key-value pair without marking it for deletion.
    ///
    /// Most of the time, you do not want to call this method but,
    /// `mark_for_deletion` instead.
    pub(crate) fn remove_key_value_internal(&mut self, key: &str) {
        self.key_values.remove(key);
    }

    /// Returns an iterator over the versioned values that are strictly greater than
    /// `floor_version`. The floor version typically comes from the max version of a digest.
    ///
    /// This includes keys marked for deletion.
    fn stale_key_values(
        &self,
        floor_version: u64,
    ) -> impl Iterator<Item = (&str, &VersionedValue)> {
        // TODO optimize by checking the max version.
        self.key_values_including_deleted()
            .filter(move |(_key, versioned_value)| versioned_value.version > floor_version)
    }

    /// Sets a new versioned value to associate to a given key.
    /// This operation is ignored if the key value inserted has a version that is obsolete.
    ///
    /// This method also update the max_version if necessary.
    pub(crate) fn set_versioned_value(
        &mut self,
        key: String,
        versioned_value_update: VersionedValue,
    ) {
        let key_clone = key.clone();
        let key_change_event = KeyChangeEvent {
            key: key_clone.as_str(),
            value: &versioned_value_update.value,
            node: &self.chitchat_id,
        };
        self.max_version = versioned_value_update.version.max(self.max_version);

        match self.key_values.entry(key) {
            Entry::Occupied(mut occupied) => {
                let occupied_versioned_value = occupied.get_mut();
                // The current version is more recent than the newer version.
                if occupied_versioned_value.version >= versioned_value_update.version {
                    return;
                }
                *occupied_versioned_value = versioned_value_update.clone();
            }
            Entry::Vacant(vacant) => {
                vacant.insert(versioned_value_update.clone());
            }
        };
        if !versioned_value_update.is_deleted() {
            self.listeners.trigger_event(key_change_event);
        }
    }

    fn set_with_version(&mut self, key: impl ToString, value: impl ToString, version: Version) {
        assert!(version > self.max_version);
        self.set_versioned_value(
            key.to_string(),
            VersionedValue {
                value: value.to_string(),
                version,
                status: DeletionStatus::Set,
            },
        );
    }
}

/// Enum describing whether a given delta is applicable to a state.
/// (the logic depends on the state max_version, gc_version, and the delta
/// from_version_excluded, max_version, and gc_version)
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum DeltaStatus {
    /// The delta should be rejected:
    /// it could be too far in the future or too far in the past.
    Reject,
    /// The delta should be applied.
    /// It is valid and bring new information.
    Apply,
    /// The delta should be applied, but this requires a reset!
    /// Our peer have detected that our max_version was lower than
    /// their last_gc_version.
    ///
    /// Applying the delta without reset could mean we would be missing tombstones.
    ApplyAfterReset,
}

pub(crate) struct ClusterState {
    node_states: BTreeMap<ChitchatId, NodeState>,
    seed_addrs: watch::Receiver<HashSet<SocketAddr>>,
    pub(crate) listeners: Listeners,
    // Memory of the recently garbage collected nodes to avoid recreating them
    // if some other node is still sharing them.
    garbage_collected_nodes: LruCache<ChitchatId, Heartbeat>,
}

impl Debug for ClusterState {
    fn fmt(&self, f: &mut Formatter) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("seed_addrs", &self.seed_addrs.borrow())
            .field("node_states", &self.node_states)
            .finish()
    }
}

#[cfg(test)]
impl Default for ClusterState {
    fn default() -> Self {
        let (_seed_addrs_tx, seed_addrs_rx) = watch::channel(Default::default());
        Self {
            node_states: Default::default(),
            seed_addrs: seed_addrs_rx,
            listeners: Default::default(),
            garbage_collected_nodes: LruCache::new(GARBAGE_COLLECTED_NODE_HISTORY_SIZE),
        }
    }
}

impl ClusterState {
    pub fn with_seed_addrs(seed_addrs: watch::Receiver<HashSet<SocketAddr>>) -> ClusterState {
        ClusterState {
            seed_addrs,
            node_states: BTreeMap::new(),
            listeners: Default::default(),
            garbage_collected_nodes: LruCache::new(GARBAGE_COLLECTED_NODE_HISTORY_SIZE),
        }
    }

    pub(crate) fn node_states(&self) -> &BTreeMap<ChitchatId, NodeState> {
        &self.node_states
    }

    /// Get a mutable reference to the requested node state, or create and add a
    /// new state if none was found.
    pub(crate) fn node_state_mut_or_init(&mut self, chitchat_id: &ChitchatId) -> &mut NodeState {
        // TODO use the `hash_raw_entry` feature once it gets stabilized.
        // Most of the time the entry is already present. We avoid cloning chitchat_id with
        // this if statement.
        let entry = self.node_states.entry(chitchat_id.clone());
        match entry {
            Entry::Occupied(value) => value.into_mut(),
            Entry::Vacant(vacant) => {
                self.garbage_collected_nodes.pop(chitchat_id);
                let new_node_state = NodeState::new(chitchat_id.clone(), self.listeners.clone());
                vacant.insert(new_node_state)
            }
        }
    }

    pub fn node_state(&self, chitchat_id: &ChitchatId) -> Option<&NodeState> {
        self.node_states.get(chitchat_id)
    }

    /// Get a mutable node state if it exists.
    pub(crate) fn node_state_mut(&mut self, chitchat_id: &ChitchatId) -> Option<&mut NodeState> {
        self.node_states.get_mut(chitchat_id)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &ChitchatId> {
        self.node_states.keys()
    }

    pub fn seed_addrs(&self) -> HashSet<SocketAddr> {
        self.seed_addrs.borrow().clone()
    }

    pub(crate) fn remove_node(&mut self, chitchat_id: &ChitchatId) {
        let node_state = self.node_states.remove(chitchat_id);
        if let Some(node_state) = node_state {
            self.garbage_collected_nodes
                .push(chitchat_id.clone(), node_state.heartbeat);
        }
    }

    // Apply delta and returns true if there was a reset.
    //
    // meshlb patch: `moved` gets each member whose `max_version` rose, with the version it rose
    // from (`src/bounded.rs`).
    pub(crate) fn apply_delta(
        &mut self,
        delta: Delta,
        moved: &mut Vec<(ChitchatId, Version, Version)>,
    ) -> bool {
        let now = Instant::now();
        // Apply delta.
        let mut contains_reset = false;
        for node_delta in delta.node_deltas {
            if let Some(node_state) = self.node_state_mut(&node_delta.chitchat_id) {
                let max_before = node_state.max_version();
                let monotonic_property_before = node_state.monotonic_property();
                let delta_status = node_state.apply_delta(node_delta, now);
                let monotonic_property_after = node_state.monotonic_property();
                assert!(
                    monotonic_property_after >= monotonic_property_before,
                    "after {monotonic_property_after:?}, before {monotonic_property_before:?}"
                );
                contains_reset |= delta_status == DeltaStatus::ApplyAfterReset;
                if node_state.max_version() != max_before {
                    moved.push((
                        node_state.chitchat_id().clone(),
                        max_before,
                        node_state.max_version(),
                    ));
                }
            }
        }
        contains_reset
    }

    pub fn compute_digest(&self, scheduled_for_deletion: &HashSet<&ChitchatId>) -> Digest {
        Digest {
            node_digests: self
                .node_states
                .iter()
                .filter(|(chitchat_id, _)| !scheduled_for_deletion.contains(chitchat_id))
                .map(|(chitchat_id, node_state)| (chitchat_id.clone(), node_state.digest()))
                .collect(),
            partial: false,
            heartbeats: Vec::new(),
        }
    }

    /// meshlb patch (`src/bounded.rs`): the digest entry of one member.
    pub(crate) fn node_digest(&self, chitchat_id: &ChitchatId) -> Option<NodeDigest> {
        self.node_states.get(chitchat_id).map(NodeState::digest)
    }

    /// meshlb patch (`src/bounded.rs`): the members after `cursor`, then from the first one
    /// round to it, so that a window walks the whole list.
    pub(crate) fn nodes_after<'a>(
        &'a self,
        cursor: Option<&'a ChitchatId>,
    ) -> impl Iterator<Item = &'a ChitchatId> + 'a {
        let (after, upto): (
            Box<dyn Iterator<Item = &ChitchatId>>,
            Box<dyn Iterator<Item = &ChitchatId>>,
        ) = match cursor {
            Some(cursor) => (
                Box::new(
                    self.node_states
                        .range::<ChitchatId, _>((Bound::Excluded(cursor), Bound::Unbounded))
                        .map(|(id, _)| id),
                ),
                Box::new(
                    self.node_states
                        .range::<ChitchatId, _>((Bound::Unbounded, Bound::Included(cursor)))
                        .map(|(id, _)| id),
                ),
            ),
            None => (
                Box::new(self.node_states.keys()),
                Box::new(std::iter::empty()),
            ),
        };
        after.chain(upto)
    }

    /// meshlb patch (`src/bounded.rs`): the delta for a peer's `digest` (a partial one asks
    /// only for the members it lists; none, in a Syn, asks for nothing), then as many
    /// `rumours` — a member and the version its change moved from here — as `mtu` leaves room
    /// for. Returns the delta and the rumours it carries in full.
    pub(crate) fn compute_bounded_delta(
        &self,
        digest: Option<&Digest>,
        rumours: &[(ChitchatId, Version)],
        mtu: usize,
        scheduled_for_deletion: impl Fn(&ChitchatId) -> bool,
    ) -> (Delta, Vec<ChitchatId>) {
        let mut stale_nodes = SortedStaleNodes::default();
        if let Some(digest) = digest {
            let mut offer = |chitchat_id: &'_ ChitchatId| {
                let Some((chitchat_id, node_state)) = self.node_states.get_key_value(chitchat_id)
                else {
                    return;
                };
                if scheduled_for_deletion(chitchat_id) {
                    return;
                }
                let (digest_last_gc_version, digest_max_version) = digest
                    .node_digests
                    .get(chitchat_id)
                    .map(|node_digest| (node_digest.last_gc_version, node_digest.max_version))
                    .unwrap_or((0u64, 0u64));
                if node_state.max_version <= digest_max_version {
                    return;
                }
                let should_reset = digest_last_gc_version < node_state.last_gc_version
                    && digest_max_version < node_state.last_gc_version;
                let from_version_excluded = if should_reset {
                    0u64
                } else {
                    digest_max_version
                };
                stale_nodes.offer(chitchat_id, node_state, from_version_excluded);
            };
            if digest.partial {
                for chitchat_id in digest.node_digests.keys() {
                    offer(chitchat_id);
                }
            } else {
                for chitchat_id in self.node_states.keys() {
                    offer(chitchat_id);
                }
            }
        }
        let mut delta_serializer = DeltaSerializer::with_mtu(mtu);
        let mut sent: HashSet<&ChitchatId> = HashSet::new();
        let mut full = true;
        for stale_node in stale_nodes.into_iter() {
            sent.insert(stale_node.chitchat_id);
            if !add_node_delta(
                &mut delta_serializer,
                stale_node.chitchat_id,
                stale_node.node_state,
                stale_node.from_version_excluded,
            ) {
                full = false;
                break;
            }
        }
        let mut pushed = Vec::new();
        if full {
            for (chitchat_id, from) in rumours {
                let listed = digest.is_some_and(|digest| {
                    digest.node_digests.contains_key(chitchat_id) || !digest.partial
                });
                if listed || sent.contains(chitchat_id) || scheduled_for_deletion(chitchat_id) {
                    continue;
                }
                let Some(node_state) = self.node_states.get(chitchat_id) else {
                    continue;
                };
                if node_state.max_version <= *from {
                    continue;
                }
                if !add_node_delta(&mut delta_serializer, chitchat_id, node_state, *from) {
                    break;
                }
                pushed.push(chitchat_id.clone());
            }
        }
        (delta_serializer.finish(), pushed)
    }

    pub fn gc_keys_marked_for_deletion(&mut self, marked_for_deletion_grace_period: Duration) {
        for node_state in self.node_states.values_mut() {
            node_state.gc_keys_marked_for_deletion(marked_for_deletion_grace_period);
        }
    }

    /// Implements the Scuttlebutt reconciliation with the scuttle-depth ordering.
    ///
    /// Nodes that are scheduled for deletion (as passed by argument) are not shared.
    pub fn compute_partial_delta_respecting_mtu(
        &self,
        digest: &Digest,
        mtu: usize,
        scheduled_for_deletion: &HashSet<&ChitchatId>,
    ) -> Delta {
        let mut stale_nodes = SortedStaleNodes::default();

        for (chitchat_id, node_state) in &self.node_states {
            if scheduled_for_deletion.contains(chitchat_id) {
                continue;
            }

            let (digest_last_gc_version, digest_max_version) = digest
                .node_digests
                .get(chitchat_id)
                .map(|node_digest| (node_digest.last_gc_version, node_digest.max_version))
                .unwrap_or((0u64, 0u64));

            if node_state.max_version <= digest_max_version {
                // Our version is actually older than the version of the digest.
                // We have no update to offer.
                continue;
            }

            // We have garbage collected some tombstones that the other node does not know about
            // yet. A reset is needed.
            let should_reset = digest_last_gc_version < node_state.last_gc_version
                && digest_max_version < node_state.last_gc_version;

            let from_version_excluded = if should_reset {
                warn!(
                    "Node to reset {chitchat_id:?} last gc version: {} max version: {}",
                    node_state.last_gc_version, digest_max_version
                );
                0u64
            } else {
                digest_max_version
            };

            stale_nodes.offer(chitchat_id, node_state, from_version_excluded);
        }
        let mut delta_serializer = DeltaSerializer::with_mtu(mtu);

        for stale_node in stale_nodes.into_iter() {
            if !delta_serializer.try_add_node(
                stale_node.chitchat_id.clone(),
                stale_node.node_state.last_gc_version,
                stale_node.from_version_excluded,
            ) {
                break;
            };

            let mut added_something = false;
            for (key, versioned_value) in stale_node.stale_key_values() {
                if !delta_serializer.try_add_kv(key, versioned_value.clone()) {
                    return delta_serializer.finish();
                }
                added_something = true;
            }
            // There aren't any key-values in the state_node apparently.
            // Let's add a specific instruction to the delta to set the max version.
            if !added_something {
                // This call returns false if the mtu has been reached.
                //
                // In that case, this empty node update is useless but does not hurt correctness.
                let _ = delta_serializer.try_set_max_version(stale_node.node_state.max_version);
            }
        }

        delta_serializer.finish()
    }

    /// Returns the last heartbeat if the node was deleted and already garbage collected.
    pub fn last_heartbeat_if_deleted(&self, chitchat_id: &ChitchatId) -> Option<Heartbeat> {
        self.garbage_collected_nodes.peek(chitchat_id).copied()
    }
}

/// Adds one member's delta above `from_version_excluded`; false once `mtu` is reached (the
/// member's delta may then be cut short, which upstream's MTU-bound deltas allow too).
fn add_node_delta(
    delta_serializer: &mut DeltaSerializer,
    chitchat_id: &ChitchatId,
    node_state: &NodeState,
    from_version_excluded: Version,
) -> bool {
    if !delta_serializer.try_add_node(
        chitchat_id.clone(),
        node_state.last_gc_version,
        from_version_excluded,
    ) {
        return false;
    }
    let mut added_something = false;
    for (key, versioned_value) in node_state
        .stale_key_values(from_version_excluded)
        .sorted_unstable_by_key(|(_, versioned_value)| versioned_value.version)
    {
        if !delta_serializer.try_add_kv(key, versioned_value.clone()) {
            return false;
        }
        added_something = true;
    }
    if !added_something {
        return delta_serializer.try_set_max_version(node_state.max_version);
    }
    true
}

/// Score used to decide which member should be gossiped first.
///
/// Number of stale key-value pairs carried by the node. A key-value is considered stale if its
/// local version is higher than the max version of the digest, also called "floor version".
#[derive(Clone, Copy, Eq, PartialEq, Debug)]
struct Staleness {
    is_unknown: bool,
    max_version: u64,
    num_stale_key_values: usize,
}

/// The ord should be considered a "priority". The higher, the faster a node's
/// information is gossiped.
impl Ord for Staleness {
    fn cmp(&self, other: &Self) -> Ordering {
        // Nodes get gossiped in priority.
        // Unknown nodes get gossiped first.
        // If several nodes are unknown, the one with the lowest max_version gets gossiped first.
        // This is a bit of a hack to make sure we know about the metastore
        // as soon as possible in quickwit, even when the indexer's chitchat state is bloated.
        //
        // Within known nodes, the one with the highest number of stale records gets gossiped first,
        // as described in the scuttlebutt paper.
        self.is_unknown.cmp(&other.is_unknown).then_with(|| {
            if self.is_unknown {
                self.max_version.cmp(&other.max_version).reverse()
            } else {
                // Then nodes with the highest number of stale records get higher priority.
                self.num_stale_key_values.cmp(&other.num_stale_key_values)
            }
        })
    }
}

impl PartialOrd for Staleness {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Sorts the stale nodes in decreasing order of staleness.
#[derive(Default)]
struct SortedStaleNodes<'a> {
    stale_nodes: BTreeMap<Staleness, Vec<StaleNode<'a>>>,
}

/// The `staleness_score` is used to decide which node should be gossiped first.
/// `floor_version` is the version (transmitted in the digest), below which
/// all the records have already been received.
///
/// There is no such thing as a KV for version 0. So if `floor_version == 0`,
/// it means the node is entirely new.
/// We artificially prioritize those nodes to make sure their membership (in quickwit the service
/// key for instance) and initial KVs spread rapidly.
///
/// If no KV is stale, there is nothing to gossip, and we simply return `None`:
/// the node is not a candidate for gossip.
fn staleness_score(node_state: &NodeState, floor_version: u64) -> Option<Staleness> {
    if node_state.max_version() <= floor_version {
        return None;
    }
    let is_unknown = floor_version == 0u64;
    let num_stale_key_values = if is_unknown {
        node_state.num_key_values()
    } else {
        node_state.stale_key_values(floor_version).count()
    };
    Some(Staleness {
        is_unknown,
        max_version: node_state.max_version,
        num_stale_key_values,
    })
}

impl<'a> SortedStaleNodes<'a> {
    /// Adds a to the list of stale nodes.
    /// If the node is not stale (meaning we have no fresher Key Values to share), then this
    /// function simply returns.
    fn offer(
        &mut self,
        chitchat_id: &'a ChitchatId,
        node_state: &'a NodeState,
        from_version_excluded: u64,
    ) {
        let Some(staleness) = staleness_score(node_state, from_version_excluded) else {
            // The node does not have any stale KV.
            return;
        };
        let stale_node = StaleNode {
            chitchat_id,
            node_state,
            from_version_excluded,
        };
        self.stale_nodes
            .entry(staleness)
            .or_default()
            .push(stale_node);
    }

    /// Returns an iterator over the stale nodes sorted in decreasing order of staleness.
    /// Nodes with the same level of staleness are shuffled to give them an equal opportunity to be
    /// written into the delta.
    fn into_iter(self) -> impl Iterator<Item = StaleNode<'a>> {
        let mut rng = random_generator();
        self.stale_nodes
            .into_values()
            .rev()
            .flat_map(move |mut stale_nodes| {
                stale_nodes.shuffle(&mut rng);
                stale_nodes.into_iter()
            })
    }
}

/// A stale node, i.e. a node with a stale heartbeat or at least one stale key-value pair.
#[derive(Debug)]
struct StaleNode<'a> {
    chitchat_id: &'a ChitchatId,
    node_state: &'a NodeState,
    from_version_excluded: u64,
}

impl StaleNode<'_> {
    /// Iterates over the stale key-value pairs in decreasing order of staleness.
    fn stale_key_values(&self) -> impl Iterator<Item = (&str, &VersionedValue)> {
        self.node_state
            .stale_key_values(self.from_version_excluded)
            .sorted_unstable_by_key(|(_, versioned_value)| versioned_value.version)
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ClusterStateSnapshot {
    pub node_states: Vec<NodeState>,
    pub seed_addrs: HashSet<SocketAddr>,
}

impl From<&ClusterState> for ClusterStateSnapshot {
    fn from(cluster_state: &ClusterState) -> Self {
        let node_states = cluster_state.node_states.values().cloned().collect();
        Self {
            node_states,
            seed_addrs: cluster_state.seed_addrs(),
        }
    }
}

#[cfg(not(test))]
fn random_generator() -> impl Rng {
    rand::rng()
}

// We use a deterministic random generator in tests.
#[cfg(test)]
fn random_generator() -> impl Rng {
    use rand::SeedableRng;
    use rand::prelude::StdRng;
    StdRng::seed_from_u64(9u64)
}
