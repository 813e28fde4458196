//! meshlb's aggregator: tallies the probers' gossiped results into a health snapshot and serves
//! it through the embedded `lb-core` frontends.
//!
//! - [`tally`]: the pure vote-counting core (DESIGN section 4).
//!
//! The mesh (chitchat with an authenticated transport), the admin API and the frontends land
//! with the mesh, DNS and proxy issues.

pub mod tally;

pub use lb_core::health::HealthSnapshot;
