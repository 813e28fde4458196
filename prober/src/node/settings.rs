//! What a prober node is started with: its flags as typed values (`meshlb prober` maps its
//! command line onto these).

use std::net::SocketAddr;
use std::sync::Arc;

use meshlb_node::guard;
use meshlb_node::NodeSettings;

/// Everything a prober node needs to start.
pub struct Settings {
    /// What every node is started with: config file, regions, place (a datacenter of the
    /// region on the regions table), mesh, control plane, reloads.
    pub node: NodeSettings,
    /// Probes in flight at once.
    pub concurrency: usize,
    /// The `/metrics` (and `POST /-/reload`) listener, if any.
    pub metrics: Option<MetricsListener>,
    /// How the monitor previews the mesh asks for are run.
    pub previews: crate::preview::PreviewSettings,
    /// The key PoPs prove to each other (derived from the cluster key): a prober probes a
    /// private endpoint through a PoP that holds its tunnel, as a PoP would.
    pub relay_key: tunnel::RelayKey,
}

impl MetricsListener {
    /// Where the mesh reaches this listener (its relayed documents): http or https as its
    /// TLS says; an unspecified IP is replaced by the gossip address's.
    pub fn url(&self, mesh: &mesh::MeshSettings) -> String {
        let scheme = if self.credentials.tls().is_some() {
            "https"
        } else {
            "http"
        };
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(mesh.advertise.unwrap_or(mesh.listen).ip());
        }
        format!("{scheme}://{addr}")
    }
}

/// The prober's `/metrics` listener.
pub struct MetricsListener {
    pub addr: SocketAddr,
    /// The bearer token of `POST /-/reload` (none: every reload over HTTP is refused, unless
    /// a client certificate is verified) and the listener's TLS.
    pub credentials: Arc<meshlb_node::credentials::AdminCredentials>,
    pub limits: guard::Limits,
}
