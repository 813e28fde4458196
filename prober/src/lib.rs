//! meshlb's prober: runs the monitors of `lb-core`'s configuration against every endpoint of
//! every pool whose `check_regions` include this node's region, and publishes the results.
//!
//! The monitors, thresholds and scheduler land with the prober issue; today this crate only
//! fixes its place in the dependency chain `lb-core <- prober <- aggregator <- meshlb`.

pub use lb_core::config::{Monitor, MonitorKind};
