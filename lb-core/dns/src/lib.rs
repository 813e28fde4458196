//! meshlb's authoritative DNS frontend (docs/dns.md): SOA and NS at each zone's apex,
//! load-balanced names answered by the steering engine over the current health snapshot
//! (`answer.rs` turns a query into its answer, `responder.rs` steers and builds it), NXDOMAIN/NODATA with the SOA, REFUSED outside our
//! zones; EDNS Client Subnet per `location_strategy`; UDP (batched, `batch.rs`) and TCP with
//! bounded connections (`tcp.rs`), both started by `server.rs`.

mod batch;
mod fast;
mod metrics;
pub use metrics::{describe_metrics, METRICS};
mod answer;
mod cookie;
mod dnstap;
mod prepared;
mod reply;
mod responder;
mod rrl;
mod server;
mod tcp;
mod zones;

pub use answer::Steered;
pub use cookie::{CookieSecret, Cookies};
pub use dnstap::{Dnstap, DnstapRecord, CONTENT_TYPE as DNSTAP_CONTENT_TYPE};
pub use reply::EDNS_PAYLOAD;
pub use responder::{Responder, DEFAULT_PREPARED_PLACES};
pub use rrl::{Limit, Rrl, RrlSettings};
pub use server::DnsServer;
pub use tcp::TcpSettings;
pub use zones::DnsConfigError;

#[cfg(test)]
mod test_responder;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cookie;
#[cfg(test)]
mod tests_fast;
