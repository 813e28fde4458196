//! Starting a mesh member: a chitchat node on the sealed transport, tagged with its role,
//! region, datacenter, version and config hash.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chitchat::{
    spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig,
    ProtocolVersion, Tier, ViewSettings,
};

use super::keys;
use super::recipient::{Recipient, SendFormat};
use super::role::Role;
use super::seal::KeyRing;
use super::transport::{DatagramNet, SealedTransport, TransportStats, Udp};

/// What a node says about itself.
#[derive(Debug, Clone)]
pub struct NodeIdentity {
    /// Unique in the cluster (`prober-weu-ams-1`).
    pub node_id: String,
    pub role: Role,
    pub region: String,
    pub datacenter: String,
    pub config_hash: String,
    /// When the node loaded that config (unix seconds).
    pub config_loaded_at: u64,
}

/// Cluster settings.
#[derive(Debug, Clone)]
pub struct MeshSettings {
    pub cluster_id: String,
    pub listen: SocketAddr,
    /// Address peers reach this node at (defaults to `listen`).
    pub advertise: Option<SocketAddr>,
    /// Other addresses peers may send to this node at (a seed behind a NAT or a load
    /// balancer): datagrams bound to them are this node's too (`recipient.rs`).
    pub aliases: Vec<SocketAddr>,
    /// The formats this node sends (`SendFormat::Unbound` only for a rolling upgrade).
    pub send_format: SendFormat,
    pub seeds: Vec<String>,
    /// 100–200 ms keeps a change's p99 to every node of 39 under 0.5 s (docs/design.md#gossip-keys).
    pub gossip_interval: Duration,
    pub keys: KeyRing,
    /// How long a dead member's state is kept ([`DEAD_NODE_GRACE`] in production).
    pub dead_node_grace: Duration,
    /// Bounded gossip: no datagram over this many bytes, whatever the cluster's size
    /// (`vendor/chitchat/src/bounded.rs`, protocol version 2, which releases before it cannot
    /// read). `None`: every digest lists every member (protocol version 0).
    pub max_datagram: Option<usize>,
    /// An edge holds the core's state and no other edge's, and sends none of its own
    /// (`vendor/chitchat/src/tier.rs`): a PoP in a mesh of thousands. Needs bounded gossip.
    pub tier: Tier,
}

/// The smallest `max_datagram` bounded gossip takes: a digest entry, a delta's minimum and the
/// seal's frame must fit.
pub const MIN_MAX_DATAGRAM: usize = 576;

/// A datagram of bounded gossip fits a 1,500-byte Ethernet MTU behind an IPv6 header and a
/// tunnel's overhead, as memberlist's default UDP buffer (1,400 B) does.
pub const DEFAULT_MAX_DATAGRAM: usize = 1_400;

/// A dead member (a killed prober's old generation) is no longer gossiped after half of this
/// and forgotten after all of it. chitchat's default is a day: every restart of a prober would
/// leave its old generation's whole state in every gossip digest for twelve hours, and a
/// prober in a crash loop would grow the cluster state without bound. Ten minutes still
/// outlasts any failure detection and lets a partitioned region come back as itself.
pub const DEAD_NODE_GRACE: Duration = Duration::from_secs(600);

/// A running member.
pub struct MeshNode {
    pub handle: ChitchatHandle,
    pub stats: Arc<TransportStats>,
}

/// A node that could not start: its gossip socket, most often (an address in use).
#[derive(Debug, thiserror::Error)]
#[error("gossip on {listen}: {reason}")]
pub struct StartError {
    pub listen: SocketAddr,
    /// chitchat's words, with their causes.
    pub reason: String,
}

/// Starts a member gossiping over UDP.
pub async fn start(
    identity: &NodeIdentity,
    settings: &MeshSettings,
) -> Result<MeshNode, StartError> {
    start_on(identity, settings, Arc::new(Udp)).await
}

/// Starts a member whose sealed datagrams travel over `net` (UDP, or a simulated network).
pub async fn start_on(
    identity: &NodeIdentity,
    settings: &MeshSettings,
    net: Arc<dyn DatagramNet>,
) -> Result<MeshNode, StartError> {
    if settings.tier == Tier::Edge && settings.max_datagram.is_none() {
        return Err(StartError {
            listen: settings.listen,
            reason: "an edge needs bounded gossip (a --gossip-max-datagram above 0)".into(),
        });
    }
    let transport = SealedTransport::new(
        settings.keys.clone(),
        settings.cluster_id.clone(),
        Recipient::new(settings.listen, settings.advertise, &settings.aliases),
        settings.send_format,
    )
    .over(net)
    .within(settings.max_datagram.map(|max| max.max(MIN_MAX_DATAGRAM)));
    let stats = transport.stats();
    let advertise = settings.advertise.unwrap_or(settings.listen);
    // A restarted node is a new generation, so peers do not mistake it for its old self.
    let generation = lb_core::clock::unix_ms();
    // The seal's frame around one whole message (`seal.rs`): the frame header, the nonce,
    // timestamp and tag, and the recipient's address.
    // A message past one datagram is cut into several, each sealed and at most `max` bytes
    // (`SealedTransport::within`): a delta for a peer that is far behind may take up to
    // `BULK_FRAGMENTS` of them, so a joining node fetches a large state in bulk.
    let bounded = settings.max_datagram.map(|max| {
        let max_message = max
            .max(MIN_MAX_DATAGRAM)
            .saturating_sub(super::seal::FRAME_HEADER + super::seal::SEAL_OVERHEAD)
            .saturating_sub(super::seal::ADDRESS);
        chitchat::BoundedGossip {
            max_message,
            max_bulk_message: max_message * super::seal::BULK_FRAGMENTS,
            ..chitchat::BoundedGossip::default()
        }
    });
    let config = ChitchatConfig {
        chitchat_id: ChitchatId::new(identity.node_id.clone(), generation, advertise),
        cluster_id: settings.cluster_id.clone(),
        gossip_interval: settings.gossip_interval,
        listen_addr: settings.listen,
        seed_nodes: settings.seeds.clone(),
        // The failure detector starts from the gossip interval: a dead node is seen dead after
        // about 6.5 intervals instead of ~12 with chitchat's 5 s default.
        // With bounded digests a member's heartbeat reaches a node only when some digest lists
        // it, every few rounds at 1,000 members and every few seconds at 10,000, so intervals
        // up to a minute are samples, not outliers (chitchat drops intervals above
        // `max_interval`, which would leave the mean too short and the member flapping).
        failure_detector_config: FailureDetectorConfig {
            initial_interval: settings.gossip_interval,
            dead_node_grace_period: settings.dead_node_grace,
            max_interval: if bounded.is_some() {
                Duration::from_secs(60)
            } else {
                FailureDetectorConfig::default().max_interval
            },
            // chitchat keeps this many intervals (f64s) per member: 1,000 is 8 KB per member,
            // 80 MB per node at 10,000 members. 100 estimates the mean within ~10 %.
            sampling_window_size: if bounded.is_some() {
                100
            } else {
                FailureDetectorConfig::default().sampling_window_size
            },
            ..FailureDetectorConfig::default()
        },
        marked_for_deletion_grace_period: Duration::from_secs(3600),
        catchup_callback: None,
        extra_liveness_predicate: None,
        protocol_version: if bounded.is_some() {
            ProtocolVersion::V2
        } else {
            ProtocolVersion::V0
        },
        bounded,
        tier: settings.tier,
        view: ViewSettings::default(),
    };
    let tags = vec![
        (keys::ROLE.to_string(), identity.role.to_string()),
        (keys::REGION.to_string(), identity.region.clone()),
        (keys::DATACENTER.to_string(), identity.datacenter.clone()),
        (
            keys::VERSION.to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        (keys::CONFIG_HASH.to_string(), identity.config_hash.clone()),
        (
            keys::CONFIG_LOADED_AT.to_string(),
            identity.config_loaded_at.to_string(),
        ),
    ];
    let handle = spawn_chitchat(config, tags, &transport)
        .await
        .map_err(|e| StartError {
            listen: settings.listen,
            reason: format!("{e:#}"),
        })?;
    Ok(MeshNode { handle, stats })
}

/// A short, stable fingerprint of a config file's bytes, to flag drift between nodes.
pub fn config_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}
