//! Counting one round's votes, pool by pool: each endpoint's votes per datacenter, region and
//! check, its verdict, and the RTT averages (the rules are in `mod.rs`).

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, Pool, PoolId};
use lb_core::group_verdict::group_verdict;
use lb_core::health::{EndpointHealth, HealthSnapshot, PoolHealth, Verdict};
use lb_core::region::Region;

use super::{
    datacenter_vote, ewma, strict_majority, Ballot, RegionCount, TallySettings, TallyState, Vote,
};

/// The datacenters of each region, with the ballots of their live nodes.
pub(super) struct Electorate<'a> {
    /// `regions[r]` = the region's datacenters, each with its ballots.
    regions: [Vec<Vec<&'a Ballot>>; 13],
}

impl<'a> Electorate<'a> {
    pub(super) fn new(ballots: &'a [Ballot]) -> Self {
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
pub(super) struct Counted {
    pub pool: PoolId,
    pub endpoint: EndpointId,
    pub verdict: Verdict,
    pub checks: Vec<(Verdict, Vec<(Region, RegionCount)>)>,
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

/// What one round gathers over every pool.
#[derive(Default)]
pub(super) struct Round {
    /// Votes counted (fresh, from live nodes).
    pub votes_counted: usize,
    /// The endpoints whose verdict or one of whose checks' verdicts changed.
    pub changed: Vec<Counted>,
}

/// One pool of one round, with what its counting reads.
pub(super) struct PoolCount<'a> {
    pub config: &'a Config,
    pub pool: &'a Pool,
    pub id: PoolId,
    pub electorate: &'a Electorate<'a>,
    pub previous: &'a TallyState,
    pub settings: &'a TallySettings,
    pub now: Instant,
}

/// Buffers reused for every endpoint of a pool.
struct Scratch {
    /// Each check's verdict in each region on the endpoint at hand, by position in
    /// `check_regions`: `regional[ri * n_checks + ci]`.
    regional: Vec<Option<bool>>,
    /// Per region, the deciding checks' RTT samples (sum, count) on the endpoint at hand.
    samples: Vec<(f64, u32)>,
    /// Each check's verdict and region counts on the endpoint at hand.
    checks: Vec<(Verdict, Vec<(Region, RegionCount)>)>,
    /// Per region, the endpoints' mean RTTs (sum, count) for the pool's average.
    pool_samples: [(f64, u32); 13],
}

impl Scratch {
    fn new(pool: &Pool) -> Self {
        let regions = pool.check_regions.len();
        Scratch {
            regional: vec![None; regions * pool.checks.len()],
            samples: vec![(0.0, 0); regions],
            checks: (0..pool.checks.len())
                .map(|_| (Verdict::Unknown, Vec::with_capacity(regions)))
                .collect(),
            pool_samples: [(0.0, 0); 13],
        }
    }
}

impl<'a> PoolCount<'a> {
    /// Counts every endpoint of the pool into `snapshot` and `state`; an unmonitored pool's
    /// endpoints are healthy.
    pub fn count(&self, state: &mut TallyState, snapshot: &mut HealthSnapshot, round: &mut Round) {
        let pi = self.id.0;
        if !self.pool.is_monitored() {
            for e in &mut snapshot.endpoints[pi] {
                e.verdict = Verdict::Healthy; // not health-checked: always healthy
            }
            return;
        }
        let votes = self.votes();
        let mut scratch = Scratch::new(self.pool);
        for (ei, out) in snapshot.endpoints[pi].iter_mut().enumerate() {
            self.count_endpoint(EndpointId(ei), &votes, &mut scratch, state, out, round);
        }
        self.fold_pool_rtt(&scratch.pool_samples, state, &mut snapshot.pools[pi]);
    }

    /// `votes[ci][ri]`: check `ci`'s votes in the pool's `ri`th region.
    fn votes(&self) -> Vec<Vec<RegionVotes<'a>>> {
        let pi = self.id.0;
        self.pool
            .checks
            .iter()
            .enumerate()
            .map(|(ci, c)| {
                let max_age = self
                    .config
                    .check_monitor(c)
                    .interval
                    .mul_f64(self.settings.max_age_intervals);
                self.pool
                    .check_regions
                    .iter()
                    .map(|r| region_votes(&self.electorate.regions[r.index()], pi, ci, max_age))
                    .collect()
            })
            .collect()
    }

    /// One endpoint: each check's verdict, the regional verdicts and RTTs, the endpoint's
    /// verdict (undecided keeps the previous one), kept in `round` when anything changed.
    fn count_endpoint(
        &self,
        endpoint: EndpointId,
        votes: &[Vec<RegionVotes<'_>>],
        scratch: &mut Scratch,
        state: &mut TallyState,
        out: &mut EndpointHealth,
        round: &mut Round,
    ) {
        let (pi, ei) = (self.id.0, endpoint.0);
        let prev = self.previous.verdicts[pi][ei];
        if !self.pool.enabled || !self.pool.endpoints[ei].enabled {
            out.verdict = prev;
            return;
        }
        scratch.samples.fill((0.0, 0));
        for ci in 0..self.pool.checks.len() {
            round.votes_counted += self.count_check(ci, ei, votes, scratch);
        }
        self.fold_regions(ei, scratch, state, out);
        let roles = self.pool.checks.iter().map(|c| c.role);
        let members = roles.zip(scratch.checks.iter().map(|(v, _)| v.known()));
        let verdict = match group_verdict(members) {
            Some(true) => Verdict::Healthy,
            Some(false) => Verdict::Unhealthy,
            None => prev,
        };
        out.verdict = verdict;
        let checks_changed = scratch
            .checks
            .iter()
            .enumerate()
            .any(|(ci, (v, _))| *v != self.previous.check_verdicts[pi][ci][ei]);
        if verdict != prev || checks_changed {
            round.changed.push(Counted {
                pool: self.id,
                endpoint,
                verdict,
                checks: scratch.checks.clone(),
            });
        }
    }

    /// Check `ci` on endpoint `ei`: its verdict in each region and over the regions (a tie or
    /// none keeps the previous one), into `scratch`; returns the votes counted.
    fn count_check(
        &self,
        ci: usize,
        ei: usize,
        votes: &[Vec<RegionVotes<'_>>],
        scratch: &mut Scratch,
    ) -> usize {
        let n_checks = self.pool.checks.len();
        let decides = self.pool.checks[ci].role.decides();
        let (mut healthy_regions, mut unhealthy_regions, mut counted) = (0, 0, 0);
        let counts = &mut scratch.checks[ci].1;
        counts.clear();
        for (ri, &region) in self.pool.check_regions.iter().enumerate() {
            let (count, sample, n) = count_votes(&votes[ci][ri], ei);
            counted += n;
            match count.verdict {
                Some(true) => healthy_regions += 1,
                Some(false) => unhealthy_regions += 1,
                None => {}
            }
            scratch.regional[ri * n_checks + ci] = count.verdict;
            if let (Some(s), true) = (sample, decides) {
                scratch.samples[ri].0 += s;
                scratch.samples[ri].1 += 1;
            }
            counts.push((region, count));
        }
        scratch.checks[ci].0 = match strict_majority(healthy_regions, unhealthy_regions) {
            Some(true) => Verdict::Healthy,
            Some(false) => Verdict::Unhealthy,
            None => self.previous.check_verdicts[self.id.0][ci][ei],
        };
        counted
    }

    /// Endpoint `ei`'s verdict in each region (its checks combined) and its RTT average there,
    /// its samples added to the pool's.
    fn fold_regions(
        &self,
        ei: usize,
        scratch: &mut Scratch,
        state: &mut TallyState,
        out: &mut EndpointHealth,
    ) {
        let n_checks = self.pool.checks.len();
        for (ri, &region) in self.pool.check_regions.iter().enumerate() {
            let here = &scratch.regional[ri * n_checks..(ri + 1) * n_checks];
            let roles = self.pool.checks.iter().map(|c| c.role);
            out.regional
                .set(region, group_verdict(roles.zip(here.iter().copied())));
            let (sum, n) = scratch.samples[ri];
            let sample = (n > 0).then(|| sum / f64::from(n));
            let slot = &mut state.endpoint_rtt[self.id.0][ei][region.index()];
            *slot = ewma::fold(*slot, sample, self.now, self.settings.rtt_tau);
            if let Some(e) = slot {
                out.rtt_ms.set(region, Some(e.value));
            }
            if let Some(s) = sample {
                scratch.pool_samples[region.index()].0 += s;
                scratch.pool_samples[region.index()].1 += 1;
            }
        }
    }

    /// The pool's RTT average per region, from its endpoints' means this round.
    fn fold_pool_rtt(
        &self,
        samples: &[(f64, u32); 13],
        state: &mut TallyState,
        out: &mut PoolHealth,
    ) {
        for region in Region::ALL {
            let (sum, n) = samples[region.index()];
            let slot = &mut state.pool_rtt[self.id.0][region.index()];
            *slot = ewma::fold(
                *slot,
                (n > 0).then(|| sum / f64::from(n)),
                self.now,
                self.settings.rtt_tau,
            );
            out.rtt_ms.set(region, slot.map(|e| e.value));
        }
    }
}
