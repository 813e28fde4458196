//! The proxy's Prometheus metrics on the admin API.

use std::process::Command;
use std::time::Duration;

use super::failover::errors;
use super::world::World;
use crate::curl;
use test_support::{scrape, wait_for};

fn assert_exported(w: &World, needles: &[&str]) {
    let metrics = scrape(w.admin);
    for needle in needles {
        assert!(
            metrics.contains(needle),
            "{needle} missing from:\n{metrics}"
        );
    }
}

/// Requests by load balancer, pool, endpoint and status class, and their duration.
pub fn proxy_requests_are_counted_by_load_balancer_pool_endpoint_and_class(w: &mut World) {
    w.wait_steady();
    wait_for("a request served by w2", Duration::from_secs(10), || {
        curl(&w.url, "weighted.example.test", &[]).origin() == "w2"
    });
    assert_eq!(curl(&w.url, "dead.example.test", &[]).status, 530);
    assert_exported(
        w,
        &[
            "meshlb_proxy_requests_total{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"weighted.example.test\",pool=\"weighted\",endpoint=\"w2\",status_class=\"2xx\"}",
            "load_balancer=\"dead.example.test\",pool=\"\",endpoint=\"\",status_class=\"5xx\"}",
            "meshlb_proxy_request_duration_seconds",
        ],
    );
}

pub fn affinity_hits_are_counted(w: &mut World) {
    w.wait_steady();
    let first = curl(&w.url, "sticky.example.test", &[]);
    let cookie = first
        .header("set-cookie")
        .and_then(|v| v.split(';').next())
        .expect("an affinity cookie");
    let r = curl(
        &w.url,
        "sticky.example.test",
        &["-H", &format!("Cookie: {cookie}")],
    );
    assert_eq!(r.origin(), first.origin());
    assert_exported(w, &["meshlb_proxy_affinity_hits_total"]);
}

/// The proxy's own error answers by Cloudflare's code: the 530s of the load balancer with
/// nothing left; no 524 where every origin answers at once.
pub fn the_proxys_own_error_answers_are_counted_by_code(w: &mut World) {
    assert_eq!(curl(&w.url, "dead.example.test", &[]).status, 530);
    assert!(errors(w, "dead.example.test", "530") >= 1.0);
    assert_eq!(errors(w, "weighted.example.test", "524"), 0.0);
}

/// The test origins answer `Connection: close`: every request goes on a new connection, none
/// on one the origin had said it would close; the counters by kind of connection are all
/// exported.
pub fn a_connection_the_origin_closes_is_never_reused(w: &mut World) {
    let sent = |kind: &str| {
        w.metric(&format!(
            "meshlb_proxy_origin_requests_total{{node_role=\"aggregator\",node_region=\"WEU\",connection=\"{kind}\"}}"
        ))
    };
    w.wait_steady();
    let new = sent("new");
    let urls: Vec<String> = (0..120).map(|_| w.url.clone()).collect();
    let out = Command::new("curl")
        .args(["-s", "-H", "Host: weighted.example.test"])
        .args(&urls)
        .output()
        .expect("curl");
    assert!(out.status.success());
    assert!(
        sent("reused") == 0.0 && sent("new") - new >= 120.0,
        "reused {} new {} (of 120 requests)",
        sent("reused"),
        sent("new") - new
    );
    assert_exported(
        w,
        &["meshlb_proxy_origin_requests_total{node_role=\"aggregator\",node_region=\"WEU\",connection=\"resent\"}"],
    );
}
