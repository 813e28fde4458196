//! The authoritative DNS frontend (DESIGN section 5 and 6): SOA and NS at each zone's apex,
//! load-balanced names answered from the steering engine over the current health snapshot,
//! NXDOMAIN/NODATA with the SOA, REFUSED outside our zones; EDNS Client Subnet per
//! `location_strategy`; UDP and TCP.

mod batch;
mod geoip;
mod metrics;
mod respond;
mod server;
mod zones;

pub use crate::frontend::{HealthSource, PopInfo};
pub use geoip::Geolocator;
pub use respond::{Responder, EDNS_PAYLOAD};
pub use server::DnsServer;

#[cfg(test)]
mod tests;
