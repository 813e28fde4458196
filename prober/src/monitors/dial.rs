//! How a monitor reaches its target: a TCP connection to a public endpoint, a stream through
//! the endpoint's tunnel to a private one (`lb_edge::private_dial`, the seam the proxy and
//! layer 4 dial through too). The prober's tunnel dialer relays through the PoPs that hold
//! the tunnel (`tunnel::TunnelDialer`): a probe from a region crosses the holder PoP as a
//! client's request would, so the region's vote says whether that region reaches it.

use std::net::SocketAddr;

use lb_edge::{PrivateDialError, PrivateDialer, PrivateStream};
use tokio::net::TcpStream;

use crate::failure::{Failure, Phase};
use crate::target::ProbeTarget;

/// Opens the monitors' connections.
#[derive(Debug, Clone, Default)]
pub struct Dialer {
    /// Private endpoints' streams; `None`: a private endpoint fails as `no_tunnel`.
    private: Option<PrivateDialer>,
}

impl Dialer {
    /// TCP only: private endpoints are never dialed.
    pub fn direct() -> Dialer {
        Dialer::default()
    }

    /// Private endpoints through `private`.
    pub fn through(private: PrivateDialer) -> Dialer {
        Dialer {
            private: Some(private),
        }
    }

    /// A byte stream to `addr` for `target`: TCP (no Nagle) for a public endpoint, through its
    /// tunnel for a private one. The caller bounds the time.
    pub(crate) async fn connect(
        &self,
        target: &ProbeTarget,
        addr: SocketAddr,
    ) -> Result<Box<dyn PrivateStream>, Failure> {
        let Some(private) = &target.private else {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| Failure::from_io(&e))?;
            let _ = stream.set_nodelay(true);
            return Ok(Box::new(stream));
        };
        let dialer = self.private.as_ref().ok_or(Failure::NoTunnel)?;
        dialer
            .0
            .dial(&private.networks, private.network, addr)
            .await
            .map_err(|e| match e {
                PrivateDialError::NoTunnel => Failure::NoTunnel,
                PrivateDialError::Unreachable => Failure::TunnelUnreachable,
                PrivateDialError::TimedOut => Failure::TimeoutIn(Phase::Connect),
            })
    }
}
