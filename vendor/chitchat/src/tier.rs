//! meshlb patch: tiers (patch 8 of `PATCHES.md`).
//!
//! Bounded gossip (`src/bounded.rs`) keeps every message within one datagram, but every node
//! still holds every member's state: N² member states in a mesh of N, ~360 GB in all at 10,000
//! members. A mesh of that size is mostly PoPs, and a PoP needs the probers' results and the
//! other aggregators' decisions, not every other PoP's state. So a node is of one of two tiers:
//!
//! - **Core** (probers, aggregators that decide: the default): holds and gossips the state of
//!   every core member, as before.
//! - **Edge** (a PoP that only serves): holds the state of every core member and of no other
//!   edge, and never sends its own state: no digest, delta, rumour or heartbeat it sends names
//!   it. Its own keys stay local. It gossips mostly with other edges, carrying the core's
//!   state to them as any member's, so a change spreads through the edges as an epidemic and
//!   the core's load does not grow with their number.
//!
//! Edges find each other through a **view**: a bounded set of other edges' gossip addresses,
//! each with how long ago the edge itself last vouched for it (Cyclon's age). Every message of
//! a node whose view is not empty (and every message of an edge) ends with a few *cards*: an
//! edge's own, at age zero, and a sample of its view. A receiver keeps the freshest cards; an
//! edge that stops (its cards age past [`ViewSettings::ttl`]) falls out of every view. A core
//! node keeps a view too, fed by the cards of the edges it reaches and that reach it, and
//! gives one of its gossip targets a round to an edge in it, so a core change enters the edges
//! at once. An edge gossips with a core member only while its view is empty (joining) and
//! once every [`ViewSettings::core_every`] rounds, so that a core member whose view emptied
//! hears of edges again: the core's load does not grow with the number of edges.
//!
//! Cards travel after the message, in protocol version 2 only; a reader of the previous
//! release stops at the message's end and never sees them (`src/message_serialize.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::bail;
use rand::prelude::*;
use rand::rngs::SmallRng;
use tokio::time::Instant;

use crate::serialize::{Deserializable, Serializable};

/// Which members a node holds and gossips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tier {
    /// Holds every core member's state, sends its own.
    #[default]
    Core,
    /// Holds every core member's state and its own, sends only the core's.
    Edge,
}

/// The view's settings.
#[derive(Debug, Clone)]
pub struct ViewSettings {
    /// At most this many edges in the view.
    pub capacity: usize,
    /// Cards of a message (the sender's own included).
    pub cards: usize,
    /// An edge not vouched for (by itself, through any chain of cards) for this long leaves
    /// the view.
    pub ttl: Duration,
    /// An edge gossips with a core member once every this many rounds (and whenever its view
    /// is empty). Each contact costs a core member an exchange: 10,000 edges at 100 ms rounds
    /// and the default cost a core of 100 members 1.7 exchanges a second each.
    pub core_every: u32,
}

impl Default for ViewSettings {
    fn default() -> Self {
        ViewSettings {
            capacity: 64,
            cards: 6,
            ttl: Duration::from_secs(20),
            core_every: 600,
        }
    }
}

/// The most cards a message may carry: a longer list is refused as malformed.
pub const MAX_CARDS: usize = 16;

/// Marks the cards after a message.
pub(crate) const CARDS_TAG: u8 = 0xe7;

/// One edge, as a card names it: its gossip address and how long ago it vouched for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCard {
    pub addr: SocketAddr,
    /// In tenths of a second, saturating.
    pub age_ds: u16,
}

impl PeerCard {
    fn age(&self) -> Duration {
        Duration::from_millis(u64::from(self.age_ds) * 100)
    }
}

impl Serializable for PeerCard {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.addr.serialize(buf);
        self.age_ds.serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        self.addr.serialized_len() + 2
    }
}

impl Deserializable for PeerCard {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let addr = SocketAddr::deserialize(buf)?;
        let age_ds = u16::deserialize(buf)?;
        Ok(PeerCard { addr, age_ds })
    }
}

/// The bytes `cards` add after a message: nothing when there are none.
pub(crate) fn cards_len(cards: &[PeerCard]) -> usize {
    if cards.is_empty() {
        return 0;
    }
    2 + cards.iter().map(Serializable::serialized_len).sum::<usize>()
}

pub(crate) fn serialize_cards(cards: &[PeerCard], buf: &mut Vec<u8>) {
    if cards.is_empty() {
        return;
    }
    buf.push(CARDS_TAG);
    buf.push(cards.len().min(MAX_CARDS) as u8);
    for card in cards.iter().take(MAX_CARDS) {
        card.serialize(buf);
    }
}

/// The cards after a message, if any. Bytes after a message that do not start with
/// [`CARDS_TAG`] are left unread, as readers of the previous release leave the cards: room
/// for what a later release adds.
pub(crate) fn deserialize_cards(buf: &mut &[u8]) -> anyhow::Result<Vec<PeerCard>> {
    let Some((&tag, rest)) = buf.split_first() else {
        return Ok(Vec::new());
    };
    if tag != CARDS_TAG {
        return Ok(Vec::new());
    }
    *buf = rest;
    let count = usize::from(u8::deserialize(buf)?);
    if count > MAX_CARDS {
        bail!("{count} cards, more than {MAX_CARDS}");
    }
    (0..count).map(|_| PeerCard::deserialize(buf)).collect()
}

/// The edges a node knows of: address -> when it last vouched for itself, as far as this node
/// has heard.
pub(crate) struct View {
    settings: ViewSettings,
    peers: HashMap<SocketAddr, Instant>,
    rng: SmallRng,
    rounds: u32,
}

impl View {
    pub(crate) fn new(settings: ViewSettings) -> View {
        View {
            settings,
            peers: HashMap::new(),
            rng: SmallRng::from_rng(&mut rand::rng()),
            rounds: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    pub(crate) fn addrs(&self) -> Vec<SocketAddr> {
        self.peers.keys().copied().collect()
    }

    /// Keeps what `cards` say that is fresher than what this view holds, never `own`.
    pub(crate) fn merge(&mut self, cards: &[PeerCard], own: SocketAddr, now: Instant) {
        for card in cards.iter().take(MAX_CARDS) {
            if card.addr == own || card.age() > self.settings.ttl {
                continue;
            }
            let heard = now.checked_sub(card.age()).unwrap_or(now);
            if let Some(held) = self.peers.get_mut(&card.addr) {
                *held = (*held).max(heard);
                continue;
            }
            if self.peers.len() >= self.settings.capacity {
                // Full: a fresher card takes the stalest one's place.
                let Some((&stalest, &at)) = self.peers.iter().min_by_key(|(_, at)| **at) else {
                    continue;
                };
                if at >= heard {
                    continue;
                }
                self.peers.remove(&stalest);
            }
            self.peers.insert(card.addr, heard);
        }
    }

    /// Forgets edges not vouched for within the ttl.
    pub(crate) fn expire(&mut self, now: Instant) {
        let ttl = self.settings.ttl;
        self.peers
            .retain(|_, heard| now.saturating_duration_since(*heard) <= ttl);
    }

    /// The cards of a message: `own` (an edge's own address) first, then a sample of the view.
    pub(crate) fn cards(&mut self, own: Option<SocketAddr>, now: Instant) -> Vec<PeerCard> {
        let wanted = self.settings.cards.min(MAX_CARDS);
        let mut cards: Vec<PeerCard> = own
            .map(|addr| PeerCard { addr, age_ds: 0 })
            .into_iter()
            .collect();
        let room = wanted.saturating_sub(cards.len());
        let sample = self.peers.iter().sample(&mut self.rng, room);
        cards.extend(sample.into_iter().map(|(&addr, &heard)| {
            let tenths = now.saturating_duration_since(heard).as_millis() / 100;
            PeerCard {
                addr,
                age_ds: u16::try_from(tenths).unwrap_or(u16::MAX),
            }
        }));
        cards
    }

    /// `count` edges to gossip with this round.
    pub(crate) fn targets(&mut self, count: usize) -> Vec<SocketAddr> {
        self.peers
            .keys()
            .copied()
            .sample(&mut self.rng, count)
    }

    /// Whether this round is an edge's turn to gossip with a core member.
    pub(crate) fn core_turn(&mut self) -> bool {
        self.rounds = self.rounds.wrapping_add(1);
        self.rounds % self.settings.core_every.max(1) == 0
    }
}
