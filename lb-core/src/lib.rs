//! lb-core: meshlb's pure domain. The configuration model and its validation, the regions
//! table and geolocation, the health snapshot, custom rules, and the steering engine that
//! turns them into decisions for the DNS frontend (`lb-dns`) and the HTTP proxy (`lb-proxy`).
//!
//! Everything here is plain data and pure functions: the same config, snapshot, request,
//! RNG seed and clock give the same decision, which carries its own explanation. This crate
//! has no async runtime, socket, TLS or server dependency; `tests/architecture.rs` of the
//! workspace checks that with `cargo metadata`.

pub mod affinity;
pub mod choice;
pub mod clock;
pub mod config;
pub mod error;
pub mod geo;
pub mod geolocation;
pub mod group_verdict;
pub mod health;
pub mod metric;
pub mod pops;
pub mod region;
pub mod regions_table;
pub mod request;
pub mod rules;
pub mod simulate;
pub mod steering;

pub use choice::Choice;
pub use error::{ConfigError, ConfigErrors};
pub use region::Region;
pub use regions_table::{CountryCode, RegionsTable};
