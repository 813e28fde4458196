//! Load shedding (docs/design.md#load-shedding): a share of a pool's traffic leaves it for the next pool. New
//! traffic sheds by `default_percent`, affinity traffic by `session_percent`; `hash` sheds the
//! same clients every time, `random` tosses a coin per request.

use std::net::IpAddr;

use rand::{Rng, RngCore};

use crate::config::ShedPolicy;
use crate::steering::weighted::{client_hash, unit_interval};

/// Whether this request leaves the pool.
pub(crate) fn sheds(
    percent: f64,
    policy: ShedPolicy,
    client: Option<IpAddr>,
    pool_name: &str,
    rng: &mut dyn RngCore,
) -> bool {
    if percent <= 0.0 {
        return false;
    }
    let draw = match (policy, client) {
        (ShedPolicy::Hash, Some(ip)) => unit_interval(client_hash(ip, &["shed", pool_name])),
        _ => rng.random::<f64>(),
    };
    draw * 100.0 < percent
}
