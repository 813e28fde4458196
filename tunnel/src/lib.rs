//! Tunnels to private networks, as Cloudflare Tunnel's: a connector inside a network that
//! accepts no inbound connection dials PoPs over TLS, proves which tunnel it is, and carries
//! the streams they open through it to the private endpoints it routes to.
//!
//! - [`token`]: a tunnel's id and secret, and the token a connector runs with.
//! - [`hello`]: the connector's first bytes and the PoP's answer.
//! - [`stream`]: an HTTP/2 stream as a byte stream.
//! - [`pop`]: the PoP's side ([`Hub`]): connectors accepted, checked and held; streams opened.
//! - [`connector`]: the connector's side ([`Connector`]).
//! - [`relay`]: PoP to PoP, for a PoP (or a prober) without a connection of the tunnel.
//! - [`holders`]: which PoP holds which tunnel, as gossip carries it.
//! - [`dialer`]: a stream through a tunnel from anywhere in the mesh ([`TunnelDialer`]).
//!
//! One stream is one TCP connection to an endpoint: the PoP sends `POST /tcp` with the
//! target in [`TARGET_HEADER`], the connector answers 200 and copies bytes both ways, or 403
//! (outside its routes), 502 (unreachable), 400 (malformed).

pub mod connector;
pub mod dialer;
pub mod hello;
pub mod holders;
pub mod metrics;
pub mod pop;
pub mod relay;
pub mod stream;
pub mod token;

pub use connector::{Connector, ConnectorSettings, ConnectorStats};
pub use dialer::TunnelDialer;
pub use holders::{Holder, HolderList};
pub use metrics::{describe_metrics, METRICS};
pub use pop::{ConnectionInfo, Grant, Hub, HubLimits, OpenError, Refusal};
pub use relay::{RelayKey, Relays};
pub use stream::TunnelStream;
pub use token::{Token, TokenError, TunnelId, TunnelSecret};

/// The request header naming a stream's target (`ip:port`).
pub const TARGET_HEADER: &str = "meshlb-target";

/// The request header naming a relayed stream's tunnel.
pub const TUNNEL_HEADER: &str = "meshlb-tunnel";
