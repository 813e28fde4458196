//! What the prober and the aggregator commands both take: the config file and how it is
//! watched, mapped with the mesh and control-plane flags onto `meshlb_node::NodeSettings`.

use std::path::PathBuf;
use std::time::Duration;

use lb_core::{Region, RegionsTable};
use meshlb_node::control::ConfigRole;
use meshlb_node::reload::ReloadSettings;
use meshlb_node::NodeSettings;

use super::control_args::ControlArgs;
use super::mesh_args::MeshArgs;

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
) -> anyhow::Result<NodeSettings> {
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
