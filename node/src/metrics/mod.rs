//! Prometheus for every node: the recorder with the node's labels, the HELP text of what this
//! crate records, gossip's counters, and the small `/metrics` listener of probers
//! (aggregators serve `/metrics` on their admin API).

mod catalogue;
pub use catalogue::METRICS;
mod gossip;
mod listener;

pub use gossip::record_gossip;
pub use listener::{serve, ListenError, ReloadEndpoint};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Bucket bounds (seconds) of every histogram: 50 µs (a DNS answer) to 30 s (a slow probe).
/// Real buckets rather than the exporter's default summaries, so Prometheus can aggregate
/// across nodes (`histogram_quantile` over `_bucket`), as the dashboards in deploy/ do.
const BUCKETS: [f64; 18] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Installs the process's global recorder with the node's labels; `None` if one is installed
/// already (a second node in one process, as in-process tests run them, records into the
/// first one's). The caller describes what its crates record (`describe_metrics`).
pub fn install(labels: &[(&str, &str)]) -> Option<PrometheusHandle> {
    let mut builder = PrometheusBuilder::new().set_buckets(&BUCKETS).ok()?;
    for (k, v) in labels {
        builder = builder.add_global_label(*k, *v);
    }
    builder.install_recorder().ok()
}

/// HELP text of everything this crate records: the control plane, reloads, the listeners'
/// guard and gossip.
pub fn describe_metrics() {
    catalogue::describe_metrics();
}
