//! What the console reads, under `/console/` (the admin API's token rules apply):
//!
//! - `GET /console/overview`: this PoP, the mesh per region, every load balancer with its
//!   pools in steering order, every pool with its state, healthy and total endpoints and EWMA
//!   RTT from this region. Its `ETag` is a hash of the states it shows (`state_tag`), so a
//!   console polling with `If-None-Match` costs a `304` while nothing changed.
//! - `GET /console/grid?pool=&state=&offset=&limit=`: a page of endpoints (at most
//!   [`MAX_ROWS`]), each with its verdict and each region's.
//! - `GET /console/votes?pool=&endpoint=`: the votes behind one endpoint's verdict, region by
//!   region and datacenter by datacenter.
//! - `GET /console/pool?name=`: one pool's endpoints with weight, drain, verdict and region
//!   verdicts, and its EWMA RTT per region, now and over the last hour (`history`).

use crate::private_reach::PrivateReach;
use std::collections::BTreeMap;

use http::StatusCode;
use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::Verdict;
use lb_core::Region;
use mesh::Role;
use serde_json::{json, Value};

use crate::events::RegionVotes;
use crate::shared::Shared;
use crate::tally::LbState;

/// The most endpoints one grid page holds.
pub const MAX_ROWS: usize = 500;

/// A view's answer: its status and JSON, and for the overview its version.
pub struct View {
    pub status: StatusCode,
    pub body: Value,
    pub etag: Option<String>,
}

impl View {
    fn ok(body: Value) -> View {
        View {
            status: StatusCode::OK,
            body,
            etag: None,
        }
    }

    fn refused(status: StatusCode, message: String) -> View {
        View {
            status,
            body: json!({ "error": message }),
            etag: None,
        }
    }
}

/// The view of `path` (`/console/...`) with `query`; `None` for a path that is not one.
pub fn view(shared: &Shared, path: &str, query: &str) -> Option<View> {
    let args: BTreeMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    Some(match path.strip_prefix("/console/")? {
        "overview" => overview(shared),
        "grid" => grid(shared, &args),
        "votes" => votes(shared, &args),
        "pool" => pool(shared, &args),
        _ => View::refused(
            StatusCode::NOT_FOUND,
            "no such view: /console/overview, /console/grid, /console/votes, /console/pool".into(),
        ),
    })
}

fn verdict_of(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "healthy",
        Some(false) => "unhealthy",
        None => "unknown",
    }
}

/// The pools a load balancer uses, in the order it tries them: defaults, then fallback, then
/// those only some regions or countries use.
fn pools_in_order(lb: &lb_core::config::LoadBalancer) -> Vec<(PoolId, &'static str)> {
    let s = &lb.settings;
    let mut out: Vec<(PoolId, &'static str)> = Vec::new();
    let mut add = |p: PoolId, role: &'static str| {
        if !out.iter().any(|(q, _)| *q == p) {
            out.push((p, role));
        }
    };
    for p in &s.default_pools {
        add(*p, "default");
    }
    if let Some(p) = s.fallback_pool {
        add(p, "fallback");
    }
    for p in s.region_pools.values().flatten() {
        add(*p, "region");
    }
    for p in s.country_pools.values().flatten() {
        add(*p, "country");
    }
    for p in s.pop_pools.values().flatten() {
        add(*p, "pop");
    }
    out
}

fn overview(shared: &Shared) -> View {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let snapshot = in_force.generation.snapshot();
    let region = shared.setup.settings.region;
    let lb_states = in_force.lb_states.load();
    let members = shared.latest.members.load();
    let mut regions: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    for m in members.iter().filter(|m| m.role == Role::Prober) {
        if let Some(r) = m.region {
            let entry = regions.entry(r.code()).or_default();
            entry.1 += 1;
            if m.alive {
                entry.0 += 1;
            }
        }
    }
    let pool_state = |p: PoolId| snapshot.shown_pool_state(config, p, region).name();
    let load_balancers: Vec<Value> = config
        .load_balancers
        .iter()
        .enumerate()
        .map(|(i, lb)| {
            let pools: Vec<Value> = pools_in_order(lb)
                .into_iter()
                .map(|(p, role)| json!({ "name": config.pool(p).name, "role": role, "state": pool_state(p) }))
                .collect();
            json!({
                "name": lb.name,
                "state": lb_states.get(i).copied().flatten().map_or("unknown", LbState::name),
                "proxied": lb.proxied,
                "protocol": lb.layer4.as_ref().map_or("http", |l| l.transport.name()),
                "steering_policy": lb.settings.steering_policy.name(),
                "pools": pools,
            })
        })
        .collect();
    let pools: Vec<Value> = config
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| {
            let health = |ei: usize| snapshot.endpoint(PoolId(pi), EndpointId(ei));
            let healthy = (0..p.endpoints.len())
                .filter(|&ei| health(ei).verdict == Verdict::Healthy)
                .count();
            let drained = (0..p.endpoints.len())
                .filter(|&ei| health(ei).disabled_at.is_some())
                .count();
            json!({
                "name": p.name,
                "state": pool_state(PoolId(pi)),
                "healthy": healthy,
                "drained": drained,
                "enabled": p.enabled,
                "total": p.endpoints.len(),
                "rtt_ms": snapshot.pool(PoolId(pi)).rtt_ms.get(region),
            })
        })
        .collect();
    let body = json!({
            "pop": {
                "node_id": shared.setup.node_id,
                "region": region.code(),
                "config_generation": in_force.generation.id(),
                "config_hash": in_force.config_hash,
                "snapshot_version": snapshot.version,
                "fail_static": snapshot.fail_static,
                "mesh_config": crate::api::config_state(&shared.control),
            },
            "mesh": {
                "probers": regions.iter().map(|(r, (live, all))| (r.to_string(), json!({ "live": live, "total": all }))).collect::<serde_json::Map<_, _>>(),
                "aggregators": members.iter().filter(|m| m.role == Role::Aggregator && m.alive).count(),
                "drift": members.iter().filter(|m| m.alive && m.config_drift).count(),
            },
            "load_balancers": load_balancers,
            "pools": pools,
    });
    let etag = Some(state_tag(&body));
    View {
        status: StatusCode::OK,
        body,
        etag,
    }
}

/// The overview's version for `If-None-Match`: a hash of what it says, leaving out what moves
/// on every tally without a change of state (the snapshot's version, EWMA RTTs). A console
/// polling every second is answered `304` until a state, a count, a drain or the config
/// changes; it asks without the tag now and then to refresh the RTTs (`app.js`).
fn state_tag(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut stable = body.clone();
    if let Some(pop) = stable.get_mut("pop").and_then(Value::as_object_mut) {
        pop.remove("snapshot_version");
    }
    for pool in stable["pools"].as_array_mut().into_iter().flatten() {
        if let Some(p) = pool.as_object_mut() {
            p.remove("rtt_ms");
        }
    }
    let digest = Sha256::digest(stable.to_string().as_bytes());
    format!("\"{}\"", meshlb_node::control::signing::hex(&digest[..8]))
}

/// Each region's verdict on an endpoint, from its votes.
fn region_verdicts(votes: &[RegionVotes]) -> serde_json::Map<String, Value> {
    Region::ALL
        .iter()
        .map(|r| {
            let v = votes
                .iter()
                .find(|v| v.region == r.code())
                .and_then(|v| v.verdict);
            let shown = if votes.iter().any(|v| v.region == r.code()) {
                verdict_of(v)
            } else {
                "none"
            };
            (r.code().to_string(), Value::String(shown.into()))
        })
        .collect()
}

fn grid(shared: &Shared, args: &BTreeMap<String, String>) -> View {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let snapshot = in_force.generation.snapshot();
    let ballots = in_force.ballots.load();
    let number = |k: &str, default: usize| args.get(k).map_or(Ok(default), |v| v.parse::<usize>());
    let (Ok(offset), Ok(limit)) = (number("offset", 0), number("limit", 100)) else {
        return View::refused(
            StatusCode::BAD_REQUEST,
            "offset and limit are numbers".into(),
        );
    };
    let limit = limit.clamp(1, MAX_ROWS);
    let pool = args.get("pool").filter(|p| !p.is_empty());
    let state = args.get("state").filter(|s| !s.is_empty());
    let matching = config
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| pool.is_none_or(|name| p.name == *name))
        .flat_map(|(pi, p)| (0..p.endpoints.len()).map(move |ei| (PoolId(pi), EndpointId(ei))))
        .filter(|(p, e)| state.is_none_or(|s| snapshot.endpoint(*p, *e).verdict.name() == s));
    let mut total = 0;
    let mut rows = Vec::new();
    for (p, e) in matching {
        total += 1;
        if total <= offset || rows.len() >= limit {
            continue;
        }
        let pool = config.pool(p);
        let endpoint = &pool.endpoints[e.0];
        let votes = shared.monitor_votes(config, &ballots, p, e);
        rows.push(json!({
            "pool": pool.name,
            "endpoint": endpoint.name,
            "address": endpoint.address.to_string(),
            "enabled": endpoint.enabled,
            "drained": snapshot.endpoint(p, e).disabled_at.is_some(),
            "verdict": snapshot.endpoint(p, e).verdict.name(),
            "regions": region_verdicts(&votes),
        }));
    }
    View::ok(json!({ "total": total, "offset": offset, "limit": limit, "rows": rows }))
}

/// The pool and endpoint `args` name, as positions of `config`.
fn endpoint_named(
    config: &Config,
    args: &BTreeMap<String, String>,
) -> Result<(PoolId, Option<EndpointId>), View> {
    let name = args
        .get("pool")
        .or_else(|| args.get("name"))
        .map(String::as_str)
        .unwrap_or("");
    let p = config
        .pool_by_name(name)
        .ok_or_else(|| View::refused(StatusCode::NOT_FOUND, format!("no pool `{name}`")))?;
    let Some(endpoint) = args.get("endpoint") else {
        return Ok((p, None));
    };
    let e = config
        .pool(p)
        .endpoints
        .iter()
        .position(|e| e.name == *endpoint)
        .ok_or_else(|| {
            View::refused(
                StatusCode::NOT_FOUND,
                format!("no endpoint `{endpoint}` in pool `{name}`"),
            )
        })?;
    Ok((p, Some(EndpointId(e))))
}

fn votes(shared: &Shared, args: &BTreeMap<String, String>) -> View {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let ballots = in_force.ballots.load();
    match endpoint_named(config, args) {
        Err(refused) => refused,
        Ok((_, None)) => View::refused(StatusCode::BAD_REQUEST, "endpoint: required".into()),
        Ok((p, Some(e))) => {
            let checks = config.pool(p).checks.len().max(1);
            let by_check: Vec<Value> = (0..checks)
                .map(|c| {
                    json!({
                        "monitor": config.pool(p).checks.get(c).map(|c| config.check_monitor(c).name.clone()),
                        "regions": shared.endpoint_votes(config, &ballots, p, c, e),
                    })
                })
                .collect();
            View::ok(json!({ "checks": by_check }))
        }
    }
}

fn pool(shared: &Shared, args: &BTreeMap<String, String>) -> View {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let snapshot = in_force.generation.snapshot();
    let ballots = in_force.ballots.load();
    let region = shared.setup.settings.region;
    let p = match endpoint_named(config, args) {
        Err(refused) => return refused,
        Ok((p, _)) => p,
    };
    let pool = config.pool(p);
    let endpoints: Vec<Value> = pool
        .endpoints
        .iter()
        .enumerate()
        .map(|(ei, e)| {
            let h = snapshot.endpoint(p, EndpointId(ei));
            let votes = shared.monitor_votes(config, &ballots, p, EndpointId(ei));
            json!({
                "name": e.name,
                "address": e.address.to_string(),
                "weight": e.weight,
                "enabled": e.enabled,
                "drained_since": h.disabled_at,
                "verdict": h.verdict.name(),
                "regions": region_verdicts(&votes),
                "private": PrivateReach::of(shared, config, p, EndpointId(ei)),
            })
        })
        .collect();
    let rtt: serde_json::Map<String, Value> = snapshot
        .pool(p)
        .rtt_ms
        .iter()
        .map(|(r, v)| (r.code().to_string(), json!(v)))
        .collect();
    let history: serde_json::Map<String, Value> = shared
        .rtt_history
        .of(&pool.name)
        .into_iter()
        .map(|(r, points)| (r.code().to_string(), json!(points)))
        .collect();
    View::ok(json!({
        "name": pool.name,
        "rtt_history": history,
        "description": pool.description,
        "enabled": pool.enabled,
        "state": snapshot.shown_pool_state(config, p, region).name(),
        "minimum_origins": pool.minimum_origins,
        "check_regions": pool.check_regions.iter().map(|r| r.code()).collect::<Vec<_>>(),
        "rtt_ms": rtt,
        "endpoints": endpoints,
    }))
}
