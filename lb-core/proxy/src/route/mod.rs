//! Between client and origin: one request routed by Host to its load balancer, steered over
//! the live snapshot and live load, its head prepared for the origin (`proxy.rs`), and
//! forwarded with zero-downtime failover (`forward.rs`); header-affinity sessions.

mod forward;
mod proxy;
pub mod sessions;

pub use proxy::{Begun, Peer, Proxy, ProxySettings, SetupError};
