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
mod ewma;
mod majority;
mod silence;

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, LbId, PoolId};
use lb_core::group_verdict::group_verdict;
use lb_core::health::{EndpointHealth, HealthSnapshot, PoolHealth, PoolState, Verdict};
use lb_core::region::{Region, RegionMap};

pub use ballot::{Ballot, PoolVotes, ProberId, Vote};
pub use carry_over::removed as removed_endpoints;
pub use ewma::Ewma;
pub use majority::{datacenter_vote, strict_majority};
pub use silence::Silence;

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

/// The datacenters of each region, with the ballots of their live nodes.
struct Electorate<'a> {
    /// `regions[r]` = the region's datacenters, each with its ballots.
    regions: [Vec<Vec<&'a Ballot>>; 13],
}

impl<'a> Electorate<'a> {
    fn new(ballots: &'a [Ballot]) -> Self {
        let mut regions: [Vec<(&'a str, Vec<&'a Ballot>)>; 13] = Default::default();
        for b in ballots.iter().filter(|b| b.alive) {
            let dcs = &mut regions[b.prober.region.index()];
            match dcs.iter_mut().find(|(dc, _)| *dc == b.prober.datacenter) {
                Some((_, list)) => list.push(b),
                None => dcs.push((&b.prober.datacenter, vec![b])),
            }
        }
        Electorate {
            regions: regions.map(|dcs| dcs.into_iter().map(|(_, l)| l).collect()),
        }
    }
}

/// One endpoint whose verdict, or one of whose checks' verdicts, changed this round, with each
/// check's verdict and the counts behind it. Only changes are kept: at 10,000 endpoints the
/// counts of every endpoint would be 10,000 allocations per tally for nothing.
struct Counted {
    pool: PoolId,
    endpoint: EndpointId,
    verdict: Verdict,
    checks: Vec<(Verdict, Vec<(Region, RegionCount)>)>,
}

/// One region's datacenters under one check of one pool: for each datacenter, the results of
/// its live nodes whose results are fresh, in the config's endpoint order. Built once per pool
/// and check, so counting an endpoint indexes a slice instead of walking every ballot's nested
/// vectors and ages again (390,000 votes per tally at 10,000 endpoints x 39 probers).
type RegionVotes<'a> = Vec<Vec<&'a [Option<Vote>]>>;

/// `dcs` (one region's datacenters, each with its nodes' ballots) as [`RegionVotes`] for check
/// `ci` of pool `pi`: stale ballots and ballots without that pool and check leave no votes.
fn region_votes<'a>(
    dcs: &[Vec<&'a Ballot>],
    pi: usize,
    ci: usize,
    max_age: Duration,
) -> RegionVotes<'a> {
    dcs.iter()
        .map(|dc| {
            dc.iter()
                .filter(|b| b.age <= max_age)
                .filter_map(|b| b.votes.get(pi).and_then(|c| c.get(ci)).map(|v| &**v))
                .collect()
        })
        .collect()
}

/// One region's datacenters (each with its nodes' ballots) on endpoint `ei` of pool `pi` under
/// check `ci`: the counts (and the region's verdict), the mean RTT of the passing fresh votes,
/// and how many votes were counted.
pub fn count_region(
    dcs: &[Vec<&Ballot>],
    pi: usize,
    ci: usize,
    ei: usize,
    max_age: Duration,
) -> (RegionCount, Option<f64>, usize) {
    count_votes(&region_votes(dcs, pi, ci, max_age), ei)
}

/// [`count_region`] over votes already gathered by [`region_votes`].
fn count_votes(dcs: &RegionVotes<'_>, ei: usize) -> (RegionCount, Option<f64>, usize) {
    let mut count = RegionCount::default();
    let (mut rtt_sum, mut rtt_n, mut counted) = (0.0, 0u32, 0usize);
    for dc in dcs {
        let fresh = dc
            .iter()
            .filter_map(|votes| votes.get(ei).and_then(Option::as_ref));
        let vote = datacenter_vote(fresh.map(|v| {
            counted += 1;
            if let Some(r) = v.rtt_ms.filter(|r| v.healthy && r.is_finite() && *r >= 0.0) {
                rtt_sum += r;
                rtt_n += 1;
            }
            v.healthy
        }));
        match vote {
            Some(true) => count.healthy_dcs = count.healthy_dcs.saturating_add(1),
            Some(false) => count.unhealthy_dcs = count.unhealthy_dcs.saturating_add(1),
            None => count.silent_dcs = count.silent_dcs.saturating_add(1),
        }
    }
    count.verdict = strict_majority(count.healthy_dcs, count.unhealthy_dcs);
    (
        count,
        (rtt_n > 0).then(|| rtt_sum / f64::from(rtt_n)),
        counted,
    )
}

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
    let mut changes = Vec::new();
    let mut votes_counted = 0usize;
    let mut snapshot = HealthSnapshot {
        version: state.version,
        generation: 0,
        pools: vec![PoolHealth::default(); config.pools.len()],
        endpoints: config
            .pools
            .iter()
            .map(|p| vec![EndpointHealth::default(); p.endpoints.len()])
            .collect(),
        fail_static: false,
    };
    // First pass: votes and verdicts.
    let mut pending: Vec<Counted> = Vec::new();
    for (pi, pool) in config.pools.iter().enumerate() {
        if !pool.is_monitored() {
            for e in &mut snapshot.endpoints[pi] {
                e.verdict = Verdict::Healthy; // not health-checked: always healthy
            }
            continue;
        }
        // `votes[ci][ri]`: check `ci`'s votes in the pool's `ri`th region.
        let votes: Vec<Vec<RegionVotes<'_>>> = pool
            .checks
            .iter()
            .enumerate()
            .map(|(ci, c)| {
                let max_age = config
                    .check_monitor(c)
                    .interval
                    .mul_f64(settings.max_age_intervals);
                pool.check_regions
                    .iter()
                    .map(|r| region_votes(&electorate.regions[r.index()], pi, ci, max_age))
                    .collect()
            })
            .collect();
        let mut pool_samples: [(f64, u32); 13] = [(0.0, 0); 13];
        let n_checks = pool.checks.len();
        // Per region (by position in check_regions): each check's verdict there
        // (`regional[ri * n_checks + ci]`), and the deciding checks' RTT samples. Reused for
        // every endpoint of the pool.
        let mut regional: Vec<Option<bool>> = vec![None; pool.check_regions.len() * n_checks];
        let mut samples: Vec<(f64, u32)> = vec![(0.0, 0); pool.check_regions.len()];
        // Each check's verdict and region counts on the endpoint at hand, reused likewise.
        let mut checks: Vec<(Verdict, Vec<(Region, RegionCount)>)> = (0..n_checks)
            .map(|_| {
                (
                    Verdict::Unknown,
                    Vec::with_capacity(pool.check_regions.len()),
                )
            })
            .collect();
        for (ei, endpoint) in pool.endpoints.iter().enumerate() {
            let prev = previous.verdicts[pi][ei];
            let out = &mut snapshot.endpoints[pi][ei];
            if !pool.enabled || !endpoint.enabled {
                out.verdict = prev;
                continue;
            }
            samples.fill((0.0, 0));
            for (ci, check) in pool.checks.iter().enumerate() {
                let (mut healthy_regions, mut unhealthy_regions) = (0, 0);
                let counts = &mut checks[ci].1;
                counts.clear();
                for (ri, &region) in pool.check_regions.iter().enumerate() {
                    let (count, sample, n) = count_votes(&votes[ci][ri], ei);
                    votes_counted += n;
                    match count.verdict {
                        Some(true) => healthy_regions += 1,
                        Some(false) => unhealthy_regions += 1,
                        None => {}
                    }
                    regional[ri * n_checks + ci] = count.verdict;
                    if let (Some(s), true) = (sample, check.role.decides()) {
                        samples[ri].0 += s;
                        samples[ri].1 += 1;
                    }
                    counts.push((region, count));
                }
                let verdict = match strict_majority(healthy_regions, unhealthy_regions) {
                    Some(true) => Verdict::Healthy,
                    Some(false) => Verdict::Unhealthy,
                    None => previous.check_verdicts[pi][ci][ei],
                };
                checks[ci].0 = verdict;
            }
            let roles = || pool.checks.iter().map(|c| c.role);
            for (ri, &region) in pool.check_regions.iter().enumerate() {
                let here = &regional[ri * n_checks..(ri + 1) * n_checks];
                out.regional
                    .set(region, group_verdict(roles().zip(here.iter().copied())));
                let (sum, n) = samples[ri];
                let sample = (n > 0).then(|| sum / f64::from(n));
                let slot = &mut state.endpoint_rtt[pi][ei][region.index()];
                *slot = ewma::fold(*slot, sample, now, settings.rtt_tau);
                if let Some(e) = slot {
                    out.rtt_ms.set(region, Some(e.value));
                }
                if let Some(s) = sample {
                    pool_samples[region.index()].0 += s;
                    pool_samples[region.index()].1 += 1;
                }
            }
            let members = roles().zip(checks.iter().map(|(v, _)| v.known()));
            let verdict = match group_verdict(members) {
                Some(true) => Verdict::Healthy,
                Some(false) => Verdict::Unhealthy,
                None => prev,
            };
            out.verdict = verdict;
            let changed = verdict != prev
                || checks
                    .iter()
                    .enumerate()
                    .any(|(ci, (v, _))| *v != previous.check_verdicts[pi][ci][ei]);
            if changed {
                pending.push(Counted {
                    pool: PoolId(pi),
                    endpoint: EndpointId(ei),
                    verdict,
                    checks: checks.clone(),
                });
            }
        }
        for region in Region::ALL {
            let (sum, n) = pool_samples[region.index()];
            let slot = &mut state.pool_rtt[pi][region.index()];
            *slot = ewma::fold(
                *slot,
                (n > 0).then(|| sum / f64::from(n)),
                now,
                settings.rtt_tau,
            );
            snapshot.pools[pi].rtt_ms.set(region, slot.map(|e| e.value));
        }
    }
    let monitored = config.pools.iter().any(|p| p.is_monitored());
    if votes_counted == 0 && monitored {
        // Fail static: cut off from every prober, keep the last known health.
        for (pi, pool) in config.pools.iter().enumerate() {
            if pool.is_monitored() {
                for (ei, e) in snapshot.endpoints[pi].iter_mut().enumerate() {
                    e.verdict = previous.verdicts[pi][ei];
                    e.regional = RegionMap::default();
                }
            }
        }
        snapshot.fail_static = true;
        return TallyOutcome {
            snapshot,
            changes,
            state: TallyState {
                version: state.version,
                ..previous.clone()
            },
            votes_counted,
            silence: Some(Silence::of(ballots, longest_max_age(config, settings))),
        };
    }
    for Counted {
        pool,
        endpoint,
        verdict,
        checks,
    } in pending
    {
        let grouped = config.pool(pool).monitor_group.is_some();
        let mut members = Vec::new();
        let mut single_counts = Vec::new();
        for (ci, (to, regions)) in checks.into_iter().enumerate() {
            let slot = &mut state.check_verdicts[pool.0][ci][endpoint.0];
            let from = *slot;
            *slot = to;
            if !grouped {
                single_counts = regions;
                continue;
            }
            members.push((to, to != from));
            if to != from {
                changes.push(HealthChange::Check {
                    pool,
                    endpoint,
                    check: ci,
                    from,
                    to,
                    regions,
                });
            }
        }
        let from = previous.verdicts[pool.0][endpoint.0];
        if verdict != from {
            changes.push(HealthChange::Endpoint {
                pool,
                endpoint,
                from,
                to: verdict,
                regions: single_counts,
                members,
            });
        }
        state.verdicts[pool.0][endpoint.0] = verdict;
    }
    for (pi, _) in config.pools.iter().enumerate() {
        let to = snapshot.shown_pool_state(config, PoolId(pi), settings.region);
        let from = previous.pool_states[pi];
        if to != from {
            changes.push(HealthChange::Pool {
                pool: PoolId(pi),
                from,
                to,
            });
        }
        state.pool_states[pi] = to;
    }
    for (id, lb) in config.lbs() {
        let li = id.0;
        let pools = &lb.settings.default_pools;
        let up = pools
            .iter()
            .filter(|&&p| state.pool_states[p.0].takes_traffic())
            .count();
        let to = if up == pools.len() {
            LbState::Healthy
        } else if up > 0 {
            LbState::Degraded
        } else {
            LbState::Critical
        };
        let from = previous.lb_states[li];
        if Some(to) != from {
            changes.push(HealthChange::LoadBalancer { lb: id, from, to });
        }
        state.lb_states[li] = Some(to);
    }
    TallyOutcome {
        snapshot,
        changes,
        state,
        votes_counted,
        silence: None,
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
