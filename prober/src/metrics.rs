//! What the prober records, described for Prometheus (the scheduler records them:
//! `scheduler.rs`).

use lb_core::metric::{Metric, MetricUnit};

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_probes_total",
        &["reason", "result", "type"],
        "Probes run, by monitor type, result and failure reason class.",
    ),
    Metric::histogram(
        "meshlb_probe_duration_seconds",
        &["type"],
        "Probe round-trip time, by monitor type.",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::counter(
        "meshlb_probe_retries_total",
        &["type"],
        "Immediate retries of failed probes, by monitor type.",
    ),
    Metric::counter(
        "meshlb_probe_overruns_total",
        &[],
        "Probe rounds skipped because the previous probe of the target still ran.",
    ),
    Metric::counter(
        "meshlb_prober_previews_total",
        &["outcome"],
        "Monitor previews the mesh asked of this prober, by outcome: run, invalid (its document does not validate here), skipped (too many remembered) or too_large (--preview-max-targets).",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
