//! An origin dies under a steady stream of requests: with zero-downtime failover no request
//! fails (within the pool, or across pools); without it, requests fail with 521 only until
//! the mesh marks the origin down.

use std::time::{Duration, Instant};

use super::world::World;
use crate::{curl, raw_status};
use test_support::{wait_for, Stopped};

/// What a steady stream of requests saw.
struct Stream {
    total: usize,
    /// (time since the kill, status) of each request that did not get 200.
    failures: Vec<(Duration, u16)>,
}

/// Requests to `host` one after another; `kill` (an endpoint of `pool`) stops 1 s in. The
/// stream ends once the mesh voted `kill` down and no request failed for the 2 s after both,
/// or 10 s in, whichever comes first (so failures that go on are seen going on). The returned
/// guard starts `kill` again.
fn stream<'w>(w: &'w World, host: &str, pool: &str, kill: &str) -> (Stream, Stopped<'w>) {
    let start = Instant::now();
    let (deadline, killed_at) = (
        start + Duration::from_secs(10),
        start + Duration::from_secs(1),
    );
    let mut failures: Vec<(Duration, u16)> = Vec::new();
    let (mut total, mut stopped, mut down_at, mut checked) = (0, None, None, start);
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if stopped.is_none() && now >= killed_at {
            stopped = Some(Stopped::new([&w.origins[kill]]));
        }
        if stopped.is_some() && down_at.is_none() && now - checked >= Duration::from_millis(250) {
            checked = now;
            if w.verdict(pool, kill).as_deref() == Some("unhealthy") {
                down_at = Some(now);
            }
        }
        if let Some(down) = down_at {
            let last_failure = failures.last().map(|(t, _)| killed_at + *t);
            if now - last_failure.map_or(down, |f| f.max(down)) >= Duration::from_secs(2) {
                break;
            }
        }
        total += 1;
        let status = raw_status(w.proxy, host, "/");
        if status != 200 {
            failures.push((killed_at.elapsed(), status));
        }
    }
    (Stream { total, failures }, stopped.expect("killed"))
}

fn retries(w: &World, lb: &str) -> f64 {
    w.metric(&format!(
        "meshlb_proxy_retries_total{{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"{lb}\"}}"
    ))
}

/// `meshlb_proxy_errors_total` of the proxy's own error answers, by Cloudflare's code.
pub fn errors(w: &World, lb: &str, code: &str) -> f64 {
    w.metric(&format!(
        "meshlb_proxy_errors_total{{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"{lb}\",code=\"{code}\"}}"
    ))
}

/// With zero-downtime failover, z1 dying under a steady stream fails no request: the proxy
/// retries on z2, and counts the retries.
pub fn zero_downtime_failover_loses_no_request_when_an_origin_dies(w: &mut World) {
    w.wait_steady();
    let retried = retries(w, "zdt.example.test");
    let (s, stopped) = stream(w, "zdt.example.test", "zdt", "z1");
    drop(stopped);
    assert!(s.total > 100, "only {} requests", s.total);
    assert!(
        s.failures.is_empty(),
        "{} of {} failed with zero-downtime failover: {:?}",
        s.failures.len(),
        s.total,
        s.failures
    );
    assert!(
        retries(w, "zdt.example.test") > retried,
        "the retries were counted"
    );
    w.wait_steady();
}

/// With `failover_across_pools`, a pool of one endpoint retries on the next pool.
pub fn failover_across_pools_retries_on_the_next_pool(w: &mut World) {
    wait_for("the solo pool serves", Duration::from_secs(15), || {
        curl(&w.url, "across.example.test", &[]).origin() == "x1"
    });
    let (s, stopped) = stream(w, "across.example.test", "solo", "x1");
    drop(stopped);
    assert!(
        s.failures.is_empty(),
        "{} of {} failed with failover across pools: {:?}",
        s.failures.len(),
        s.total,
        s.failures
    );
    wait_for(
        "the solo pool serves again",
        Duration::from_secs(15),
        || curl(&w.url, "across.example.test", &[]).origin() == "x1",
    );
}

/// Without the retry, a request sent to an origin that refuses the connection gets
/// Cloudflare's 521, and each one is counted as a 521 error.
pub fn a_refused_origin_answers_521(w: &mut World) {
    w.wait_steady();
    let counted = errors(w, "nozdt.example.test", "521");
    let mut failures = Vec::new();
    {
        let _stopped = Stopped::new([&w.origins["z1"]]);
        // Before the mesh marks z1 down (2 s at least), about half the requests go to it.
        for _ in 0..100 {
            let status = raw_status(w.proxy, "nozdt.example.test", "/");
            if status != 200 {
                failures.push(status);
            }
            if failures.len() >= 5 {
                break;
            }
        }
    }
    assert!(
        !failures.is_empty(),
        "no request reached the stopped origin"
    );
    assert!(failures.iter().all(|s| *s == 521), "{failures:?}");
    assert_eq!(
        errors(w, "nozdt.example.test", "521") - counted,
        failures.len() as f64,
        "every failure counted as a 521"
    );
    w.wait_steady();
}

/// Without the retry, requests fail only until the mesh marks the dead origin down:
/// interval x consecutive_down + 1 s = 3 s after the kill, with a margin for a loaded machine
/// (tests/mesh.rs allows as much).
pub fn a_dead_origin_stops_getting_requests_within_the_bound(w: &mut World) {
    w.wait_steady();
    let (s, stopped) = stream(w, "nozdt.example.test", "zdt", "z1");
    drop(stopped);
    assert!(
        !s.failures.is_empty(),
        "without the retry some of {} requests must fail",
        s.total
    );
    let last = s.failures.iter().map(|(t, _)| *t).max().unwrap();
    eprintln!(
        "without zero-downtime failover: {} of {} failed, the last {last:?} after the kill",
        s.failures.len(),
        s.total
    );
    assert!(
        last < Duration::from_secs(8),
        "failures went on for {last:?}"
    );
    w.wait_steady();
}
