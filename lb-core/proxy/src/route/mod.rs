//! Between client and origin: one request routed by Host to its load balancer, steered over
//! the live snapshot and live load (`proxy.rs`), by the host its head names (`host.rs`); its head
//! prepared for the origin (`prepare.rs`) and forwarded with zero-downtime failover
//! (`forward.rs`); the answers the proxy makes itself (`own_answer.rs`); header-affinity
//! sessions; TLS towards origins, kept across reloads (`origin_tls.rs`).

mod forward;
mod host;
mod origin_tls;
mod own_answer;
mod prepare;
mod proxy;
pub mod sessions;

pub use prepare::Peer;
pub use proxy::{Begun, Proxy, ProxyConfigError, ProxySettings};
