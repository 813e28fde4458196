//! Steering by measured latency.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::ip_of;
use crate::mesh::Mesh;
use crate::report::Outcome;

/// 400 ms more on every answer of eu's origins: dynamic steering, which answered eu for agg1
/// (PoP WEU), moves to the next fastest pool (us). Needs eu to be the fastest pool first: its
/// origins healthy for some 30 s (the EWMA's time constant), as the previous trials leave them.
pub fn dynamic_steering_leaves_a_pool_whose_latency_rises(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(60));
    let first = m.dig(0, "dyn.chaos.test").1;
    let eu_ips = ip_of(m, &["eu-1", "eu-2"]);
    let us_ips = ip_of(m, &["us-1", "us-2"]);
    let starts_eu = first.iter().all(|a| eu_ips.contains(a));
    m.latency.extra_ms[0].store(400, Ordering::Relaxed);
    let moved = test_support::wait_until(Duration::from_secs(60), || {
        let a = m.dig(0, "dyn.chaos.test").1;
        !a.is_empty() && a.iter().all(|x| us_ips.contains(x))
    });
    m.latency.extra_ms[0].store(0, Ordering::Relaxed);
    let observed = match moved {
        Some(moved) => format!(
            "answered eu before: {starts_eu}; moved to us in {:.1} s (EWMA time constant 30 s)",
            moved.as_secs_f64()
        ),
        None => format!("answered eu before: {starts_eu}; not moved to us within 60 s"),
    };
    let outcome = Outcome::new(
        "raise the eu pool's latency by 400 ms (PoP WEU)",
        "dynamic steering moves from eu to the next fastest pool (us)",
        observed,
        starts_eu && moved.is_some(),
    );
    match moved {
        Some(moved) => outcome.detection(moved),
        None => outcome,
    }
}
