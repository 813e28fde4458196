//! meshlb patch: bounded gossip (protocol version 2).
//!
//! Upstream's Syn and SynAck carry a digest of every member (~57 B each with meshlb's ids), so
//! a message grows with the cluster: 57 KB at 1,000 members, which is ~39 IP fragments that
//! must all arrive, and nothing at all at 10,000 (chitchat issue #59 left the Syn "without any
//! sampling logic"). With [`BoundedGossip`], no message is larger than
//! [`BoundedGossip::max_message`] bytes, whatever the cluster's size:
//!
//! - A digest that does not fit is *partial*: it lists this node, the members the peer listed
//!   (a SynAck echoes them, so the initiator learns exactly what to send back), the members
//!   this node knows it is behind on (*wanted*: a peer's digest showed a newer version), the
//!   members whose state moved here lately (*hot*, newest first), and then a window that walks
//!   the member list round by round (anti-entropy, new members and heartbeats). A member a
//!   partial digest does not list is not asked for: "absent" means "not asked", where a full
//!   digest's "absent" means "unknown, send everything".
//! - Changes are pushed without being asked (*rumours*, as memberlist piggybacks broadcasts):
//!   every message, the Syn included, carries the latest changes of hot members, each from the
//!   version it moved from here, a bounded number of times. A receiver that was at that version
//!   or later applies it; one that was further behind refuses it as chitchat refuses any delta
//!   with a gap, and asks for the member through its own digests.
//! - A member held dead, or an older generation of a live node id, is left out of partial
//!   digests at once: a rolling restart does not double them.
//!
//! A cluster whose full digest fits sends it, as version 1 did. Releases before this patch
//! cannot read version 2; meshlb turns it on by default and `--gossip-max-datagram 0` off,
//! for a rolling upgrade from such a release (docs/operations.md#gossip-at-fleet-size).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::{ChitchatId, Version};

/// The settings of bounded gossip.
#[derive(Debug, Clone)]
pub struct BoundedGossip {
    /// The largest envelope chitchat hands its transport, header included, for a Syn and for
    /// the digest of a SynAck: what one datagram holds.
    pub max_message: usize,
    /// The largest envelope of a SynAck's or an Ack's delta, for a peer that is behind by more
    /// than one datagram holds (the transport cuts it into datagrams of `max_message`): a
    /// joining node fetches a large state in bulk instead of a datagram per exchange.
    pub max_bulk_message: usize,
    /// How long a member whose state moved stays at the head of this node's digests.
    pub hot_for: Duration,
    /// How many messages carry one change of a member as a rumour.
    pub rumour_pushes: u32,
    /// At most this many members' heartbeats ride in a digest beside its entries.
    pub heartbeats: usize,
}

impl Default for BoundedGossip {
    fn default() -> Self {
        BoundedGossip {
            max_message: 1_300,
            max_bulk_message: 8 * 1_300,
            hot_for: Duration::from_secs(2),
            rumour_pushes: 12,
            heartbeats: 40,
        }
    }
}

/// Rumours are drawn from this many of the latest changes.
pub(crate) const MAX_RUMOURS: usize = 24;

/// At most this many members are wanted at once; more are found again by the window.
pub(crate) const MAX_WANTED: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Hot {
    key: (Instant, u64),
    /// The version this member moved from here: a rumour is the delta above it.
    from: Version,
    pushes: u32,
}

/// What a node remembers to bound its digests: which members moved lately, which it is behind
/// on, and where its window stands.
#[derive(Debug, Default)]
pub(crate) struct Recency {
    hot: HashMap<ChitchatId, Hot>,
    /// The hot members by when they moved, oldest first.
    order: BTreeMap<(Instant, u64), ChitchatId>,
    seq: u64,
    /// Member -> the version a peer said it holds.
    wanted: BTreeMap<ChitchatId, Version>,
    /// The last member the window listed.
    pub(crate) cursor: Option<ChitchatId>,
    /// This node's own `max_version` when it last looked.
    pub(crate) self_max: Version,
    /// The last member whose heartbeat a digest carried.
    pub(crate) heartbeat_cursor: Option<ChitchatId>,
    /// The last member a round judged live or dead.
    pub(crate) liveness_cursor: Option<ChitchatId>,
    /// When deleted keys were last swept.
    pub(crate) last_gc_sweep: Option<Instant>,
    /// When members dead past the grace period were last removed.
    pub(crate) last_dead_gc: Option<Instant>,
    /// Members by [`id_hash`], for the heartbeats digests carry.
    pub(crate) by_hash: HashMap<u64, ChitchatId>,
}

impl Recency {
    /// `id` moved here from version `from` at `now`.
    pub(crate) fn moved(&mut self, id: &ChitchatId, from: Version, now: Instant) {
        self.seq += 1;
        let key = (now, self.seq);
        let from = match self.hot.get(id) {
            Some(hot) => {
                self.order.remove(&hot.key);
                hot.from.min(from)
            }
            None => from,
        };
        self.hot.insert(
            id.clone(),
            Hot {
                key,
                from,
                pushes: 0,
            },
        );
        self.order.insert(key, id.clone());
    }

    /// Forgets members that moved longer than `hot_for` ago.
    pub(crate) fn expire(&mut self, now: Instant, hot_for: Duration) {
        while let Some(entry) = self.order.first_entry() {
            if now.saturating_duration_since(entry.key().0) <= hot_for {
                break;
            }
            let id = entry.remove();
            self.hot.remove(&id);
        }
    }

    /// The hot members, newest first.
    pub(crate) fn hot_newest(&self) -> impl Iterator<Item = &ChitchatId> {
        self.order.values().rev()
    }

    /// The hot members still due as rumours, newest first, with the version each moved from:
    /// among the [`MAX_RUMOURS`] newest, since one message holds no more.
    pub(crate) fn rumours(&self, pushes: u32) -> Vec<(ChitchatId, Version)> {
        self.order
            .values()
            .rev()
            .take(MAX_RUMOURS)
            .filter_map(|id| {
                let hot = self.hot.get(id)?;
                (hot.pushes < pushes).then(|| (id.clone(), hot.from))
            })
            .collect()
    }

    /// `id`'s rumour went out once more.
    pub(crate) fn pushed(&mut self, id: &ChitchatId) {
        if let Some(hot) = self.hot.get_mut(id) {
            hot.pushes = hot.pushes.saturating_add(1);
        }
    }

    /// A peer holds `id` at `version`, later than this node.
    pub(crate) fn want(&mut self, id: &ChitchatId, version: Version) {
        if let Some(wanted) = self.wanted.get_mut(id) {
            *wanted = (*wanted).max(version);
        } else if self.wanted.len() < MAX_WANTED {
            self.wanted.insert(id.clone(), version);
        }
    }

    /// This node now holds `id` at `version`.
    pub(crate) fn caught_up(&mut self, id: &ChitchatId, version: Version) {
        if self.wanted.get(id).is_some_and(|&wanted| wanted <= version) {
            self.wanted.remove(id);
        }
    }

    pub(crate) fn wanted(&self) -> impl Iterator<Item = &ChitchatId> {
        self.wanted.keys()
    }

    /// `id` is gone from the cluster state.
    pub(crate) fn forget(&mut self, id: &ChitchatId) {
        if let Some(hot) = self.hot.remove(id) {
            self.order.remove(&hot.key);
        }
        self.wanted.remove(id);
        if self.cursor.as_ref() == Some(id) {
            self.cursor = None;
        }
        if self.heartbeat_cursor.as_ref() == Some(id) {
            self.heartbeat_cursor = None;
        }
        if self.liveness_cursor.as_ref() == Some(id) {
            self.liveness_cursor = None;
        }
        self.by_hash.remove(&id_hash(id));
    }

    #[cfg(test)]
    pub(crate) fn hot_len(&self) -> usize {
        self.hot.len()
    }
}

/// The bytes a digest entry for `id` takes in version 2 (version 0's entry: the id and three
/// `u64`s).
pub(crate) fn entry_len(id: &ChitchatId) -> usize {
    use crate::serialize::Serializable;
    id.serialized_len() + 3 * 8
}

/// A member's id as the heartbeats of a digest name it: FNV-1a (64 bits) over its node id,
/// generation and gossip address, the same in every release and on every platform.
pub(crate) fn id_hash(id: &ChitchatId) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(id.node_id.as_bytes());
    eat(&id.generation_id.to_le_bytes());
    match id.gossip_advertise_addr.ip() {
        std::net::IpAddr::V4(ip) => eat(&ip.octets()),
        std::net::IpAddr::V6(ip) => eat(&ip.octets()),
    }
    eat(&id.gossip_advertise_addr.port().to_le_bytes());
    hash
}
