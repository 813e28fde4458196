//! The flags of `meshlb prober` and the [`Settings`] they make, with the flags every node
//! shares (`meshlb_node::flags`) flattened in.

use std::path::PathBuf;
use std::time::Duration;

use lb_core::{Region, RegionsTable};
use meshlb_node::control::ConfigRole;
use meshlb_node::flags::{
    node_settings, AdminTlsArgs, ConfigFileArgs, ControlArgs, MeshArgs, Place,
};

use crate::node::{MetricsListener, Settings};

/// Why a prober's flags make no settings.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error(transparent)]
    Node(#[from] meshlb_node::flags::FlagError),
    #[error("{0}")]
    Needs(&'static str),
}

/// `meshlb prober`'s flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    file: ConfigFileArgs,
    /// This prober's region.
    #[arg(long)]
    region: Region,
    /// This prober's datacenter (a code of regions.toml, or any name unique in the region).
    #[arg(long)]
    dc: String,
    /// Probes in flight at once.
    #[arg(long, default_value_t = 512)]
    concurrency: usize,
    /// Monitor previews (`POST .../preview` on an aggregator) run at once; more wait their
    /// turn.
    #[arg(long, value_name = "N", default_value_t = 4)]
    preview_concurrency: usize,
    /// Monitor previews remembered until they expire; a request beyond is skipped.
    #[arg(long, value_name = "N", default_value_t = 256)]
    preview_max_remembered: usize,
    /// Targets one monitor preview may probe here; a larger one is not run.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    preview_max_targets: usize,
    /// Serve Prometheus metrics on this address (GET /metrics), and `POST /-/reload` (needs
    /// the admin token).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// File holding the bearer token of `POST /-/reload` (else MESHLB_ADMIN_TOKEN; none: the
    /// endpoint refuses every reload).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    #[command(flatten)]
    admin_tls: AdminTlsArgs,
    /// How long a request head may take to arrive at the --metrics listener.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    admin_head_timeout_ms: u64,
    /// How long a write of a --metrics listener's answer may wait for the client to read it; a
    /// client that stops reading is cut then.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    admin_send_timeout_ms: u64,
    /// Connections the --metrics listener keeps open at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 256)]
    admin_max_connections: usize,
    #[command(flatten)]
    control: ControlArgs,
    #[command(flatten)]
    mesh: MeshArgs,
}

impl Args {
    /// The node's settings from the flags.
    pub fn settings(&self, regions: &RegionsTable) -> Result<Settings, FlagError> {
        let role = if self.control.config_from_mesh {
            ConfigRole::Follower
        } else {
            ConfigRole::Standalone
        };
        if self.metrics.is_none() && self.admin_tls.admin_tls_cert.is_some() {
            return Err(FlagError::Needs(
                "--admin-tls-cert is for the --metrics listener: give --metrics too",
            ));
        }
        let credentials = self
            .admin_tls
            .credentials((self.admin_token_file.as_ref(), "MESHLB_ADMIN_TOKEN"), None)?;
        let place = Place {
            role: "prober",
            region: self.region,
            dc: &self.dc,
            config_role: role,
        };
        Ok(Settings {
            node: node_settings(&self.file, place, &self.control, &self.mesh, regions)?,
            concurrency: self.concurrency,
            relay_key: tunnel::RelayKey::derive(self.mesh.key_texts()?.0.as_bytes()),
            previews: crate::preview::PreviewSettings {
                concurrent: self.preview_concurrency.max(1),
                remembered: self.preview_max_remembered,
                max_targets: self.preview_max_targets,
                ..crate::preview::PreviewSettings::default()
            },
            metrics: self.metrics.map(|addr| MetricsListener {
                addr,
                credentials,
                limits: meshlb_node::guard::Limits {
                    head_timeout: Duration::from_millis(self.admin_head_timeout_ms.max(1)),
                    send_timeout: Duration::from_millis(self.admin_send_timeout_ms.max(1)),
                    max_connections: self.admin_max_connections,
                },
            }),
        })
    }
}
