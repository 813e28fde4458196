//! `GET /status`: every load balancer, pool and endpoint with its state and the votes behind
//! it (per region, per datacenter: healthy, RTT, code, reason — the shape of Cloudflare's pool
//! health `pop_health`), EWMA RTTs, whether the aggregator is static.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use lb_core::config::{EndpointId, PoolId};
use lb_core::health::Verdict;
use serde::Serialize;

use crate::events::RegionVotes;
use crate::shared::Shared;
use crate::tally::LbState;

#[derive(Serialize)]
pub(super) struct Status {
    snapshot_version: u64,
    fail_static: bool,
    votes_counted: usize,
    load_balancers: Vec<LbStatus>,
    pools: Vec<PoolStatus>,
}

#[derive(Serialize)]
struct LbStatus {
    name: String,
    state: &'static str,
    proxied: bool,
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
    /// Drained through `/drain` since (unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    drained_since: Option<u64>,
    regions: Vec<RegionVotes>,
}

pub(super) fn status(shared: &Shared) -> Status {
    let config = shared.config();
    let snapshot = shared.latest.snapshot.load();
    let ballots = shared.latest.ballots.load();
    let lb_states = shared.latest.lb_states.load();
    let region = shared.setup.settings.region;
    let pools = config
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| PoolStatus {
            name: p.name.clone(),
            state: snapshot.pool_state(config, PoolId(pi), region).name(),
            rtt_ms: snapshot
                .pool(PoolId(pi))
                .rtt_ms
                .iter()
                .map(|(r, v)| (r.code().to_string(), v))
                .collect(),
            endpoints: p
                .endpoints
                .iter()
                .enumerate()
                .map(|(ei, e)| {
                    let h = snapshot.endpoint(PoolId(pi), EndpointId(ei));
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
                        rtt_ms: h
                            .rtt_ms
                            .iter()
                            .map(|(r, v)| (r.code().to_string(), v))
                            .collect(),
                        regions: if p.monitor.is_some() {
                            shared.endpoint_votes(&ballots, PoolId(pi), EndpointId(ei))
                        } else {
                            Vec::new()
                        },
                    }
                })
                .collect(),
        })
        .collect();
    Status {
        snapshot_version: snapshot.version,
        fail_static: snapshot.fail_static,
        votes_counted: shared.latest.votes_counted.load(Ordering::Relaxed),
        load_balancers: config
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
            })
            .collect(),
        pools,
    }
}
