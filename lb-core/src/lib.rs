//! lb-core: meshlb's domain. The configuration model and its validation, the regions table,
//! the health snapshot, and the pure steering engine that turns them into decisions for the
//! DNS server and the HTTP proxy.
//!
//! Everything here is plain data and pure functions: the same config, snapshot, request,
//! RNG seed and clock give the same decision, which carries its own explanation.

pub mod affinity;
pub mod config;
pub mod dns;
pub mod error;
pub mod frontend;
pub mod geo;
pub mod health;
pub mod proxy;
pub mod region;
pub mod regions_table;
pub mod request;
pub mod rules;
pub mod simulate;
pub mod steering;
pub mod tls_client;

pub use error::{ConfigError, ConfigErrors};
pub use region::Region;
pub use regions_table::{CountryCode, RegionsTable};
