//! `GET /status`: every load balancer, pool and endpoint with its state and the votes behind
//! it (per region, per datacenter: healthy, RTT, code, reason — the shape of Cloudflare's pool
//! health `pop_health`), EWMA RTTs, whether the aggregator is static.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use lb_core::clock::unix_secs;
use lb_core::config::{Config, Endpoint, EndpointId, Pool, PoolId};
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::region::{Region, RegionMap};
use serde::Serialize;

use crate::events::RegionVotes;
use crate::shared::{InForce, Shared};
use crate::tally::{Ballot, LbState};

#[derive(Serialize)]
pub(super) struct Status {
    /// The config generation in force (1 at start, one more per reload that changed it).
    config_generation: u64,
    config_hash: String,
    config_loaded_at: u64,
    snapshot_version: u64,
    fail_static: bool,
    /// Why the tally counted no vote, while it is static (`tally/silence.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    fail_static_cause: Option<crate::tally::Silence>,
    votes_counted: usize,
    /// The mesh config: this node's part, the generation in force, the primary
    /// (`GET /config` of the API).
    #[serde(skip_serializing_if = "Option::is_none")]
    mesh_config: Option<serde_json::Value>,
    load_balancers: Vec<LbStatus>,
    pools: Vec<PoolStatus>,
}

#[derive(Serialize)]
struct LbStatus {
    name: String,
    state: &'static str,
    proxied: bool,
    /// "http", "tcp" or "udp".
    protocol: &'static str,
    /// Layer 4: the ports listened on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    listen: Vec<u16>,
}

#[derive(Serialize)]
struct PoolStatus {
    name: String,
    state: &'static str,
    rtt_ms: BTreeMap<String, f64>,
    endpoints: Vec<EndpointStatus>,
}

#[derive(Serialize)]
struct EndpointStatus {
    name: String,
    address: String,
    enabled: bool,
    healthy: Option<bool>,
    verdict: &'static str,
    rtt_ms: BTreeMap<String, f64>,
    /// Drained (no new traffic) since (unix seconds): through `/drain`, or by the config.
    #[serde(skip_serializing_if = "Option::is_none")]
    drained_since: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drain: Option<DrainStatus>,
    regions: Vec<RegionVotes>,
    /// A monitor group endpoint: each enabled member's own verdict with the votes behind it
    /// (the endpoint's `regions` is then empty: its verdict is the members', combined).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    members: Vec<MemberStatus>,
}

#[derive(Serialize)]
struct MemberStatus {
    monitor: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    verdict: &'static str,
    regions: Vec<RegionVotes>,
}

/// A drain in progress: who made it, and how long its sessions still hold.
#[derive(Serialize)]
struct DrainStatus {
    since: u64,
    /// `"api"` (`/drain`, here or on another aggregator), `"config"` (`enabled = false`), or
    /// both.
    by: Vec<&'static str>,
    /// The longest `drain_duration` of the load balancers that use the pool.
    drain_duration: u32,
    /// Seconds until its sessions end (0: only the exclusion from new traffic is left).
    seconds_left: u64,
}

/// The drain of one endpoint, when it has one.
fn drain_status(
    config: &Config,
    pool: PoolId,
    since: Option<u64>,
    api: bool,
    by_config: bool,
    now: u64,
) -> Option<DrainStatus> {
    let since = since?;
    let drain_duration = config
        .load_balancers
        .iter()
        .filter(|lb| lb.settings.uses_pool(pool))
        .map(|lb| lb.settings.session_affinity.drain_duration)
        .max()
        .unwrap_or(0);
    let by = [(api, "api"), (by_config, "config")]
        .into_iter()
        .filter_map(|(yes, name)| yes.then_some(name))
        .collect();
    Some(DrainStatus {
        since,
        by,
        drain_duration,
        seconds_left: (since + u64::from(drain_duration)).saturating_sub(now),
    })
}

/// The status of the config in force, all of it read from one load of each part: the
/// pools' and the load balancers' states, then the aggregator's own.
pub(super) fn status(shared: &Shared) -> Status {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let snapshot = in_force.generation.snapshot();
    let ballots = in_force.ballots.load();
    let lb_states = in_force.lb_states.load();
    let check_verdicts = in_force.check_verdicts.load();
    let view = View {
        shared,
        in_force: &in_force,
        config,
        snapshot: &snapshot,
        ballots: &ballots,
        check_verdicts: &check_verdicts,
        region: shared.setup.settings.region,
        now: unix_secs(),
        api_drained: api_drained(shared, &in_force),
    };
    let pools = config
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| view.pool(PoolId(pi), p))
        .collect();
    Status {
        config_generation: in_force.generation.id(),
        config_hash: in_force.config_hash.clone(),
        config_loaded_at: in_force.loaded_at,
        snapshot_version: snapshot.version,
        fail_static: snapshot.fail_static,
        fail_static_cause: snapshot
            .fail_static
            .then(|| *shared.latest.silence.load_full())
            .flatten(),
        votes_counted: shared.latest.votes_counted.load(Ordering::Relaxed),
        mesh_config: Some(crate::api::config_state(&shared.control)),
        load_balancers: lb_statuses(config, &lb_states),
        pools,
    }
}

/// The endpoints drained through the API. The tables are kept by name-carried positions of
/// their own config, which is the one in force once the loop has adopted it: until then,
/// none.
fn api_drained(shared: &Shared, in_force: &InForce) -> BTreeSet<(PoolId, EndpointId)> {
    shared
        .drains
        .tables
        .lock()
        .ok()
        .filter(|t| Arc::ptr_eq(&t.config, in_force.config()))
        .map(|t| t.in_force.keys().copied().collect::<BTreeSet<_>>())
        .unwrap_or_default()
}

/// Each load balancer's state as the tally last judged it, and what it serves.
fn lb_statuses(config: &Config, lb_states: &[Option<LbState>]) -> Vec<LbStatus> {
    config
        .load_balancers
        .iter()
        .enumerate()
        .map(|(i, lb)| LbStatus {
            name: lb.name.clone(),
            state: lb_states
                .get(i)
                .copied()
                .flatten()
                .map_or("unknown", LbState::name),
            proxied: lb.proxied,
            protocol: lb.layer4.as_ref().map_or("http", |l| l.transport.name()),
            listen: lb
                .layer4
                .as_ref()
                .map(|l| l.ports.iter().map(|p| p.listen).collect())
                .unwrap_or_default(),
        })
        .collect()
}

/// An EWMA RTT per region, by region code.
fn rtt_by_code(rtt_ms: &RegionMap<f64>) -> BTreeMap<String, f64> {
    rtt_ms
        .iter()
        .map(|(r, v)| (r.code().to_string(), v))
        .collect()
}

/// What one `/status` reads of the config in force and its health, loaded once.
struct View<'a> {
    shared: &'a Shared,
    in_force: &'a InForce,
    config: &'a Config,
    snapshot: &'a HealthSnapshot,
    ballots: &'a [Ballot],
    /// Each check's own verdict, `[pool][check][endpoint]`.
    check_verdicts: &'a [Vec<Vec<Verdict>>],
    /// This aggregator's region, whose view of regional health a pool's state shows.
    region: Region,
    now: u64,
    api_drained: BTreeSet<(PoolId, EndpointId)>,
}

impl View<'_> {
    /// A pool's state, RTTs and endpoints.
    fn pool(&self, pool: PoolId, p: &Pool) -> PoolStatus {
        let state = self
            .snapshot
            .shown_pool_state(self.config, pool, self.region);
        PoolStatus {
            name: p.name.clone(),
            state: state.name(),
            rtt_ms: rtt_by_code(&self.snapshot.pool(pool).rtt_ms),
            endpoints: p
                .endpoints
                .iter()
                .enumerate()
                .map(|(ei, e)| self.endpoint(pool, p, EndpointId(ei), e))
                .collect(),
        }
    }

    /// An endpoint's verdict, drain, RTTs and the votes behind its verdict (a monitor group's
    /// by member).
    fn endpoint(
        &self,
        pool: PoolId,
        p: &Pool,
        endpoint: EndpointId,
        e: &Endpoint,
    ) -> EndpointStatus {
        let h = self.snapshot.endpoint(pool, endpoint);
        EndpointStatus {
            name: e.name.clone(),
            address: e.address.to_string(),
            enabled: e.enabled,
            healthy: match h.verdict {
                Verdict::Healthy => Some(true),
                Verdict::Unhealthy => Some(false),
                Verdict::Unknown => None,
            },
            verdict: h.verdict.name(),
            drained_since: h.disabled_at,
            drain: drain_status(
                self.config,
                pool,
                h.disabled_at,
                self.api_drained.contains(&(pool, endpoint)),
                self.in_force.config_drains.contains_key(&(pool, endpoint)),
                self.now,
            ),
            rtt_ms: rtt_by_code(&h.rtt_ms),
            regions: self
                .shared
                .monitor_votes(self.config, self.ballots, pool, endpoint),
            members: self.members(pool, p, endpoint),
        }
    }

    /// For a monitor group's endpoint, each member's verdict and votes; else none.
    fn members(&self, pool: PoolId, p: &Pool, endpoint: EndpointId) -> Vec<MemberStatus> {
        p.checks
            .iter()
            .enumerate()
            .filter(|_| p.monitor_group.is_some())
            .map(|(ci, c)| {
                let m = self.config.check_monitor(c);
                MemberStatus {
                    monitor: m.name.clone(),
                    kind: m.kind.type_name(),
                    role: c.role.name(),
                    verdict: self
                        .check_verdicts
                        .get(pool.0)
                        .and_then(|p| p.get(ci))
                        .and_then(|v| v.get(endpoint.0))
                        .copied()
                        .unwrap_or_default()
                        .name(),
                    regions: self.shared.endpoint_votes(
                        self.config,
                        self.ballots,
                        pool,
                        ci,
                        endpoint,
                    ),
                }
            })
            .collect()
    }
}
