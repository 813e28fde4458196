use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rand::prelude::*;
use rand::rng;
use tokio::net::lookup_host;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tokio::time;
use tracing::{debug, warn};

use crate::message::ChitchatEnvelope;
use crate::transport::{RecvOutcome, Socket, Transport};
use crate::{Chitchat, ChitchatConfig, ChitchatId};

/// Number of nodes picked for random gossip.
const GOSSIP_COUNT: usize = 3;

/// UDP Chitchat server handler.
///
/// It is necessary to hold (and not drop) the handler
/// for the server to keep running.
pub struct ChitchatHandle {
    chitchat_id: ChitchatId,
    command_tx: UnboundedSender<Command>,
    chitchat: Arc<Mutex<Chitchat>>,
    join_handle: JoinHandle<Result<(), anyhow::Error>>,
    termination_watcher: watch::Receiver<Option<Result<(), String>>>,
}

impl ChitchatHandle {
    pub fn abort(&self) {
        self.join_handle.abort();
    }
}

const DNS_POLLING_DURATION: Duration = Duration::from_secs(60);

async fn dns_refresh_loop(
    seed_hosts_requiring_dns: HashSet<String>,
    seed_addrs_not_requiring_resolution: HashSet<SocketAddr>,
    seed_addrs_tx: watch::Sender<HashSet<SocketAddr>>,
) {
    let mut interval = time::interval(DNS_POLLING_DURATION);
    // The first `interval.tick()` is no-op but we DO NOT want to resolve the seed hosts right away
    // (see comment in `spawn_dns_refresh_loop`), hence this tick.
    interval.tick().await;

    loop {
        interval.tick().await;

        let mut seed_addrs = seed_addrs_not_requiring_resolution.clone();
        for seed_host in &seed_hosts_requiring_dns {
            resolve_seed_host(seed_host, &mut seed_addrs).await;
        }
        if seed_addrs_tx.send(seed_addrs).is_err() {
            return;
        }
    }
}

async fn resolve_seed_host(seed_host: &str, seed_addrs: &mut HashSet<SocketAddr>) {
    match lookup_host(seed_host).await {
        Ok(resolved_seed_addrs) => {
            for seed_addr in resolved_seed_addrs {
                if seed_addrs.insert(seed_addr) {
                    debug!(seed_host=%seed_host, seed_addr=%seed_addr, "resolved peer seed host");
                }
            }
        }
        Err(error) => {
            warn!(seed_host=%seed_host, error=?error, "failed to lookup host");
        }
    };
}

// A seed node address can be a string representing a IP address or a hostname with a port.
//
// The latter is especially important when relying on
// a headless service in k8s or when using DNS in general.
//
// In that case, we do not want to perform the resolution
// once and for all.
// We want to periodically retry DNS resolution,
// in order to avoid having a split cluster.
//
// The newcomers are supposed to chime in too,
// so there is no need to refresh it too often,
// especially if it is not empty.
async fn spawn_dns_refresh_loop(seeds: &[String]) -> watch::Receiver<HashSet<SocketAddr>> {
    let mut seed_addrs_not_requiring_resolution: HashSet<SocketAddr> = Default::default();
    let mut first_round_seed_resolution: HashSet<SocketAddr> = Default::default();
    let mut seed_requiring_dns: HashSet<String> = Default::default();
    for seed in seeds {
        if let Ok(seed_addr) = seed.parse() {
            seed_addrs_not_requiring_resolution.insert(seed_addr);
        } else {
            seed_requiring_dns.insert(seed.clone());
            // We run DNS resolution for the first iteration too.
            // It will be run in the DNS polling loop too, but running
            // it for the first iteration makes sure our first gossip
            // round will not be for nothing.
            resolve_seed_host(seed, &mut first_round_seed_resolution).await;
        }
    }

    let initial_seed_addrs: HashSet<SocketAddr> = seed_addrs_not_requiring_resolution
        .union(&first_round_seed_resolution)
        .cloned()
        .collect();

    let (seed_addrs_tx, seed_addrs_rx) = watch::channel(initial_seed_addrs);
    if !seed_requiring_dns.is_empty() {
        tokio::task::spawn(dns_refresh_loop(
            seed_requiring_dns,
            seed_addrs_not_requiring_resolution,
            seed_addrs_tx,
        ));
    }
    seed_addrs_rx
}

/// Launches a new Chitchat server.
///
/// This will start the server as a new Tokio background task.
pub async fn spawn_chitchat(
    config: ChitchatConfig,
    initial_key_values: Vec<(String, String)>,
    transport: &dyn Transport,
) -> anyhow::Result<ChitchatHandle> {
    let (command_tx, command_rx) = mpsc::unbounded_channel();

    let seed_addrs: watch::Receiver<HashSet<SocketAddr>> =
        spawn_dns_refresh_loop(&config.seed_nodes).await;

    let socket = transport.open(config.listen_addr).await?;
    let chitchat_id = config.chitchat_id.clone();

    let chitchat = Chitchat::with_chitchat_id_and_seeds(config, seed_addrs, initial_key_values);
    let chitchat_arc = Arc::new(Mutex::new(chitchat));
    let chitchat_arc_clone = chitchat_arc.clone();

    let (termination_watcher_sender, termination_watcher) = watch::channel(None);
    let join_handle = tokio::spawn(async move {
        let result = Server::new(command_rx, chitchat_arc_clone, socket)
            .await
            .run()
            .await;
        let cloned_result = result.as_ref().map(|_| ()).map_err(|err| err.to_string());
        let _ = termination_watcher_sender.send(Some(cloned_result));
        result
    });

    Ok(ChitchatHandle {
        chitchat_id,
        command_tx,
        chitchat: chitchat_arc,
        join_handle,
        termination_watcher,
    })
}

impl ChitchatHandle {
    pub fn chitchat_id(&self) -> &ChitchatId {
        &self.chitchat_id
    }

    pub fn chitchat(&self) -> Arc<Mutex<Chitchat>> {
        self.chitchat.clone()
    }

    /// Calls a function with mutable access to the [`Chitchat`].
    pub async fn with_chitchat<F, T>(&self, mut fun: F) -> T
    where F: FnMut(&mut Chitchat) -> T {
        let mut chitchat = self.chitchat.lock().await;
        fun(&mut chitchat)
    }

    pub fn initiate_shutdown(&self) -> Result<(), anyhow::Error> {
        self.command_tx.send(Command::Shutdown).map_err(|_| {
            anyhow::anyhow!("Failed to initiate Chitchat shutdown, command channel already closed")
        })
    }

    /// Shuts the server down and waits for it to finish.
    pub async fn shutdown(self) -> Result<(), anyhow::Error> {
        let _ = self.initiate_shutdown();
        self.join_handle.await?
    }

    /// Performs a Chitchat "handshake" with another UDP server.
    pub fn gossip(&self, addr: SocketAddr) -> Result<(), anyhow::Error> {
        self.command_tx.send(Command::Gossip(addr))?;
        Ok(())
    }

    pub fn termination_watcher(&self) -> impl Future<Output = anyhow::Result<()>> + use<> {
        let mut watcher = self.termination_watcher.clone();
        async move {
            let termination_res = watcher.wait_for(|res| res.is_some()).await;
            if let Ok(result_opt) = termination_res {
                result_opt.clone().unwrap().map_err(anyhow::Error::msg)
            } else {
                // If the channel was closed without the exit status being sent,
                // we assume the server panicked.
                Err(anyhow::anyhow!("Chitchat server panicked"))
            }
        }
    }
}

/// UDP server for Chitchat communication.
struct Server {
    command_rx: UnboundedReceiver<Command>,
    chitchat: Arc<Mutex<Chitchat>>,
    transport: Box<dyn Socket>,
    rng: SmallRng,
}

impl Server {
    async fn new(
        command_rx: UnboundedReceiver<Command>,
        chitchat: Arc<Mutex<Chitchat>>,
        transport: Box<dyn Socket>,
    ) -> Self {
        let rng = SmallRng::from_rng(&mut rng());
        Self {
            chitchat,
            command_rx,
            transport,
            rng,
        }
    }

    /// Listen for new Chitchat envelopes.
    async fn run(&mut self) -> anyhow::Result<()> {
        let gossip_interval = self.chitchat.lock().await.config.gossip_interval;
        let mut gossip_interval = time::interval(gossip_interval);
        loop {
            tokio::select! {
                result = self.transport.recv() => match result {
                    Ok(RecvOutcome { from_addr, envelope, .. }) => {
                        let _ = self.handle_envelope(from_addr, envelope).await;
                    }
                    // Transient errors (e.g. ENOBUFS) are swallowed inside
                    // Socket::recv. An error here means the socket is broken.
                    Err(err) => {
                        warn!(err=%err, "fatal UDP recv error, stopping gossip loop");
                        return Err(err);
                    }
                },
                _ = gossip_interval.tick() => {
                    self.gossip_multiple().await
                },
                command = self.command_rx.recv() => match command {
                    Some(Command::Gossip(addr)) => {
                        let _ = self.gossip(addr).await;
                    },
                    Some(Command::Shutdown) | None => break,
                }
            }
        }
        Ok(())
    }

    /// Processes a single UDP datagram.
    async fn handle_envelope(
        &mut self,
        from_addr: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> anyhow::Result<()> {
        let version = envelope.version;
        // Handle gossip message from other servers.
        // meshlb patch: the sender's cards are kept, and the reply carries this node's
        // (`src/tier.rs`), with room left for them.
        let (response, peers) = {
            let mut chitchat = self.chitchat.lock().await;
            chitchat.note_cards(&envelope.peers);
            let peers = chitchat.cards();
            let reserved = crate::tier::cards_len(&peers);
            (chitchat.process_message(envelope.message, reserved), peers)
        };
        // Send the reply, if any, echoing the version the peer used: having
        // decoded its message we know it supports that format, so the reply is
        // guaranteed to be decodable on its end.
        if let Some(message) = response {
            self.transport
                .send(
                    from_addr,
                    ChitchatEnvelope {
                        version,
                        message,
                        peers,
                    },
                )
                .await?;
        }
        Ok(())
    }

    /// Gossip to multiple randomly chosen nodes.
    async fn gossip_multiple(&mut self) {
        // Gossip with live nodes & probabilistically include a random dead node
        let mut chitchat_guard = self.chitchat.lock().await;
        // meshlb patch: lists, not sets: upstream hashed every member's address into two sets
        // every round, O(members) of hashing per round that a mesh of thousands feels. A
        // restarted node's two generations may share an address and be drawn twice; gossiping
        // twice with one address is harmless.
        let self_addr = chitchat_guard.self_chitchat_id().gossip_advertise_addr;
        let live_nodes = chitchat_guard
            .live_nodes()
            .map(|chitchat_id| chitchat_id.gossip_advertise_addr)
            .filter(|addr| *addr != self_addr)
            .collect::<Vec<_>>();
        let peer_nodes = if live_nodes.is_empty() {
            chitchat_guard
                .cluster_state()
                .nodes()
                .map(|chitchat_id| chitchat_id.gossip_advertise_addr)
                .filter(|addr| *addr != self_addr)
                .collect::<Vec<_>>()
        } else {
            Vec::new()
        };
        let dead_nodes = chitchat_guard
            .dead_nodes()
            .map(|chitchat_id| chitchat_id.gossip_advertise_addr)
            .collect::<Vec<_>>();
        let seed_nodes: HashSet<SocketAddr> = chitchat_guard
            .seed_nodes()
            .into_iter()
            .filter(|addr| *addr != chitchat_guard.self_chitchat_id().gossip_advertise_addr)
            .collect();
        let (selected_nodes, mut random_dead_node_opt, mut random_seed_node_opt) =
            select_nodes_for_gossip(&mut self.rng, peer_nodes, live_nodes, dead_nodes, seed_nodes);
        // meshlb patch: tiers (`src/tier.rs`).
        let (selected_nodes, among_edges) =
            chitchat_guard.tier_targets(selected_nodes, GOSSIP_COUNT);
        if among_edges {
            random_dead_node_opt = None;
            random_seed_node_opt = None;
        }

        chitchat_guard.update_self_heartbeat();
        chitchat_guard.gc_keys_marked_for_deletion();

        // Drop lock to prevent deadlock in [`UdpSocket::gossip`].
        drop(chitchat_guard);

        for node in selected_nodes {
            if let Err(error) = self.gossip(node).await {
                warn!(error=?error, node_address=%node, "Failed to gossip with live node.");
            }
        }
        if let Some(random_dead_node) = random_dead_node_opt {
            if let Err(error) = self.gossip(random_dead_node).await {
                debug!(error=?error, node_address=%random_dead_node, "Failed to gossip with dead node.");
            }
        }
        if let Some(random_seed_node) = random_seed_node_opt {
            if let Err(error) = self.gossip(random_seed_node).await {
                warn!(error=?error, node_address=%random_seed_node, "Failed to gossip with seed node.");
            }
        }
        // Update nodes liveness.
        let mut chitchat_guard = self.chitchat.lock().await;
        chitchat_guard.update_nodes_liveness();
    }

    /// Gossips with another peer.
    async fn gossip(&mut self, addr: SocketAddr) -> anyhow::Result<()> {
        let syn = {
            let mut chitchat = self.chitchat.lock().await;
            let peers = chitchat.cards();
            let reserved = crate::tier::cards_len(&peers);
            ChitchatEnvelope {
                version: chitchat.config.protocol_version,
                message: chitchat.create_syn_message(reserved),
                peers,
            }
        };
        self.transport.send(addr, syn).await?;
        Ok(())
    }
}

#[derive(Debug)]
enum Command {
    Gossip(SocketAddr),
    Shutdown,
}

fn select_nodes_for_gossip<R>(
    rng: &mut R,
    peer_nodes: Vec<SocketAddr>,
    live_nodes: Vec<SocketAddr>,
    dead_nodes: Vec<SocketAddr>,
    seed_nodes: HashSet<SocketAddr>,
) -> (Vec<SocketAddr>, Option<SocketAddr>, Option<SocketAddr>)
where
    R: Rng + ?Sized,
{
    let live_nodes_count = live_nodes.len();
    let dead_nodes_count = dead_nodes.len();

    // Select `GOSSIP_COUNT` number of live nodes.
    // On startup, select from cluster nodes since we don't know any live node yet.
    let nodes = if live_nodes_count == 0 {
        peer_nodes
    } else {
        live_nodes
    }
    .iter()
    .cloned()
    .sample(rng, GOSSIP_COUNT);

    let mut has_gossiped_with_a_seed_node = false;
    for chitchat_id in &nodes {
        if seed_nodes.contains(chitchat_id) {
            has_gossiped_with_a_seed_node = true;
            break;
        }
    }

    // Select a dead node for potential gossip.
    let random_dead_node_opt: Option<SocketAddr> =
        select_dead_node_to_gossip_with(rng, &dead_nodes, live_nodes_count, dead_nodes_count);

    // Select a seed node for potential gossip.
    // It prevents network partition caused by the number of seeds.
    // See https://issues.apache.org/jira/browse/CASSANDRA-150
    let random_seed_node_opt: Option<SocketAddr> =
        if !has_gossiped_with_a_seed_node || live_nodes_count < seed_nodes.len() {
            select_seed_node_to_gossip_with(rng, &seed_nodes, live_nodes_count, dead_nodes_count)
        } else {
            None
        };

    (nodes, random_dead_node_opt, random_seed_node_opt)
}

/// Selects a dead node to gossip with, with some probability.
fn select_dead_node_to_gossip_with<R>(
    rng: &mut R,
    dead_nodes: &[SocketAddr],
    live_nodes_count: usize,
    dead_nodes_count: usize,
) -> Option<SocketAddr>
where
    R: Rng + ?Sized,
{
    let selection_probability = dead_nodes_count as f64 / (live_nodes_count + 1) as f64;
    if selection_probability > rng.random::<f64>() {
        return dead_nodes.iter().choose(rng).cloned();
    }
    None
}

/// Selects a seed node to gossip with, with some probability.
fn select_seed_node_to_gossip_with<R>(
    rng: &mut R,
    seed_nodes: &HashSet<SocketAddr>,
    live_nodes_count: usize,
    dead_nodes_count: usize,
) -> Option<SocketAddr>
where
    R: Rng + ?Sized,
{
    let selection_probability =
        seed_nodes.len() as f64 / (live_nodes_count + dead_nodes_count) as f64;
    if live_nodes_count == 0 || rng.random::<f64>() <= selection_probability {
        return seed_nodes.iter().choose(rng).cloned();
    }
    None
}
