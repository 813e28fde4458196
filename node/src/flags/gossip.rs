//! Command-line settings every mesh member shares: cluster, key, addresses, seeds.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mesh::{KeyRing, MeshSettings};

use super::FlagError;

#[derive(Debug, Clone, clap::Args)]
pub struct MeshArgs {
    /// UDP address to gossip on.
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Address peers reach this node at, when it differs from --listen (NAT, containers).
    #[arg(long, value_name = "ADDR")]
    pub advertise: Option<SocketAddr>,
    /// Another address peers may send to this node at (repeatable): a seed address behind a
    /// NAT or a load balancer. Gossip datagrams are bound to the address they were sent to,
    /// and a node opens only those bound to --listen, --advertise or an alias.
    #[arg(long = "advertise-alias", value_name = "ADDR")]
    pub aliases: Vec<SocketAddr>,
    /// Send gossip datagrams unbound to their recipient, as versions before recipient
    /// binding do and read: only while a mesh is upgraded from such a version.
    #[arg(long)]
    pub seal_unbound: bool,
    /// A member to join through (repeatable; host:port).
    #[arg(long = "seed", value_name = "ADDR")]
    pub seeds: Vec<String>,
    /// Cluster id: nodes of another cluster are never mixed in.
    #[arg(long, default_value = "meshlb")]
    pub cluster_id: String,
    /// File holding the cluster key (64 hex digits, or a passphrase of 16+ characters);
    /// else the MESHLB_GOSSIP_KEY environment variable.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// The previous key during a rotation (still accepted, never used to seal); else
    /// MESHLB_GOSSIP_KEY_PREVIOUS.
    #[arg(long, value_name = "FILE")]
    pub previous_key_file: Option<PathBuf>,
    /// Gossip interval in milliseconds (100–200 for sub-second propagation on 39 nodes).
    #[arg(long, default_value_t = 150)]
    pub gossip_interval_ms: u64,
    /// Bounded gossip: no gossip datagram over BYTES (576..=65507; 1400 fits any path), a
    /// digest of some members per exchange and changes pushed as rumours, whatever the mesh's
    /// size. 0: every digest lists every member, as releases before bounded gossip did and
    /// alone read (docs/operations.md#gossip-at-fleet-size).
    #[arg(long, value_name = "BYTES", default_value_t = mesh::DEFAULT_MAX_DATAGRAM)]
    pub gossip_max_datagram: usize,
    /// This node's id (default: role-region-dc-port).
    #[arg(long)]
    pub node_id: Option<String>,
}

fn read_key(file: Option<&PathBuf>, env: &str) -> Result<Option<String>, FlagError> {
    match file {
        Some(f) => std::fs::read_to_string(f)
            .map(Some)
            .map_err(|error| FlagError::KeyFile {
                path: f.clone(),
                error,
            }),
        None => Ok(std::env::var(env).ok()),
    }
}

impl MeshArgs {
    /// The mesh's settings: the keys read, the interval and datagram size checked.
    pub fn settings(&self) -> Result<MeshSettings, FlagError> {
        let (current, previous) = self.key_texts()?;
        let keys = KeyRing::new(&current, previous.as_deref())?;
        if !(10..=10_000).contains(&self.gossip_interval_ms) {
            return Err(FlagError::OutOfRange {
                flag: "--gossip-interval-ms",
                range: "10..=10000".into(),
            });
        }
        let max_datagram = (self.gossip_max_datagram > 0).then_some(self.gossip_max_datagram);
        if let Some(max) = max_datagram {
            if !(mesh::MIN_MAX_DATAGRAM..=mesh::seal::MAX_DATAGRAM).contains(&max) {
                return Err(FlagError::OutOfRange {
                    flag: "--gossip-max-datagram",
                    range: format!(
                        "0 or {}..={}",
                        mesh::MIN_MAX_DATAGRAM,
                        mesh::seal::MAX_DATAGRAM
                    ),
                });
            }
        }
        Ok(MeshSettings {
            cluster_id: self.cluster_id.clone(),
            listen: self.listen,
            advertise: self.advertise,
            aliases: self.aliases.clone(),
            send_format: if self.seal_unbound {
                mesh::SendFormat::Unbound
            } else {
                mesh::SendFormat::Bound
            },
            seeds: self.seeds.clone(),
            gossip_interval: Duration::from_millis(self.gossip_interval_ms),
            keys,
            dead_node_grace: mesh::DEAD_NODE_GRACE,
            max_datagram,
            tier: mesh::Tier::Core,
        })
    }

    /// The cluster key's text and, during a rotation, the previous one's.
    pub fn key_texts(&self) -> Result<(String, Option<String>), FlagError> {
        let current = read_key(self.key_file.as_ref(), "MESHLB_GOSSIP_KEY")?
            .ok_or(FlagError::NoClusterKey)?;
        let previous = read_key(
            self.previous_key_file.as_ref(),
            "MESHLB_GOSSIP_KEY_PREVIOUS",
        )?;
        Ok((current, previous))
    }

    /// The session-affinity cookie key: derived from the cluster key, so every aggregator of
    /// the cluster signs and checks the same cookies.
    pub fn affinity_key(&self) -> Result<lb_core::affinity::AffinityKey, FlagError> {
        let (current, _) = self.key_texts()?;
        Ok(lb_core::affinity::AffinityKey::derive(current.as_bytes()))
    }

    /// `--node-id`, else `role-region-dc-port`.
    pub fn node_id(&self, role: &str, region: &str, dc: &str) -> String {
        self.node_id.clone().unwrap_or_else(|| {
            format!(
                "{role}-{}-{}-{}",
                region.to_lowercase(),
                dc.to_lowercase(),
                self.listen.port()
            )
        })
    }
}
