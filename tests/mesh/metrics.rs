//! Prometheus metrics: the aggregator's (no token), with the states as one-hot gauges and the
//! gossip packets it rejected, and a prober's own.

use std::time::Duration;

use super::world::World;
use test_support::*;

pub fn the_aggregator_exports_states_as_one_hot_gauges(w: &mut World) {
    w.wait_whole();
    let metrics = scrape(w.admin);
    for needle in [
        "meshlb_endpoint_state{node_role=\"aggregator\",node_region=\"WEU\",pool=\"web\",endpoint=\"one\",state=\"healthy\"} 1",
        "load_balancer=\"www.example.test\",state=\"healthy\"} 1",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
}

/// The intruder's packets, sealed with another key, are rejected and counted.
pub fn gossip_packets_sealed_with_another_key_are_counted_as_rejected(w: &mut World) {
    let rejected = || -> f64 {
        scrape(w.admin)
            .lines()
            .find(|l| l.starts_with("meshlb_gossip_rejected_packets_total"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    wait_for(
        "the intruder's packets counted",
        Duration::from_secs(10),
        || rejected() > 0.0,
    );
}

/// A prober's own /metrics: probes by type, result and reason, and their duration.
pub fn a_prober_exports_its_probes(w: &mut World) {
    w.wait_whole();
    let metrics = scrape(w.prober_metrics);
    assert!(metrics.contains("meshlb_probes_total{node_role=\"prober\",node_region=\"WEU\",node_dc=\"fra\",type=\"http\",result=\"pass\",reason=\"none\"}"), "{metrics}");
    assert!(
        metrics.contains("meshlb_probe_duration_seconds"),
        "{metrics}"
    );
}

/// A stopped origin's failed probes are classed by reason (`refused`).
pub fn a_probers_failed_probes_are_classed_by_reason(w: &mut World) {
    w.wait_whole();
    {
        let _stopped = Stopped::new([&w.one]);
        wait_for("a refused probe counted", Duration::from_secs(15), || {
            scrape(w.prober_metrics).contains("reason=\"refused\"")
        });
    }
    w.wait_whole();
}
