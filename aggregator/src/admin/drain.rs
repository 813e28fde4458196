//! `/drain`: endpoints drained at run time, shared with every aggregator through gossip.

use http::StatusCode;
use lb_core::clock::{unix_ms, unix_secs};
use lb_core::config::{EndpointId, PoolId};
use serde::Serialize;

use super::reply::{error, json, Reply};
use crate::shared::Shared;

#[derive(Serialize)]
struct Drained {
    pool: String,
    endpoint: String,
    since: u64,
}

/// `GET /drain` lists drained endpoints; `POST /drain?pool=P&endpoint=E` drains one (no new
/// traffic; affinity sessions stay for the load balancer's `drain_duration`, Cloudflare's
/// "disable origin"); `DELETE` the same undoes it. Per aggregator: drain on each.
pub(super) fn drain(shared: &Shared, method: &http::Method, query: &str) -> Reply {
    let Ok(mut tables) = shared.drains.tables.lock() else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "drain table unavailable");
    };
    // The tables' own config: their positions are its, also while a reload is adopted.
    let config = std::sync::Arc::clone(&tables.config);
    let list = |drains: &std::collections::BTreeMap<(PoolId, EndpointId), u64>| {
        let v: Vec<Drained> = drains
            .iter()
            .map(|(&(p, e), &since)| Drained {
                pool: config.pool(p).name.clone(),
                endpoint: config.pool(p).endpoints[e.0].name.clone(),
                since,
            })
            .collect();
        json(StatusCode::OK, &v)
    };
    if method == http::Method::GET {
        return list(&tables.in_force);
    }
    if method != http::Method::POST && method != http::Method::DELETE {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "/drain takes GET, POST or DELETE",
        );
    }
    let (mut pool, mut endpoint) = (None, None);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "pool" => pool = Some(v.into_owned()),
            "endpoint" => endpoint = Some(v.into_owned()),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown parameter `{other}` (pool, endpoint)"),
                )
            }
        }
    }
    let (Some(pool), Some(endpoint)) = (pool, endpoint) else {
        return error(StatusCode::BAD_REQUEST, "give pool=NAME and endpoint=NAME");
    };
    let Some(p) = config.pool_by_name(&pool) else {
        return error(StatusCode::NOT_FOUND, &format!("no pool is named `{pool}`"));
    };
    let Some(e) = config.pool(p).endpoint_by_name(&endpoint) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("pool `{pool}` has no endpoint `{endpoint}`"),
        );
    };
    // After every decision known about it: an operator's decision always wins.
    let at_ms = crate::drains::stamp(unix_ms(), tables.decisions.get(&(p, e)));
    let draining = method == http::Method::POST;
    // A drain already in force keeps its start; the decision is published in gossip by the
    // tally loop, and takes effect here at once.
    let since = tables
        .in_force
        .get(&(p, e))
        .copied()
        .unwrap_or_else(unix_secs);
    tables.decisions.insert(
        (p, e),
        mesh::keys::DrainDecision {
            pool,
            endpoint,
            draining,
            since,
            at_ms,
        },
    );
    if draining {
        tables.in_force.insert((p, e), since);
    } else {
        tables.in_force.remove(&(p, e));
    }
    list(&tables.in_force)
}
