//! What the fifty reloads left in the events and the metrics: no event for the endpoint no
//! reload changed, one removal event per reload that removed one, the generation and the reload
//! counters at fifty, and the endpoint the last reload removed no longer shown healthy.

use test_support::*;

use super::world::{events_of, Fifty};
use crate::metric;

pub fn an_endpoint_no_reload_changed_gets_no_event(w: &mut Fifty) {
    let a_events: Vec<_> = events_of(w.admin, "a")
        .into_iter()
        .filter(|e| e["at_ms"].as_u64().unwrap_or(0) > w.quiet_since)
        .collect();
    assert!(
        a_events.is_empty(),
        "events for the unchanged endpoint: {a_events:?}"
    );
}

pub fn each_reload_that_removes_an_endpoint_logs_one_removal_event(w: &mut Fifty) {
    let removed_b = events_of(w.admin, "b")
        .iter()
        .filter(|e| e["kind"] == "endpoint_removed")
        .count();
    assert_eq!(removed_b, 25, "one removal event per reload that removed b");
}

pub fn the_generation_and_the_reload_metrics_count_every_reload(w: &mut Fifty) {
    let status = get(w.admin, "/status").expect("status");
    assert_eq!(status["config_generation"], 51);
    let metrics = scrape(w.admin);
    let success = metric(
        &metrics,
        "meshlb_config_reloads_total",
        "result=\"success\"",
    );
    assert_eq!(success, Some(50.0));
    let last = metric(&metrics, "meshlb_config_last_reload_successful", "");
    assert_eq!(last, Some(1.0));
}

pub fn an_endpoint_the_last_reload_removed_no_longer_shows_healthy(w: &mut Fifty) {
    let metrics = scrape(w.admin);
    let c_healthy: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("meshlb_endpoint_state{"))
        .filter(|l| l.contains("endpoint=\"c\"") && l.contains("state=\"healthy\""))
        .collect();
    assert!(
        !c_healthy.is_empty() && c_healthy.iter().all(|l| l.ends_with(" 0")),
        "no alert on the gone: {c_healthy:?}"
    );
}
