//! The console (docs/operations.md#the-console): a web view of the mesh that every
//! aggregator's admin listener serves at `/ui/` from assets compiled into the binary
//! (`aggregator/console/`), and the JSON it reads under `/console/`.
//!
//! - [`assets`]: the page, its script modules and style, with their security headers.
//! - [`views`]: what the page shows, each read sized to what is on screen: the overview
//!   (this PoP, the mesh, load balancers and pools), a page of the health grid, one endpoint's
//!   votes, one pool.
//! - [`history`]: each pool's EWMA RTT per region over the last hour, sampled by the tally
//!   loop.
//!
//! The page carries no secret and is served without a token; every read under `/console/`
//! follows the admin API's token rules, and the page's actions go through `/drain` and the
//! control-plane API, with their own.

pub mod assets;
pub mod history;
pub mod views;
