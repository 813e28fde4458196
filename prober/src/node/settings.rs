//! What a prober node is started with: its flags as typed values (`meshlb prober` maps its
//! command line onto these).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use lb_core::{Region, RegionsTable};
use meshlb_node::control::ControlSettings;
use meshlb_node::guard;
use meshlb_node::reload::ReloadSettings;

/// Everything a prober node needs to start.
pub struct Settings {
    /// The config file (re-read on reload; on a follower, where the mesh's config is kept).
    pub config: PathBuf,
    pub regions: RegionsTable,
    /// This prober's region and datacenter (a datacenter of the region in `regions`).
    pub region: Region,
    pub dc: String,
    /// This node's id in gossip.
    pub node_id: String,
    pub mesh: mesh::MeshSettings,
    pub control: ControlSettings,
    pub reloads: ReloadSettings,
    /// Probes in flight at once.
    pub concurrency: usize,
    /// The `/metrics` (and `POST /-/reload`) listener, if any.
    pub metrics: Option<MetricsListener>,
}

/// The prober's `/metrics` listener.
pub struct MetricsListener {
    pub addr: SocketAddr,
    /// The bearer token of `POST /-/reload` (none: every reload over HTTP is refused).
    pub token: Option<Arc<str>>,
    pub limits: guard::Limits,
}
