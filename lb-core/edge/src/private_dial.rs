//! The one seam through which the frontends reach private endpoints (`virtual_network_id`):
//! they ask a [`PrivateDialer`] for a byte stream to an address of a private network, and
//! never learn what carries it. The aggregator's dialer opens a stream through a tunnel
//! connection this PoP holds (`tunnel/`, `aggregator/src/node/tunnels.rs`); without one a
//! private endpoint is unreachable, never dialed on the public side.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream to a private endpoint.
pub trait PrivateStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> PrivateStream for T {}

/// Why no stream to a private endpoint opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrivateDialError {
    /// No live tunnel connection reaches the address (Cloudflare's 530, error 1033).
    #[error("no live tunnel connection reaches it")]
    NoTunnel,
    /// The tunnel's connector could not reach the address.
    #[error("the tunnel's connector could not reach it")]
    Unreachable,
    /// The tunnel did not answer within the connect timeout.
    #[error("the tunnel did not answer in time")]
    TimedOut,
}

/// What a dial returns.
pub type PrivateDial<'a> =
    Pin<Box<dyn Future<Output = Result<Box<dyn PrivateStream>, PrivateDialError>> + Send + 'a>>;

/// Opens streams to private endpoints.
pub trait Dial: Send + Sync + 'static {
    /// A stream to `to` in `network`, routed by `networks` (the config generation's).
    fn dial<'a>(
        &'a self,
        networks: &'a PrivateNetworks,
        network: NetworkIndex,
        to: SocketAddr,
    ) -> PrivateDial<'a>;
}

/// A shared [`Dial`], for the frontends' settings.
#[derive(Clone)]
pub struct PrivateDialer(pub Arc<dyn Dial>);

/// The same dialer (settings that hold one compare equal when they hold the same).
impl PartialEq for PrivateDialer {
    fn eq(&self, other: &PrivateDialer) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for PrivateDialer {}

impl std::fmt::Debug for PrivateDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateDialer(..)")
    }
}
