//! meshlb's prober: runs the monitors of the configuration against every endpoint of every
//! pool whose `check_regions` include this node's region, debounces the results, and hands
//! them to a sink (the gossip publisher of the mesh, a channel, a JSON-lines file).
//!
//! - [`monitors`]: the seven monitor types behind one trait, with retries.
//! - [`threshold`]: the anti-flap state machines (consecutive, window, counter).
//! - [`scheduler`]: on-time, burst-free, reloadable probing.
//! - [`publisher`]: the sink that gossips results through the `mesh` crate.
//! - [`once`]: targets probed once, now (`meshlb probe`).
//! - [`preview`]: monitor previews the mesh asks for, run once and published.
//! - [`probed`]: one target's probe, the one type `meshlb probe`, previews and scheduled
//!   reports share.
//! - [`node`]: the prober node as a library: start it with its settings, get a handle;
//!   [`flags`]: `meshlb prober`'s flags and the settings they make.

pub mod failure;
pub mod flags;
pub mod metrics;
pub mod monitors;
pub mod node;
pub mod once;
pub mod outcome;
pub mod preview;
pub mod probed;
pub mod publisher;
pub mod scheduler;
pub mod sink;
pub mod target;
pub mod threshold;

pub use failure::{Failure, Phase, SetupError};
pub use lb_core::config::{Monitor, MonitorKind};
pub use outcome::{Attempt, HttpTimings, ProbeResult};
pub use probed::Probed;
pub use publisher::GossipPublisher;
pub use scheduler::{Scheduler, SchedulerSettings, SchedulerStats};
pub use sink::{ChannelSink, JsonLinesSink, ProbeReport, ResultSink};
pub use target::{targets, ProbeTarget, TargetKey};
pub use threshold::{DebouncedState, Debouncer};
