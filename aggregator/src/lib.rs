//! meshlb's aggregator: reads every live prober's gossiped results, tallies them into a health
//! snapshot that the embedded `lb-core` frontends read, logs every health change with the votes
//! behind it, and serves the admin API.
//!
//! - [`tally`]: the pure vote-counting core (docs/design.md#the-tally).
//! - [`events`]: health changes as events with the votes behind them.
//! - [`mesh_view`]: the incremental view of the gossip state.
//! - [`shared`]: what the loop publishes, grouped by concern; [`service`]: the loop itself.
//! - [`admin`]: the admin API, one file per resource; [`api`]: its Cloudflare-shaped
//!   resources (monitors, pools, load balancers) and health views; [`previews`]: the monitor
//!   previews its API starts, in gossip.
//! - [`console`]: the web console on the admin listener, and the views it reads.
//! - [`notify`]: email and webhook notifications of health changes.
//! - [`drains`], [`drain_state`]: runtime drains shared between aggregators, kept on disk.
//! - [`readiness`]: whether its answers can be trusted yet (`GET /readyz`).
//! - [`adopt`]: the tally loop's adoption of a new config generation.
//! - [`node`]: the aggregator node as a library: start it with its settings, get a handle;
//!   [`flags`]: `meshlb aggregator`'s flags and the settings they make.

pub mod admin;
pub mod adopt;
pub mod api;
pub mod console;
pub mod drain_state;
pub mod drains;
pub mod events;
pub mod flags;
pub mod mesh_view;
pub mod metrics;
pub mod node;
pub mod notify;
pub mod previews;
pub mod private_reach;
pub mod readiness;
pub mod service;
pub mod shared;
pub mod tally;

pub use lb_core::health::HealthSnapshot;
