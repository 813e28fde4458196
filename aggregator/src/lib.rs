//! meshlb's aggregator: tallies the probers' gossiped results into a health snapshot and serves
//! it through the embedded `lb-core` frontends.
//!
//! The mesh, the tally and the frontends land with the mesh, DNS and proxy issues; today this
//! crate only fixes its place in the dependency chain `lb-core <- prober <- aggregator <- meshlb`.

pub use lb_core::health::HealthSnapshot;
