//! What every node is started with, whatever its role: its config file, its place in the
//! mesh, its part in the control plane, and what makes it reload.

use std::path::PathBuf;

use lb_core::{Region, RegionsTable};

use crate::control::ControlSettings;
use crate::reload::ReloadSettings;

/// The settings both roles share (`aggregator::node::Settings` and `prober::node::Settings`
/// each hold one).
pub struct NodeSettings {
    /// The config file (re-read on reload; on a follower, where the mesh's config is kept).
    pub config: PathBuf,
    /// The regions table (`--regions`, or the embedded one).
    pub regions: RegionsTable,
    /// The node's region and datacenter (a prober's must be on the regions table's roster).
    pub region: Region,
    pub dc: String,
    /// This node's id in gossip.
    pub node_id: String,
    pub mesh: mesh::MeshSettings,
    pub control: ControlSettings,
    pub reloads: ReloadSettings,
}
