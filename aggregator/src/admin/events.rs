//! `GET /events?since=&until=&pool=&endpoint=`: health changes (unix ms bounds).

use http::StatusCode;

use super::reply::{error, json, Reply};
use crate::events::EventFilter;
use crate::shared::Shared;

pub(super) fn events(shared: &Shared, query: &str) -> Reply {
    let mut filter = EventFilter::default();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "since" | "until" => match v.parse::<u64>() {
                Ok(ms) if k == "since" => filter.since_ms = Some(ms),
                Ok(ms) => filter.until_ms = Some(ms),
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("{k}: expected unix milliseconds, got `{v}`"),
                    )
                }
            },
            "pool" => filter.pool = Some(v.into_owned()),
            "endpoint" => filter.endpoint = Some(v.into_owned()),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown parameter `{other}` (since, until, pool, endpoint)"),
                )
            }
        }
    }
    match shared.events.lock() {
        Ok(log) => json(StatusCode::OK, &log.query(&filter)),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "event log unavailable"),
    }
}
