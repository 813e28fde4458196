//! meshlb's HTTP reverse proxy: layer-7 steering with live load counts, session affinity,
//! zero-downtime failover, WebSockets and TLS termination (docs/proxy.md). Plain keep-alive
//! requests are served by its own HTTP/1 server, everything else by hyper.
//!
//! The folders follow a request:
//! - [`client`]: the client side — listeners, TLS termination, the HTTP/1 server, reading a
//!   request head and writing an answer.
//! - [`route`]: the decision between — route by Host, steer, prepare the origin's head, and
//!   forward it with one retry elsewhere (`route/forward.rs`).
//! - [`origin`]: the origin side — the connection pool, HTTP/1 towards origins, and the pure
//!   interpretation of a response head (`origin/head.rs`) and of its body (`origin/decode.rs`).
//!
//! Beside them, what both sides use: the body type, header rules, live load counts, metrics,
//! a lazy timer and per-worker spares.

mod access;
mod answer;
mod body;
mod client;
mod header_maps;
mod headers;
mod lazy_timer;
mod live;
mod metrics;
pub use metrics::{describe_metrics, METRICS};
mod origin;
mod route;
mod spares;

pub use access::{AccessFormat, AccessLog, AccessRecord, TlsFacts};
pub use body::ProxyBody;
pub use client::listener::{listen, ProxyListener};
pub use client::tls::{CertificateError, Certificates};
pub use origin::pool::{ConnectFailure, Origin, Upstream, UpstreamError};
pub use route::{Peer, Proxy, ProxyConfigError, ProxySettings};
