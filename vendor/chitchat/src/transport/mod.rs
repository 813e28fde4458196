use std::net::SocketAddr;

use async_trait::async_trait;

use crate::message::ChitchatEnvelope;

mod channel;
mod udp;
mod utils;

pub use channel::{ChannelTransport, Statistics};
pub use udp::{UdpSocket, UdpTransport};
pub use utils::TransportExt;

#[derive(Debug, Clone, Copy, Eq, PartialEq)]
pub struct SendOutcome {
    /// Number of bytes sent to the transport layer by Chitchat.
    pub num_bytes_sent: usize,
}

#[derive(Debug, Eq, PartialEq)]
pub struct RecvOutcome {
    /// Address of the peer that sent the message.
    pub from_addr: SocketAddr,
    /// Decoded Chitchat envelope.
    pub envelope: ChitchatEnvelope,
    /// Number of bytes received from the transport layer by Chitchat.
    pub num_bytes_received: usize,
}

#[async_trait]
pub trait Transport: Send + Sync + 'static {
    async fn open(&self, listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>>;
}

#[async_trait]
pub trait Socket: Send + Sync + 'static {
    /// Returns the address this socket is bound to.
    fn local_addr(&self) -> anyhow::Result<SocketAddr>;

    // The envelope carries the protocol version selecting the wire format it
    // is encoded with (see `message_serialize`).
    //
    // Returns the number of bytes sent to the transport layer by Chitchat. Only returns an
    // error if the transport is broken and may not emit messages in the future.
    async fn send(
        &mut self,
        to: SocketAddr,
        envelope: ChitchatEnvelope,
    ) -> anyhow::Result<SendOutcome>;

    // Returns the envelope containing the message and its protocol version, the peer address, and
    // the number of bytes received from the transport layer by Chitchat. A responder can echo the
    // version (see `message_serialize`).
    //
    // Only returns an error if the transport is broken and may not receive message
    // in the future.
    async fn recv(&mut self) -> anyhow::Result<RecvOutcome>;
}
