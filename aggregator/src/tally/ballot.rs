//! The tally's input: what each prober last said about each endpoint it probes.

use std::time::Duration;

use lb_core::Region;

/// One prober node: the region and datacenter it was started with, and its node id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProberId {
    pub region: Region,
    pub datacenter: String,
    pub node: String,
}

/// A prober's debounced verdict on one endpoint, as last gossiped.
#[derive(Debug, Clone, PartialEq)]
pub struct Vote {
    pub healthy: bool,
    pub rtt_ms: Option<f64>,
    pub code: Option<u32>,
    /// Shared by every tally that reads the same published value.
    pub reason: Option<std::sync::Arc<str>>,
    /// How old the result is; a result older than [`crate::tally::TallySettings::max_age`]
    /// intervals is stale and does not count.
    pub age: Duration,
}

/// Everything one prober said. `votes` is indexed like the config:
/// `votes[pool][check][endpoint]` (`check` indexes `Pool::checks`: the pool's monitor, or
/// each enabled member of its monitor group), `None` where it has no (debounced) result.
#[derive(Debug, Clone)]
pub struct Ballot {
    pub prober: ProberId,
    /// The failure detector holds the node alive.
    pub alive: bool,
    pub votes: Vec<Vec<Vec<Option<Vote>>>>,
}
