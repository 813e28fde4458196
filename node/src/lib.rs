//! What every meshlb node shares, prober and aggregator alike (docs/design.md#the-parts):
//!
//! - [`supervise`]: the vital tasks of a node; the first to end stops the node, named.
//! - [`reload`]: what triggers a reload and how its outcome is answered and counted.
//! - [`guard`]: the HTTP guard of a node's listeners: connection caps, head timeouts, tokens
//!   compared in constant time, cross-site refusals.
//! - [`control`]: the control plane: the config store, the primary's announcement, the
//!   follower, the API's writes and the config task's protocol over them.
//! - [`credentials`]: a listener's tokens and TLS, re-read on reload.
//! - [`handle`]: the handle of a running node: reload, stop, wait for its end.
//! - [`settings`]: what every node is started with.
//! - [`metrics`]: the Prometheus recorder, gossip's counters and a prober's `/metrics`
//!   listener.
//! - [`logging`]: the process's log format.
//! - [`flags`]: the command-line flags both roles take, and the settings they make.
//! - [`tunnel_holders`]: the PoPs holding tunnels, as gossip names them.

pub mod control;
pub mod credentials;
pub mod flags;
pub mod guard;
pub mod handle;
pub mod logging;
pub mod metrics;
pub mod reload;
pub mod settings;
pub mod supervise;
pub mod tunnel_holders;

pub use settings::NodeSettings;
