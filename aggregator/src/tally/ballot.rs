//! The tally's input: what each prober last said about each endpoint it probes.

use std::sync::Arc;
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
    pub reason: Option<Arc<str>>,
}

/// One prober's results under one check of one pool, in the config's endpoint order (`None`
/// where it has no debounced result). Shared, not copied, between the mesh view that decoded
/// the gossiped value and every ballot built from it until the value changes.
pub type PoolVotes = Arc<[Option<Vote>]>;

/// Everything one prober said.
#[derive(Debug, Clone)]
pub struct Ballot {
    pub prober: ProberId,
    /// The failure detector holds the node alive.
    pub alive: bool,
    /// How old the prober's results are: the time since its progress key last moved, the same
    /// for all of them. Older than [`crate::tally::TallySettings::max_age_intervals`] of a
    /// check's interval, its results under that check are stale and do not count.
    pub age: Duration,
    /// `votes[pool][check]` (`check` indexes `Pool::checks`: the pool's monitor, or each
    /// enabled member of its monitor group), indexed like the config.
    pub votes: Vec<Vec<PoolVotes>>,
}

impl Ballot {
    /// The prober's vote on endpoint `endpoint` of pool `pool` under check `check`.
    pub fn vote(&self, pool: usize, check: usize, endpoint: usize) -> Option<&Vote> {
        self.votes
            .get(pool)
            .and_then(|c| c.get(check))
            .and_then(|v| v.get(endpoint))
            .and_then(Option::as_ref)
    }
}
