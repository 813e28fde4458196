//! An aggregator node as a library: [`start`] joins the mesh, binds every listener its
//! [`Settings`] name (admin API, DNS, proxy, layer 4), starts the tally loop and the config
//! task, and returns a [`RunningNode`] with the addresses it bound and a handle to reload and
//! stop it. `meshlb aggregator` maps its flags onto the settings and waits on the node; tests
//! run nodes in-process the same way (as mini-redis's `server::run(listener, shutdown)`).

mod config_task;
mod error;
mod file_stamps;
mod frontends;
mod settings;
mod start;
mod tunnels;

use std::net::SocketAddr;
use std::sync::Arc;

use meshlb_node::handle::NodeHandle;

pub use error::StartError;
pub use settings::{AdminSettings, DnsSettings, ProxyListeners, Settings};
pub use start::start;
pub use tunnels::TunnelSettings;

use crate::shared::Shared;

/// What a started node bound, and its handle.
pub struct RunningNode {
    /// The admin listener's address (the port chosen when the settings asked for port 0).
    pub admin: SocketAddr,
    /// The gossip address.
    pub gossip: SocketAddr,
    /// The DNS server's addresses (UDP and TCP each).
    pub dns: Vec<SocketAddr>,
    /// The proxy's listeners, plain and TLS.
    pub proxy: Vec<SocketAddr>,
    /// The node's state as its admin API reads it.
    pub shared: Arc<Shared>,
    /// Reload, stop, or wait for the node's end.
    pub handle: NodeHandle,
}
