//! The gossip mesh: an authenticated, encrypted chitchat transport shared by probers and
//! aggregators.

pub mod keys;
pub mod node;
pub mod publisher;
pub mod seal;
pub mod transport;

pub use node::{start, MeshNode, MeshSettings, NodeIdentity, DEAD_NODE_GRACE};
pub use publisher::GossipPublisher;
pub use seal::{KeyError, KeyRing};
pub use transport::{SealedTransport, TransportStats};
