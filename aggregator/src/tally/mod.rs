//! The tally (docs/design.md#the-tally): a pure function from the configuration, every prober's last
//! ballot and the previous state to the health snapshot the steering engine reads, the
//! health changes to log, and the next state.
//!
//! - A result older than `max_age_intervals` of its monitor's interval, or from a node the
//!   failure detector holds dead, is not a vote.
//! - A region's verdict: a strict majority of its datacenters that voted (a datacenter with
//!   several nodes votes as their majority); a tie or no vote is no verdict.
//! - An endpoint's verdict: a strict majority of the regions with a verdict; a tie or none keeps
//!   the previous state; never voted on is Unknown.
//! - No vote at all (the aggregator is cut off from every prober): everything stays as it was
//!   ("fail static"), flagged so, and nothing fails over.

pub mod ballot;
mod carry_over;
mod ewma;
mod majority;

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, LbId, PoolId};
use lb_core::health::{EndpointHealth, HealthSnapshot, PoolHealth, PoolState, Verdict};
use lb_core::region::{Region, RegionMap};

pub use ballot::{Ballot, ProberId, Vote};
pub use carry_over::removed as removed_endpoints;
pub use ewma::Ewma;
pub use majority::{datacenter_vote, strict_majority};

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
            && self.lb_states.len() == config.load_balancers.len()
    }

    pub fn verdict(&self, pool: PoolId, endpoint: EndpointId) -> Verdict {
        self.verdicts
            .get(pool.0)
            .and_then(|v| v.get(endpoint.0))
            .copied()
            .unwrap_or_default()
    }
}

/// How one region saw one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegionCount {
    pub healthy_dcs: u8,
    pub unhealthy_dcs: u8,
    /// Datacenters whose nodes sent nothing fresh (dead, stale, or tied).
    pub silent_dcs: u8,
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

/// One endpoint's verdict this round, with the counts behind it.
struct Counted {
    pool: PoolId,
    endpoint: EndpointId,
    verdict: Verdict,
    regions: Vec<(Region, RegionCount)>,
}

/// One region's datacenters (each with its nodes' ballots) on endpoint `ei` of pool `pi`: the
/// counts (and the region's verdict), the mean RTT of the passing fresh votes, and how many
/// votes were counted.
pub fn count_region(
    dcs: &[Vec<&Ballot>],
    pi: usize,
    ei: usize,
    max_age: Duration,
) -> (RegionCount, Option<f64>, usize) {
    let mut count = RegionCount::default();
    let (mut rtt_sum, mut rtt_n, mut counted) = (0.0, 0u32, 0usize);
    for dc in dcs {
        let fresh = dc.iter().filter_map(|b| {
            b.votes
                .get(pi)
                .and_then(|v| v.get(ei))
                .and_then(Option::as_ref)
                .filter(|v| v.age <= max_age)
        });
        let vote = datacenter_vote(fresh.map(|v| {
            counted += 1;
            if let Some(r) = v.rtt_ms.filter(|r| v.healthy && r.is_finite() && *r >= 0.0) {
                rtt_sum += r;
                rtt_n += 1;
            }
            v.healthy
        }));
        match vote {
            Some(true) => count.healthy_dcs += 1,
            Some(false) => count.unhealthy_dcs += 1,
            None => count.silent_dcs += 1,
        }
    }
    count.verdict = strict_majority(count.healthy_dcs.into(), count.unhealthy_dcs.into());
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
        let Some(monitor) = pool.monitor.and_then(|m| config.monitors.get(m)) else {
            for e in &mut snapshot.endpoints[pi] {
                e.verdict = Verdict::Healthy; // not health-checked: always healthy
            }
            continue;
        };
        let max_age = monitor.interval.mul_f64(settings.max_age_intervals);
        let mut pool_samples: [(f64, u32); 13] = [(0.0, 0); 13];
        for (ei, endpoint) in pool.endpoints.iter().enumerate() {
            let prev = previous.verdicts[pi][ei];
            let out = &mut snapshot.endpoints[pi][ei];
            if !pool.enabled || !endpoint.enabled {
                out.verdict = prev;
                continue;
            }
            let (mut healthy_regions, mut unhealthy_regions) = (0, 0);
            let mut counts: Vec<(Region, RegionCount)> = Vec::new();
            for &region in &pool.check_regions {
                let (count, sample, n) =
                    count_region(&electorate.regions[region.index()], pi, ei, max_age);
                votes_counted += n;
                match count.verdict {
                    Some(true) => healthy_regions += 1,
                    Some(false) => unhealthy_regions += 1,
                    None => {}
                }
                out.regional.set(region, count.verdict);
                let slot = &mut state.endpoint_rtt[pi][ei][region.index()];
                *slot = ewma::fold(*slot, sample, now, settings.rtt_tau);
                if let Some(e) = slot {
                    out.rtt_ms.set(region, Some(e.value));
                }
                if let Some(s) = sample {
                    pool_samples[region.index()].0 += s;
                    pool_samples[region.index()].1 += 1;
                }
                counts.push((region, count));
            }
            let verdict = match strict_majority(healthy_regions, unhealthy_regions) {
                Some(true) => Verdict::Healthy,
                Some(false) => Verdict::Unhealthy,
                None => prev,
            };
            out.verdict = verdict;
            pending.push(Counted {
                pool: PoolId(pi),
                endpoint: EndpointId(ei),
                verdict,
                regions: counts,
            });
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
    let monitored = config.pools.iter().any(|p| p.monitor.is_some());
    if votes_counted == 0 && monitored {
        // Fail static: cut off from every prober, keep the last known health.
        for (pi, pool) in config.pools.iter().enumerate() {
            if pool.monitor.is_some() {
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
        };
    }
    for Counted {
        pool,
        endpoint,
        verdict,
        regions,
    } in pending
    {
        let from = previous.verdicts[pool.0][endpoint.0];
        if verdict != from {
            changes.push(HealthChange::Endpoint {
                pool,
                endpoint,
                from,
                to: verdict,
                regions,
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
    }
}

#[cfg(test)]
mod tests;
