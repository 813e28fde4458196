//! The HTTP reverse proxy (DESIGN sections 5 and 6): layer-7 steering on hyper with live
//! load counts, session affinity, zero-downtime failover, WebSockets and TLS termination.

mod body;
mod handler;
mod headers;
mod live;
mod metrics;
mod origin_http1;
mod server;
mod sessions;
mod tls;
mod upstream;

pub use body::ProxyBody;
pub use handler::{Peer, Proxy, ProxySettings};
pub use server::{listen, ProxyListener};
pub use tls::Certificates;
pub use upstream::{Origin, Upstream, UpstreamError};
