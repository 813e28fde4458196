//! Origins and pools dying: detection within the bound, DNS failover down the pools to the
//! fallback and back, a disabled fallback, layer 4 around a dead origin.

use std::time::Duration;

use super::{answer, ip_of, now_ms};
use crate::build::{config, Variant};
use crate::mesh::Mesh;
use crate::report::Outcome;
use crate::streams::Stream;
use crate::{BOUND, MARGIN};

/// A wait's figure for the report.
fn secs(d: Option<Duration>) -> String {
    d.map_or("never (30 s)".to_string(), |d| {
        format!("{:.2} s", d.as_secs_f64())
    })
}

/// Waits until agg1 answers fo.chaos.test with origins `want` (sorted), for at most `within`:
/// how long that took. On a timeout, panics with `what`, the last answer, each wanted origin's
/// verdicts on both aggregators and agg1's votes counted, fail-static flag and its cause
/// (`aggregator/src/tally/silence.rs`).
fn wait_answer(m: &Mesh, want: &[&str], within: Duration, what: &str) -> Duration {
    let ips = ip_of(m, want);
    let mut last = (String::new(), Vec::new());
    test_support::wait_until(within, || {
        last = answer(m);
        last.1 == ips
    })
    .unwrap_or_else(|| {
        let verdicts: Vec<_> = want
            .iter()
            .map(|n| (n, m.verdict(0, n), m.verdict(1, n)))
            .collect();
        let tally = m.status(0).map(|s| {
            (
                s["votes_counted"].clone(),
                s["fail_static"].clone(),
                s["fail_static_cause"].clone(),
            )
        });
        panic!(
            "timed out after {within:?} waiting for {what} ({}): last answer {last:?}; \
             verdicts (agg1, agg2) {verdicts:?}; agg1's (votes counted, fail static, cause) \
             {tally:?}",
            want.join("+")
        )
    })
}

/// Stops eu-1: both aggregators mark it unhealthy within the bound (interval x consecutive +
/// 1 s, plus the machine's margin), DNS and the proxy stop using it; started again, it is
/// healthy within the bound.
pub fn an_origin_s_death_and_return_are_seen_within_the_bound(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(60));
    let eu1 = m.addr["eu-1"].to_string();
    let killed_ms = now_ms();
    m.origins["eu-1"].stop();
    let down = m.wait_event("eu-1", "unhealthy", killed_ms, Duration::from_secs(30));
    let (_, answers) = m.dig(0, "fo.chaos.test");
    let served: Vec<String> = (0..20).map(|_| m.proxy(0).1).collect();
    let dns_left = !answers.contains(&eu1) && !answers.is_empty();
    let proxy_left = served.iter().all(|b| b != "eu-1");
    let started_ms = now_ms();
    m.origins["eu-1"].start();
    let back = m.wait_event("eu-1", "healthy", started_ms, Duration::from_secs(30));
    Outcome::new(
        "kill an origin (eu-1), then restart it",
        format!(
            "down on both aggregators within {} s; DNS and proxy stop using it; back within {} s",
            BOUND.as_secs(),
            BOUND.as_secs()
        ),
        format!(
            "down in {}, back in {}; DNS answers {answers:?}; proxy served {}",
            secs(down),
            secs(back),
            if proxy_left { "never eu-1" } else { "eu-1" }
        ),
        down.is_some_and(|d| d <= BOUND + MARGIN)
            && back.is_some_and(|d| d <= BOUND + MARGIN)
            && dns_left
            && proxy_left,
    )
    .detection(down.unwrap_or(Duration::from_secs(30)))
}

/// Stops every origin of the first two pools at once (eu's and us's), every prober alive: both
/// are critical and DNS answers with the third (ap) within the bound. Dead targets are votes:
/// an aggregator that hears its probers fails over and never goes fail static on them (it
/// once did, three seconds after its first failures, while probers that started before their
/// first config advanced their progress once a minute). Starts the four again and waits until
/// every endpoint is healthy.
pub fn two_pools_losing_every_origin_at_once_fail_over_within_the_bound(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(60));
    let dead = ["eu-1", "eu-2", "us-1", "us-2"];
    for n in dead {
        m.origins[n].stop();
    }
    let within = BOUND + MARGIN;
    let t = wait_answer(m, &["ap-1", "ap-2"], within, "the third pool to answer");
    let tally = m
        .status(0)
        .map(|s| (s["votes_counted"].as_u64(), s["fail_static"].as_bool()));
    for n in dead {
        m.origins[n].start();
    }
    m.wait_healthy(Duration::from_secs(60));
    let counted = tally.is_some_and(|(votes, fail_static)| {
        votes.is_some_and(|v| v > 0) && fail_static == Some(false)
    });
    Outcome::new(
        "kill every origin of two pools at once (eu, us), every prober alive",
        format!(
            "DNS on the third pool (ap) within {} s; votes counted, not fail static",
            BOUND.as_secs()
        ),
        format!(
            "ap answered in {:.2} s; agg1's (votes counted, fail static) {tally:?}",
            t.as_secs_f64()
        ),
        t <= within && counted,
    )
    .detection(t)
}

/// Stops the primary pool's origins (eu), then the next's (us), then ap's: DNS fails over
/// eu -> us -> ap -> the fallback. Then the fallback's own origin: the fallback pool's health
/// is not considered (Cloudflare's NoHealth, docs/design.md#the-fallback-pool), so DNS still
/// answers with it once it is marked unhealthy, and the load balancer is critical. Leaves every
/// origin stopped (the harness starts them before the next trial).
pub fn pools_fail_over_in_order_to_a_fallback_that_serves_even_when_down(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(60));
    let mut steps = Vec::new();
    for (stop, expect) in [
        (vec!["eu-1", "eu-2"], vec!["us-1", "us-2"]),
        (vec!["us-1", "us-2"], vec!["ap-1", "ap-2"]),
        (vec!["ap-1", "ap-2"], vec!["static"]),
    ] {
        for n in &stop {
            m.origins[*n].stop();
        }
        let t = wait_answer(
            m,
            &expect,
            Duration::from_secs(20),
            "the next pool to answer",
        );
        steps.push(format!(
            "stop {} -> {} in {:.1} s",
            stop.join("+"),
            expect.join("+"),
            t.as_secs_f64()
        ));
    }
    let stopped_ms = now_ms();
    m.origins["static"].stop();
    let marked = m.wait_event("static", "unhealthy", stopped_ms, Duration::from_secs(30));
    let still = answer(m).1 == ip_of(m, &["static"]);
    let lb_critical = m.status(0).is_some_and(|s| {
        s["load_balancers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|l| l["name"] == "fo.chaos.test" && l["state"] == "critical")
    });
    steps.push(format!(
        "stop static -> still static once it is marked unhealthy ({}), load balancer critical: {lb_critical}",
        if still { "answered" } else { "NOT answered" }
    ));
    Outcome::new(
        "kill the primary pool's origins, then the next, then all (the fallback's too)",
        "failover eu -> us -> ap -> fallback, which serves even when its origin is down (load balancer critical)",
        steps.join("; "),
        marked.is_some() && still && lb_critical,
    )
}

/// Every origin stopped and DNS on the fallback: the state the next two trials start from.
fn every_origin_down(m: &Mesh) {
    for o in m.origins.values() {
        o.stop();
    }
    wait_answer(
        m,
        &["static"],
        Duration::from_secs(60),
        "every origin down and DNS on the fallback",
    );
}

/// Writes `text` as the primary's config and sends it SIGHUP (agg2 follows through the mesh);
/// how long until both run a new generation (`None`: not within 20 s).
fn reload_aggregators(m: &mut Mesh, text: &str) -> Option<Duration> {
    let before = m.generations();
    std::fs::write(&m.config, text).expect("config");
    m.world.node("agg1").hangup();
    test_support::wait_until(Duration::from_secs(20), || {
        m.generations() == before.map(|g| g + 1)
    })
}

/// With every origin down, the fallback disabled by a
/// reload of the primary leaves nothing: DNS answers NOERROR with no address and the SOA, the
/// proxy 530. Enabled again by a reload (its origin still down), DNS answers with it again.
pub fn a_disabled_fallback_answers_nodata_and_530_and_serves_again_when_enabled(
    m: &mut Mesh,
) -> Outcome {
    every_origin_down(m);
    let reloaded = reload_aggregators(m, &config(&m.addr, Variant::FallbackDisabled)).is_some();
    let (status, a) = answer(m);
    let (code, _) = m.proxy(0);
    let soa = m.soa(0, "fo.chaos.test");
    let nothing = reloaded && status == "NOERROR" && a.is_empty() && soa && code == 530;
    let again = reload_aggregators(m, &config(&m.addr, Variant::Original)).is_some();
    let back = answer(m).1 == ip_of(m, &["static"]);
    Outcome::new(
        "with every origin down, disable the fallback pool by a reload, then enable it again",
        "disabled: NODATA+SOA and 530; enabled again: the fallback answers",
        format!(
            "fallback disabled by a reload: DNS {status} with {} answers{}, proxy {code}; \
             fallback enabled again -> static: {back}",
            a.len(),
            if soa { " and the SOA" } else { ", no SOA" }
        ),
        nothing && again && back,
    )
}

/// With every origin down, the origins come back pool by
/// pool (the fallback's, ap's, us's, eu's): DNS follows each back in failover order, and the
/// proxy serves from eu at the end. Leaves every endpoint healthy.
pub fn pools_recover_in_order_as_their_origins_return(m: &mut Mesh) -> Outcome {
    every_origin_down(m);
    let mut steps = Vec::new();
    for (start, expect) in [
        (vec!["static"], vec!["static"]),
        (vec!["ap-1", "ap-2"], vec!["ap-1", "ap-2"]),
        (vec!["us-1", "us-2"], vec!["us-1", "us-2"]),
        (vec!["eu-1", "eu-2"], vec!["eu-1", "eu-2"]),
    ] {
        for n in &start {
            m.origins[*n].start();
        }
        let t = wait_answer(
            m,
            &expect,
            Duration::from_secs(20),
            "recovery to the restored pool",
        );
        steps.push(format!(
            "start {} -> {} in {:.1} s",
            start.join("+"),
            expect.join("+"),
            t.as_secs_f64()
        ));
    }
    let (code, body) = m.proxy(0);
    m.wait_healthy(Duration::from_secs(30));
    Outcome::new(
        "restore the origins: the fallback's, then ap's, us's, eu's",
        "recovery in order: fallback -> ap -> us -> eu; the proxy serves from eu",
        format!("{}; proxy {code} from {body}", steps.join("; ")),
        code == 200 && body.starts_with("eu-"),
    )
}

/// Stops eu-1 while a client opens layer-4 connections through agg1, one after another: every
/// connection begun after the kill is served (a refused connect is retried on eu-2); at most
/// the one open at the kill is cut.
pub fn a_killed_tcp_origin_cuts_at_most_the_open_layer4_connection(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(60));
    let stream = Stream::connections(m, 0, Duration::from_secs(5));
    test_support::wait_for(
        "the client's first layer-4 connections",
        Duration::from_secs(5),
        || stream.sent_at_least(5),
    );
    m.origins["eu-1"].stop();
    let (sent, failed) = stream.join();
    m.origins["eu-1"].start();
    Outcome::new(
        "kill a TCP origin (eu-1) under a stream of layer-4 connections through agg1",
        "every connection begun after the kill is served (a refused connect is retried on eu-2); at most the one open at the kill is cut",
        format!("{sent} connections, {failed} failed"),
        sent > 0 && failed <= 1,
    )
    .failed_requests(failed)
}
