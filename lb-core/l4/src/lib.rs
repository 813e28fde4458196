//! meshlb's layer-4 frontend (docs/layer4.md), the counterpart of Cloudflare Spectrum: TCP and
//! UDP load balancers on listed ports, each connection or flow steered by `lb-core`'s engine
//! over the live health snapshot, relayed to the chosen endpoint with the client's address
//! in a PROXY header when asked.
//!
//! - [`frontend`]: one generation's routing (port -> load balancer), steering and endpoints.
//! - [`tcp`]: connections: connect with one retry elsewhere, relay both ways, idle timeout.
//! - [`udp`]: flows: a table keyed by client address, an upstream socket per flow.
//! - [`listeners`]: the sockets of the ports in force, changed by a reload.
//! - [`proxy_header`]: PROXY v1/v2 and the Simple Proxy Protocol.
//! - [`live`]: open connections and flows per endpoint, for `least_connections`.

mod deadline;
pub mod frontend;
pub mod listeners;
mod live;
mod metrics;
pub use metrics::{describe_metrics, METRICS};
pub mod proxy_header;
mod record;
mod tcp;
mod udp;

pub use frontend::{L4Settings, Layer4};
pub use listeners::{Listeners, Plan};
pub use record::{L4Log, L4Record};
