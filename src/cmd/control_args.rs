//! Command-line settings of the control plane every node shares (docs/api.md#one-config-for-the-mesh).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aggregator::control::{ConfigStore, ControlKey, ControlPlane, Role, Side, Versioned};
use anyhow::Context;

#[derive(Debug, Clone, clap::Args)]
pub struct ControlArgs {
    /// Run the config the mesh's primary holds: fetch every new generation it announces in
    /// gossip, check it, keep it in --config (atomically) and reload. --config may be absent
    /// at the first start (the node then waits with an empty config).
    #[arg(long)]
    pub config_from_mesh: bool,
    /// The largest config document fetched from the primary or written through the API.
    #[arg(long, value_name = "BYTES", default_value_t = aggregator::control::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub config_max_bytes: usize,
    /// The longest a fetch of the primary's document may take.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub config_fetch_timeout_ms: u64,
}

/// The cluster key texts (current, previous), as `MeshArgs` reads them.
pub fn control_key(mesh: &super::mesh_args::MeshArgs) -> anyhow::Result<ControlKey> {
    let (current, previous) = mesh.key_texts()?;
    Ok(ControlKey::new(&current, previous.as_deref()))
}

/// The node's store and the document it starts with.
pub fn open(path: &Path, role: Role) -> anyhow::Result<(ConfigStore, Versioned)> {
    let store = ConfigStore::new(path);
    let document = match role {
        Role::Primary => store.open(Side::Primary)?,
        Role::Follower => store.open(Side::Follower)?,
        Role::Standalone => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let opened = store.open(Side::Follower).ok();
            match opened.filter(|o| *o.text == *text) {
                Some(o) => o,
                None => Versioned::new(0, &text),
            }
        }
    };
    Ok((store, document))
}

impl ControlArgs {
    /// The control plane of a node in `role`, starting from `document`.
    pub fn plane(&self, role: Role, document: Versioned, key: ControlKey) -> Arc<ControlPlane> {
        Arc::new(ControlPlane::new(
            role,
            document,
            key,
            self.config_max_bytes.max(1),
        ))
    }

    pub fn fetch_timeout(&self) -> Duration {
        Duration::from_millis(self.config_fetch_timeout_ms.max(1))
    }

    /// Starts the task that watches gossip for the primary (and, on a follower, fetches its
    /// generations into the returned channel).
    pub fn spawn_follower(
        &self,
        node_id: &str,
        settings: &mesh::MeshSettings,
        handle: &chitchat::ChitchatHandle,
        plane: &Arc<ControlPlane>,
    ) -> (
        tokio::task::JoinHandle<()>,
        tokio::sync::mpsc::Receiver<aggregator::control::follower::Fetched>,
    ) {
        let (fetches, fetched) = tokio::sync::mpsc::channel(1);
        let task = tokio::spawn(aggregator::control::follower::run(
            aggregator::control::follower::FollowerSettings {
                node_id: node_id.to_string(),
                poll: settings.gossip_interval.max(Duration::from_millis(50)),
                fetch_timeout: self.fetch_timeout(),
                follow: plane.role == Role::Follower,
            },
            handle.chitchat(),
            Arc::clone(plane),
            fetches,
        ));
        (task, fetched)
    }
}

/// The gossip value of the generation a node runs, and of what it refused.
pub async fn publish(
    handle: &chitchat::ChitchatHandle,
    plane: &ControlPlane,
    announcement: Option<String>,
) {
    let generation = plane.generation().to_string();
    let refused = plane
        .refused()
        .map(|r| format!("{} {} {}", r.generation, r.sha256, r.errors.join("; ")));
    handle
        .with_chitchat(|c| {
            let me = c.self_node_state();
            me.set(mesh::keys::CONFIG_GENERATION, &generation);
            if let Some(a) = &announcement {
                me.set(mesh::keys::CONFIG_PRIMARY, a);
            }
            match &refused {
                Some(r) => me.set(mesh::keys::CONFIG_REFUSED, r),
                None => {
                    if me.get(mesh::keys::CONFIG_REFUSED).is_some() {
                        me.delete(mesh::keys::CONFIG_REFUSED);
                    }
                }
            }
        })
        .await;
}
