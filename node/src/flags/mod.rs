//! The command-line flags both roles take, each group beside the settings it fills: the
//! config file and how it is watched ([`ConfigFileArgs`]), the mesh ([`MeshArgs`]), the
//! control plane ([`ControlArgs`]), the config store ([`StoreArgs`]) and the admin
//! listener's credentials ([`AdminTlsArgs`]). `meshlb prober` and `meshlb aggregator` flatten
//! them into their own `Args` (`prober/src/flags.rs`, `aggregator/src/flags/mod.rs`).

mod admin_tls;
mod control;
mod gossip;
mod store;

pub use admin_tls::AdminTlsArgs;
pub use control::ControlArgs;
pub use gossip::MeshArgs;
pub use store::StoreArgs;

use std::path::PathBuf;
use std::time::Duration;

use lb_core::{Region, RegionsTable};

use crate::control::ConfigRole;
use crate::reload::ReloadSettings;
use crate::NodeSettings;

/// Why a node's flags make no settings.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error("cannot read the key file {}: {error}", path.display())]
    KeyFile {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("no cluster key: pass --key-file FILE or set MESHLB_GOSSIP_KEY (gossip is always authenticated)")]
    NoClusterKey,
    #[error("cluster key: {0}")]
    ClusterKey(#[from] mesh::KeyError),
    #[error("{flag} must be {range}")]
    OutOfRange { flag: &'static str, range: String },
    #[error("--config-signing-key: {0}")]
    SigningKey(#[from] crate::control::writer_key::KeyError),
    #[error("{}", lines(.0))]
    VerifyKeys(Vec<crate::control::writer_key::KeyError>),
    #[error("{}", lines(.0))]
    Credentials(Vec<crate::credentials::CredentialError>),
}

fn lines<E: std::fmt::Display>(errors: &[E]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

#[derive(Debug, Clone, clap::Args)]
pub struct ConfigFileArgs {
    /// The configuration file (re-read on SIGHUP, on `POST /-/reload`, and with
    /// --watch-config when it changes).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Also reload when the file's content changes (a Kubernetes ConfigMap update included).
    #[arg(long)]
    pub watch_config: bool,
    /// How often --watch-config reads the file.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub watch_interval_ms: u64,
}

/// Where a node stands in the mesh, as its command names it.
pub struct Place<'a> {
    /// `prober` or `aggregator`: the default node id starts with it.
    pub role: &'a str,
    pub region: Region,
    pub dc: &'a str,
    pub config_role: ConfigRole,
}

/// The settings every node starts with, from its command's flags.
pub fn node_settings(
    file: &ConfigFileArgs,
    place: Place<'_>,
    control: &ControlArgs,
    mesh: &MeshArgs,
    regions: &RegionsTable,
) -> Result<NodeSettings, FlagError> {
    Ok(NodeSettings {
        config: file.config.clone(),
        regions: regions.clone(),
        region: place.region,
        dc: place.dc.to_string(),
        node_id: mesh.node_id(place.role, place.region.code(), place.dc),
        mesh: mesh.settings()?,
        control: control.settings(place.config_role, mesh)?,
        reloads: ReloadSettings {
            on_hangup: true,
            watch: file
                .watch_config
                .then(|| Duration::from_millis(file.watch_interval_ms.max(10))),
        },
    })
}
