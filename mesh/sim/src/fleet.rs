//! A fleet of real mesh nodes (`mesh::start_on`: chitchat, the sealed transport, its
//! fragmentation and reassembly) on one [`SimNet`], spread round-robin over the 13 regions,
//! seeded by the first three. Every node hears every `sim/` key change as it lands, stamped
//! with simulated time.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chitchat::{ChitchatHandle, ChitchatId, ListenerHandle};
use mesh::{MeshNode, MeshSettings, NodeIdentity, Role, SendFormat};
use tokio::time::Instant;

use crate::net::SimNet;
use crate::regions;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/// The prefix of the keys a trial sets.
pub const PREFIX: &str = "sim/";

/// The address of node `i`: inside 127.0.0.0/8, though no packet ever leaves the process.
pub fn addr(i: usize) -> SocketAddr {
    let i = u32::try_from(i).unwrap_or(u32::MAX);
    SocketAddr::from(([127, 10 + (i >> 16) as u8, (i >> 8) as u8, i as u8], 7946))
}

/// Arrivals of `sim/` values: value -> when each node got it.
pub type Arrivals = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// One running node.
pub struct Member {
    pub node: MeshNode,
    _listener: ListenerHandle,
}

/// A fleet's gossip interval, bound, nodes listing every member, and core size.
type FleetSettings = (Duration, Option<usize>, BTreeSet<usize>, usize);

/// The fleet.
pub struct Fleet {
    pub net: SimNet,
    pub members: Vec<Option<Member>>,
    pub arrivals: Arrivals,
    gossip_interval: Duration,
    max_datagram: Option<usize>,
    /// Nodes that list every member in their digests whatever `max_datagram` says.
    full_digests: BTreeSet<usize>,
    /// Nodes `0..core` are core members; the rest are edges (`vendor/chitchat/src/tier.rs`).
    core: usize,
}

impl Fleet {
    /// Starts `n` nodes gossiping every `gossip_interval`, with bounded gossip when
    /// `max_datagram` is given (`MeshSettings::max_datagram`).
    pub async fn start(
        net: SimNet,
        n: usize,
        gossip_interval: Duration,
        max_datagram: Option<usize>,
    ) -> anyhow::Result<Fleet> {
        Fleet::start_mixed(net, n, gossip_interval, max_datagram, BTreeSet::new()).await
    }

    /// As [`Fleet::start`], the nodes in `full_digests` listing every member in their digests
    /// (a mesh half way through turning bounded gossip on).
    pub async fn start_mixed(
        net: SimNet,
        n: usize,
        gossip_interval: Duration,
        max_datagram: Option<usize>,
        full_digests: BTreeSet<usize>,
    ) -> anyhow::Result<Fleet> {
        let settings = (gossip_interval, max_datagram, full_digests, n);
        Fleet::start_all(net, n, settings).await
    }

    /// As [`Fleet::start`], nodes `0..core` core members (probers and aggregators that
    /// decide) and the rest edges (PoPs that hold the core's state only).
    pub async fn start_tiered(
        net: SimNet,
        n: usize,
        core: usize,
        gossip_interval: Duration,
        max_datagram: Option<usize>,
    ) -> anyhow::Result<Fleet> {
        let core = core.clamp(1, n.max(1));
        let settings = (gossip_interval, max_datagram, BTreeSet::new(), core);
        Fleet::start_all(net, n, settings).await
    }

    /// Starts `n` nodes with these settings: the gossip interval, the bound, the nodes that
    /// list every member, and how many are core.
    async fn start_all(
        net: SimNet,
        n: usize,
        (gossip_interval, max_datagram, full_digests, core): FleetSettings,
    ) -> anyhow::Result<Fleet> {
        let mut fleet = Fleet {
            net,
            members: Vec::with_capacity(n),
            arrivals: Arc::default(),
            gossip_interval,
            max_datagram,
            full_digests,
            core,
        };
        // Nodes start spread over one gossip interval, as processes started at different
        // moments are: started at one simulated instant, every node would tick at once and a
        // change would travel in lock-step rounds.
        let spacing = gossip_interval / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        for i in 0..n {
            fleet.net.place(addr(i), i % 13);
            let member = fleet.start_member(i).await?;
            fleet.members.push(Some(member));
            tokio::time::sleep(spacing).await;
        }
        Ok(fleet)
    }

    async fn start_member(&self, i: usize) -> anyhow::Result<Member> {
        let identity = NodeIdentity {
            node_id: format!("n{i}"),
            role: Role::Prober,
            region: regions::CODES[i % 13].to_string(),
            datacenter: format!("dc{}", i / 13 % 3),
            config_hash: String::new(),
            config_loaded_at: 0,
        };
        let settings = MeshSettings {
            cluster_id: "sim".into(),
            listen: addr(i),
            advertise: None,
            aliases: Vec::new(),
            send_format: SendFormat::Bound,
            seeds: (0..3.min(self.members.len().max(1)))
                .filter(|&s| s != i)
                .map(|s| addr(s).to_string())
                .collect(),
            gossip_interval: self.gossip_interval,
            keys: mesh::KeyRing::new(KEY, None)?,
            dead_node_grace: mesh::DEAD_NODE_GRACE,
            max_datagram: if self.full_digests.contains(&i) {
                None
            } else {
                self.max_datagram
            },
            tier: if i < self.core {
                mesh::Tier::Core
            } else {
                mesh::Tier::Edge
            },
        };
        let node = mesh::start_on(&identity, &settings, Arc::new(self.net.clone())).await?;
        let arrivals = Arc::clone(&self.arrivals);
        let listener = node
            .handle
            .chitchat()
            .lock()
            .await
            .subscribe_event(PREFIX, move |event| {
                let at = Instant::now();
                if let Ok(mut a) = arrivals.lock() {
                    a.entry(event.value.to_string()).or_default().push(at);
                }
            });
        Ok(Member {
            node,
            _listener: listener,
        })
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// How many nodes are core members (`0..core`); the rest are edges.
    pub fn core(&self) -> usize {
        self.core
    }

    pub fn handle(&self, i: usize) -> Option<&ChitchatHandle> {
        self.members.get(i)?.as_ref().map(|m| &m.node.handle)
    }

    /// How many running nodes hold every other running core member live (in a fleet with no
    /// edges, every other running node).
    pub async fn fully_live(&self) -> usize {
        let running_core = self.members[..self.core.min(self.len())]
            .iter()
            .filter(|m| m.is_some())
            .count();
        let mut n = 0;
        for (i, m) in self.members.iter().enumerate() {
            let Some(m) = m else { continue };
            // live_nodes counts this node itself.
            let others_live = m.node.handle.chitchat().lock().await.live_nodes().count() - 1;
            if others_live + usize::from(i < self.core) >= running_core {
                n += 1;
            }
        }
        n
    }

    /// The mean number of edges in a running node's view, and the smallest.
    pub async fn views(&self) -> (f64, usize) {
        let mut sum = 0;
        let mut least = usize::MAX;
        let mut count = 0;
        for m in self.members.iter().flatten() {
            let len = m.node.handle.chitchat().lock().await.view().len();
            sum += len;
            least = least.min(len);
            count += 1;
        }
        (sum as f64 / count.max(1) as f64, least)
    }

    /// How many member states the running nodes hold in all.
    pub async fn held_states(&self) -> usize {
        let mut n = 0;
        for m in self.members.iter().flatten() {
            n += m.node.handle.chitchat().lock().await.node_states().len();
        }
        n
    }

    /// Waits (at most `within`) until every running node holds every other running core
    /// member live.
    pub async fn wait_converged(&self, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        let running = self.members.iter().filter(|m| m.is_some()).count();
        let mut reported = Duration::ZERO;
        while start.elapsed() < within {
            let live = self.fully_live().await;
            if live == running {
                return Some(start.elapsed());
            }
            if start.elapsed() >= reported + Duration::from_secs(10) {
                reported = start.elapsed();
                eprintln!("{reported:?}: {live} of {running} nodes hold every other live");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// Sets `sim/<name>` = `value` on node `i`.
    pub async fn publish(&self, i: usize, name: &str, value: &str) {
        if let Some(h) = self.handle(i) {
            h.chitchat()
                .lock()
                .await
                .self_node_state()
                .set(format!("{PREFIX}{name}"), value);
        }
    }

    /// Nodes `0..probers` advance a `progress` key every `every`, spread over the interval, as
    /// probers do once per probe round (`prober/src/publisher.rs`): the background of changes
    /// a health change competes with for rumour room. Stops when the handle is aborted.
    pub fn start_progress(&self, probers: usize, every: Duration) -> tokio::task::JoinHandle<()> {
        let nodes: Vec<_> = (0..probers.min(self.len()))
            .filter_map(|i| self.handle(i).map(ChitchatHandle::chitchat))
            .collect();
        let spacing = every / u32::try_from(nodes.len().max(1)).unwrap_or(u32::MAX);
        tokio::spawn(async move {
            let mut round = 0u64;
            loop {
                round += 1;
                for node in &nodes {
                    node.lock()
                        .await
                        .self_node_state()
                        .set("progress", round.to_string());
                    tokio::time::sleep(spacing).await;
                }
                if nodes.is_empty() {
                    tokio::time::sleep(every).await;
                }
            }
        })
    }

    /// Each running node's set of members it holds dead, by node index.
    pub async fn dead_sets(&self) -> Vec<(usize, BTreeSet<ChitchatId>)> {
        let mut out = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            if let Some(m) = m {
                let c = m.node.handle.chitchat();
                let c = c.lock().await;
                out.push((i, c.dead_nodes().cloned().collect()));
            }
        }
        out
    }

    /// Stops node `i` (its socket unbinds: a killed process).
    pub async fn kill(&mut self, i: usize) -> Option<ChitchatId> {
        let member = self.members.get_mut(i)?.take()?;
        let id = member.node.handle.chitchat_id().clone();
        let _ = member.node.handle.shutdown().await;
        Some(id)
    }

    /// Starts node `i` again: a new generation of it.
    pub async fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.kill(i).await;
        // A generation is the wall clock in ms (`mesh/src/node.rs`): start the new one in a
        // later millisecond than the old one, so they differ.
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        };
        let killed_at = now_ms();
        while now_ms() == killed_at {
            std::hint::spin_loop();
        }
        let member = self.start_member(i).await?;
        self.members[i] = Some(member);
        Ok(())
    }

    /// Gossip bytes and datagrams sent by every running node, and the largest datagram.
    pub fn sent(&self) -> (u64, u64, u64) {
        self.sent_by(0..self.len())
    }

    /// As [`Fleet::sent`], by the running nodes of `range` only.
    pub fn sent_by(&self, range: std::ops::Range<usize>) -> (u64, u64, u64) {
        let mut bytes = 0;
        let mut datagrams = 0;
        let mut largest = 0;
        for m in self.members[range.start.min(self.len())..range.end.min(self.len())]
            .iter()
            .flatten()
        {
            let s = &m.node.stats;
            bytes += s.bytes_sent.load(Ordering::Relaxed);
            datagrams += s.datagrams_sent.load(Ordering::Relaxed);
            largest = largest.max(s.max_datagram.load(Ordering::Relaxed));
        }
        (bytes, datagrams, largest)
    }
}
