//! The HTTP reverse proxy (DESIGN sections 5 and 6): layer-7 steering with live load counts,
//! session affinity, zero-downtime failover, WebSockets and TLS termination, served by its
//! own HTTP/1 server for plain requests and by hyper for everything else.

mod answer;
mod body;
mod front_http1;
mod front_request;
mod front_response;
mod handler;
mod header_maps;
mod headers;
mod lazy_timer;
mod live;
mod metrics;
mod origin_fields;
mod origin_http1;
mod prefixed;
mod server;
mod sessions;
mod spares;
mod tls;
mod upstream;

pub use body::ProxyBody;
pub use handler::{Peer, Proxy, ProxySettings};
pub use server::{listen, ProxyListener};
pub use tls::Certificates;
pub use upstream::{Origin, Upstream, UpstreamError};
