//! The gossip mesh: an authenticated, encrypted chitchat transport shared by probers and
//! aggregators.

mod codec;
pub mod seal;
pub mod transport;

pub use seal::{KeyError, KeyRing};
pub use transport::{SealedTransport, TransportStats};
