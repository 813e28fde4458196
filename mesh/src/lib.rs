//! The gossip mesh that probers and aggregators share: chitchat over a sealed transport
//! (every datagram authenticated and encrypted with the cluster key), the namespace of the keys
//! nodes gossip, and the start of a mesh node.
//!
//! - [`seal`]: the key ring and the XChaCha20-Poly1305 frame of one datagram.
//! - [`recipient`]: which addresses are this node's, for datagrams bound to their recipient.
//! - [`transport`]: chitchat's `Transport`, sealing and opening every message, over UDP or any
//!   [`DatagramNet`] (the simulator, `mesh/sim`).
//! - [`keys`]: what a node gossips and how each value is encoded; [`preview`]: a monitor
//!   preview's request and outcomes.
//! - [`node`]: a chitchat node with meshlb's identity and settings; [`role`]: what it does.

pub mod keys;
pub mod node;
pub mod preview;
pub mod recipient;
pub mod role;
pub mod seal;
pub mod transport;

pub use chitchat::Tier;
pub use node::{
    start, start_on, MeshNode, MeshSettings, NodeIdentity, StartError, DEAD_NODE_GRACE,
    DEFAULT_MAX_DATAGRAM, MIN_MAX_DATAGRAM,
};
pub use recipient::{Recipient, SendFormat};
pub use role::Role;
pub use seal::{KeyError, KeyRing};
pub use transport::{DatagramNet, DatagramSocket, SealedTransport, TransportStats, Udp};
