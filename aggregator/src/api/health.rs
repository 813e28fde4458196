//! The API's read-only health views in Cloudflare's shapes: a pool's health by vantage point
//! (`pop_health`; meshlb's vantage points are its regions, each counted over its datacenters'
//! probers) and the health events list.

use super::query::QueryError;
use lb_core::config::EndpointId;
use lb_core::health::Verdict;
use serde_json::{json, Map, Value};

use crate::events::{Change, EventFilter, HealthEvent};
use crate::shared::Shared;

/// `GET /pools/{id}/health`'s result, or `None` for no such pool.
pub fn pool_health(shared: &Shared, id: &str) -> Option<Value> {
    let in_force = shared.in_force.load();
    let config = &**in_force.config();
    let pi = config.pool_by_name(id)?;
    let pool = config.pool(pi);
    let snapshot = in_force.generation.snapshot();
    let ballots = in_force.ballots.load();
    let mut pop_health = Map::new();
    for (ri, &region) in pool.check_regions.iter().enumerate() {
        let mut origins = Vec::new();
        let mut healthy_origins = 0u32;
        for (ei, e) in pool.endpoints.iter().enumerate() {
            let votes = if pool.is_monitored() {
                shared.endpoint_votes(config, &ballots, pi, 0, EndpointId(ei))
            } else {
                Vec::new()
            };
            let here = votes.get(ri);
            let h = snapshot.endpoint(pi, EndpointId(ei));
            let healthy = match here.and_then(|r| r.verdict) {
                Some(v) => v,
                None => h.verdict == Verdict::Healthy,
            };
            healthy_origins += u32::from(healthy && e.enabled);
            let dcs = here.map(|r| r.datacenters.as_slice()).unwrap_or_default();
            let failure = dcs
                .iter()
                .filter(|d| d.healthy == Some(false))
                .find_map(|d| d.reason.clone());
            let code = dcs.iter().find_map(|d| d.code);
            let rtt = h.rtt_ms.get(region).or_else(|| {
                let rtts: Vec<f64> = dcs.iter().filter_map(|d| d.rtt_ms).collect();
                (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64)
            });
            let mut o = Map::new();
            o.insert("healthy".into(), json!(healthy));
            o.insert(
                "failure_reason".into(),
                json!(failure.unwrap_or_else(|| "No failures".into())),
            );
            if let Some(code) = code {
                o.insert("response_code".into(), json!(code));
            }
            if let Some(rtt) = rtt {
                o.insert("rtt".into(), json!(format!("{rtt:.1}ms")));
            }
            origins.push(json!({ e.address.to_string(): Value::Object(o) }));
        }
        pop_health.insert(
            region.code().to_string(),
            json!({
                "healthy": healthy_origins >= pool.minimum_origins,
                "origins": origins,
            }),
        );
    }
    Some(json!({ "pool_id": pool.name, "pop_health": pop_health }))
}

fn rfc3339(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// One event in Cloudflare's shape (`origins`, `pool`, `timestamp`), with meshlb's own
/// fields (the votes behind it) under `meshlb`.
fn event(id: usize, e: &HealthEvent) -> Option<Value> {
    let (pool, endpoint, healthy, pool_healthy) = match &e.change {
        Change::Endpoint {
            pool, endpoint, to, ..
        } => (pool, Some(endpoint), Some(*to == Verdict::Healthy), None),
        Change::Member {
            pool, endpoint, to, ..
        } => (pool, Some(endpoint), Some(*to == Verdict::Healthy), None),
        Change::Pool { pool, .. } => (pool, None, None, Some(!e.change.is_down())),
        Change::EndpointRemoved { .. } | Change::LoadBalancer { .. } => return None,
    };
    let failure = e
        .regions
        .iter()
        .flat_map(|r| &r.datacenters)
        .find_map(|d| d.reason.clone());
    let origins = match (endpoint, healthy) {
        (Some(name), Some(h)) => vec![json!({
            "name": name,
            "healthy": h,
            "changed": true,
            "failure_reason": failure.unwrap_or_else(|| "No failures".into()),
        })],
        _ => Vec::new(),
    };
    Some(json!({
        "id": id,
        "timestamp": rfc3339(e.at_ms),
        "pool": { "name": pool, "id": pool, "changed": pool_healthy.is_some(), "healthy": pool_healthy.unwrap_or(true) },
        "origins": origins,
        "meshlb": e,
    }))
}

/// Why the events cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The log's lock was poisoned by a panic elsewhere.
    #[error("the event log is unavailable")]
    LogUnavailable,
}

/// `GET /user/load_balancing_analytics/events`: `pool_id`/`pool_name`, `origin_name`,
/// `since`/`until` (RFC 3339 or unix ms), `origin_healthy`, `pool_healthy`, `limit`.
pub fn events(shared: &Shared, query: &str) -> Result<Vec<Value>, EventsError> {
    let mut filter = EventFilter::default();
    let mut origin_healthy = None;
    let mut pool_healthy = None;
    let mut limit = usize::MAX;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let flag = || match &*v {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(QueryError::value(&k, "true or false", &v)),
        };
        match &*k {
            "since" | "until" => {
                let ms = v
                    .parse::<u64>()
                    .ok()
                    .or_else(|| parse_rfc3339_ms(&v))
                    .ok_or_else(|| QueryError::value(&k, "RFC 3339 or unix milliseconds", &v))?;
                if k == "since" {
                    filter.since_ms = Some(ms);
                } else {
                    filter.until_ms = Some(ms);
                }
            }
            "pool_id" | "pool_name" => filter.pool = Some(v.into_owned()),
            "origin_name" => filter.endpoint = Some(v.into_owned()),
            "origin_healthy" => origin_healthy = Some(flag()?),
            "pool_healthy" => pool_healthy = Some(flag()?),
            "limit" => {
                limit = v
                    .parse()
                    .map_err(|_| QueryError::value("limit", "a count", &v))?
            }
            other => {
                return Err(QueryError::Unknown {
                    param: other.to_string(),
                    known: "since, until, pool_id, pool_name, origin_name, origin_healthy, pool_healthy, limit",
                }
                .into())
            }
        }
    }
    let log = shared
        .events
        .lock()
        .map_err(|_| EventsError::LogUnavailable)?;
    Ok(log
        .query(&filter)
        .iter()
        .enumerate()
        .filter_map(|(i, e)| event(i + 1, e))
        .filter(|e| {
            origin_healthy.is_none_or(|h| e["origins"][0]["healthy"] == json!(h))
                && pool_healthy.is_none_or(|h| {
                    e["pool"]["changed"] == json!(true) && e["pool"]["healthy"] == json!(h)
                })
        })
        .take(limit)
        .collect())
}

/// An RFC 3339 timestamp as unix milliseconds.
fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(s).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for ms in [0, 1_700_000_000_123, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339_ms(&rfc3339(ms)), Some(ms), "{}", rfc3339(ms));
        }
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(
            parse_rfc3339_ms("2023-11-14T22:13:20Z"),
            Some(1_700_000_000_000)
        );
        assert_eq!(parse_rfc3339_ms("2023-13-14T22:13:20Z"), None);
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
    }
}
