//! The tally (docs/design.md#the-tally): a pure function from the configuration, every prober's last
//! ballot and the previous state to the health snapshot the steering engine reads, the
//! health changes to log, and the next state.
//!
//! - A result older than `max_age_intervals` of its monitor's interval, or from a node the
//!   failure detector holds dead, is not a vote.
//! - A region's verdict: a strict majority of its datacenters that voted (a datacenter with
//!   several nodes votes as their majority); a tie or no vote is no verdict.
//! - A check's verdict (the pool's monitor, or one member of its monitor group): a strict
//!   majority of the regions with a verdict; a tie or none keeps the previous state; never
//!   voted on is Unknown.
//! - An endpoint's verdict: its checks' verdicts combined by `lb_core::group_verdict` (one
//!   check: that check's verdict); undecided keeps the previous state.
//! - No vote at all (the aggregator is cut off from every prober): everything stays as it was
//!   ("fail static"), flagged so, with the reason (`silence.rs`), and nothing fails over. A
//!   live prober's "down" is a vote: dead targets never make a tally static.

pub mod ballot;
mod carry_over;
mod changes;
mod count;
mod ewma;
mod majority;
mod silence;

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, LbId, PoolId};
use lb_core::health::{EndpointHealth, HealthSnapshot, PoolHealth, PoolState, Verdict};
use lb_core::region::{Region, RegionMap};

pub use ballot::{Ballot, PoolVotes, ProberId, Vote};
pub use carry_over::removed as removed_endpoints;
pub use count::count_region;
pub use ewma::Ewma;
pub use majority::{datacenter_vote, strict_majority};
pub use silence::Silence;

use count::{Electorate, PoolCount, Round};

/// Tally knobs.
#[derive(Debug, Clone)]
pub struct TallySettings {
    /// A result older than this many of its monitor's intervals is stale.
    pub max_age_intervals: f64,
    /// Time constant of the RTT averages (see `ewma.rs`).
    pub rtt_tau: Duration,
    /// The aggregator's own region: pool and load-balancer states are judged from here.
    pub region: Region,
    /// Ready (`GET /readyz`) after this long even while endpoints still lack a verdict.
    pub warmup_timeout: Duration,
}

impl Default for TallySettings {
    fn default() -> Self {
        TallySettings {
            max_age_intervals: 3.0,
            rtt_tau: Duration::from_secs(30),
            region: Region::Weu,
            warmup_timeout: Duration::from_secs(30),
        }
    }
}

/// Load-balancer state (docs/design.md#load-balancer-states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LbState {
    /// Every default pool takes traffic.
    Healthy,
    /// Some pool is critical, traffic is not on the fallback yet.
    Degraded,
    /// Every pool is critical: traffic goes to the fallback pool.
    Critical,
}

impl LbState {
    pub fn name(self) -> &'static str {
        match self {
            LbState::Healthy => "healthy",
            LbState::Degraded => "degraded",
            LbState::Critical => "critical",
        }
    }
}

/// What the tally carries from one round to the next, aligned with the config.
#[derive(Debug, Clone, Default)]
pub struct TallyState {
    verdicts: Vec<Vec<Verdict>>,
    /// `check_verdicts[pool][check][endpoint]`: each check's own verdict (`Pool::checks`).
    check_verdicts: Vec<Vec<Vec<Verdict>>>,
    endpoint_rtt: Vec<Vec<[Option<Ewma>; 13]>>,
    pool_rtt: Vec<[Option<Ewma>; 13]>,
    pool_states: Vec<PoolState>,
    lb_states: Vec<Option<LbState>>,
    version: u64,
}

impl TallyState {
    /// The state before any vote: every monitored endpoint Unknown.
    pub fn new(config: &Config) -> Self {
        TallyState {
            verdicts: config
                .pools
                .iter()
                .map(|p| vec![Verdict::Unknown; p.endpoints.len()])
                .collect(),
            check_verdicts: config
                .pools
                .iter()
                .map(|p| vec![vec![Verdict::Unknown; p.endpoints.len()]; p.checks.len()])
                .collect(),
            endpoint_rtt: config
                .pools
                .iter()
                .map(|p| vec![[None; 13]; p.endpoints.len()])
                .collect(),
            pool_rtt: vec![[None; 13]; config.pools.len()],
            pool_states: vec![PoolState::Unknown; config.pools.len()],
            lb_states: vec![None; config.load_balancers.len()],
            version: 0,
        }
    }

    /// Each load balancer's state (`None`: not tallied yet), indexed like the config.
    pub fn lb_states(&self) -> &[Option<LbState>] {
        &self.lb_states
    }

    fn fits(&self, config: &Config) -> bool {
        self.verdicts.len() == config.pools.len()
            && self
                .verdicts
                .iter()
                .zip(&config.pools)
                .all(|(v, p)| v.len() == p.endpoints.len())
            && self.check_verdicts.len() == config.pools.len()
            && self.check_verdicts.iter().zip(&config.pools).all(|(c, p)| {
                c.len() == p.checks.len() && c.iter().all(|v| v.len() == p.endpoints.len())
            })
            && self.lb_states.len() == config.load_balancers.len()
    }

    pub fn verdict(&self, pool: PoolId, endpoint: EndpointId) -> Verdict {
        self.verdicts
            .get(pool.0)
            .and_then(|v| v.get(endpoint.0))
            .copied()
            .unwrap_or_default()
    }

    /// Every check's own verdict, `[pool][check][endpoint]`.
    pub fn check_verdicts(&self) -> &[Vec<Vec<Verdict>>] {
        &self.check_verdicts
    }

    /// One check's own verdict on an endpoint (`check` indexes `Pool::checks`).
    pub fn check_verdict(&self, pool: PoolId, check: usize, endpoint: EndpointId) -> Verdict {
        self.check_verdicts
            .get(pool.0)
            .and_then(|c| c.get(check))
            .and_then(|v| v.get(endpoint.0))
            .copied()
            .unwrap_or_default()
    }
}

/// How one region saw one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionCount {
    pub healthy_dcs: u32,
    pub unhealthy_dcs: u32,
    /// Datacenters whose nodes sent nothing fresh (dead, stale, or tied).
    pub silent_dcs: u32,
    pub verdict: Option<bool>,
}

/// A health change, with the counts behind it.
#[derive(Debug, Clone, PartialEq)]
pub enum HealthChange {
    Endpoint {
        pool: PoolId,
        endpoint: EndpointId,
        from: Verdict,
        to: Verdict,
        /// The counts behind it for a pool with one monitor (empty for a group's endpoint:
        /// its members' own changes carry theirs).
        regions: Vec<(Region, RegionCount)>,
        /// For a pool with a monitor group: each check's verdict after this tally (indexed
        /// like `Pool::checks`) and whether it changed in it. Empty otherwise.
        members: Vec<(Verdict, bool)>,
    },
    /// A member of a monitor group changed its own verdict on an endpoint (only for pools with
    /// a `monitor_group`: a single monitor's change is its endpoint's).
    Check {
        pool: PoolId,
        endpoint: EndpointId,
        /// Index into `Pool::checks`.
        check: usize,
        from: Verdict,
        to: Verdict,
        regions: Vec<(Region, RegionCount)>,
    },
    Pool {
        pool: PoolId,
        from: PoolState,
        to: PoolState,
    },
    LoadBalancer {
        lb: LbId,
        from: Option<LbState>,
        to: LbState,
    },
}

/// The result of one tally.
#[derive(Debug, Clone)]
pub struct TallyOutcome {
    pub snapshot: HealthSnapshot,
    pub changes: Vec<HealthChange>,
    pub state: TallyState,
    /// Votes counted this round (fresh, from live nodes).
    pub votes_counted: usize,
    /// Why none was, when the tally failed static.
    pub silence: Option<Silence>,
}

/// One round: every pool's votes counted, then — unless no vote came at all (fail static) —
/// what changed recorded and the next state made.
pub fn tally(
    config: &Config,
    ballots: &[Ballot],
    previous: &TallyState,
    settings: &TallySettings,
    now: Instant,
) -> TallyOutcome {
    let fresh_state;
    let previous = if previous.fits(config) {
        previous
    } else {
        fresh_state = TallyState::new(config);
        &fresh_state
    };
    let electorate = Electorate::new(ballots);
    let mut state = previous.clone();
    state.version += 1;
    let mut snapshot = blank_snapshot(config, state.version);
    let mut round = Round::default();
    for (pi, pool) in config.pools.iter().enumerate() {
        let pool = PoolCount {
            config,
            pool,
            id: PoolId(pi),
            electorate: &electorate,
            previous,
            settings,
            now,
        };
        pool.count(&mut state, &mut snapshot, &mut round);
    }
    let monitored = config.pools.iter().any(|p| p.is_monitored());
    if round.votes_counted == 0 && monitored {
        return fail_static(config, ballots, previous, settings, snapshot, state.version);
    }
    let mut changes = Vec::new();
    changes::endpoints(config, round.changed, previous, &mut state, &mut changes);
    changes::pools(
        config,
        &snapshot,
        previous,
        settings,
        &mut state,
        &mut changes,
    );
    changes::load_balancers(config, previous, &mut state, &mut changes);
    TallyOutcome {
        snapshot,
        changes,
        state,
        votes_counted: round.votes_counted,
        silence: None,
    }
}

/// A snapshot of `config` with no verdict yet.
fn blank_snapshot(config: &Config, version: u64) -> HealthSnapshot {
    HealthSnapshot {
        version,
        generation: 0,
        pools: vec![PoolHealth::default(); config.pools.len()],
        endpoints: config
            .pools
            .iter()
            .map(|p| vec![EndpointHealth::default(); p.endpoints.len()])
            .collect(),
        fail_static: false,
    }
}

/// Cut off from every prober: every monitored endpoint keeps its last verdict, nothing
/// changes, and the outcome says why no vote was counted.
fn fail_static(
    config: &Config,
    ballots: &[Ballot],
    previous: &TallyState,
    settings: &TallySettings,
    mut snapshot: HealthSnapshot,
    version: u64,
) -> TallyOutcome {
    for (pi, pool) in config.pools.iter().enumerate() {
        if pool.is_monitored() {
            for (ei, e) in snapshot.endpoints[pi].iter_mut().enumerate() {
                e.verdict = previous.verdicts[pi][ei];
                e.regional = RegionMap::default();
            }
        }
    }
    snapshot.fail_static = true;
    TallyOutcome {
        snapshot,
        changes: Vec::new(),
        state: TallyState {
            version,
            ..previous.clone()
        },
        votes_counted: 0,
        silence: Some(Silence::of(ballots, longest_max_age(config, settings))),
    }
}

/// The longest any monitored check's results may age in `config`.
fn longest_max_age(config: &Config, settings: &TallySettings) -> Duration {
    config
        .pools
        .iter()
        .filter(|p| p.is_monitored())
        .flat_map(|p| &p.checks)
        .map(|c| {
            config
                .check_monitor(c)
                .interval
                .mul_f64(settings.max_age_intervals)
        })
        .max()
        .unwrap_or_default()
}

#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod silence_tests;
#[cfg(test)]
mod tests;
