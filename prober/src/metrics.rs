//! What the prober records, described for Prometheus (the scheduler records them:
//! `scheduler.rs`).

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    use ::metrics::{describe_counter, describe_histogram, Unit};
    describe_counter!(
        "meshlb_probes_total",
        "Probes run, by monitor type, result and failure reason class."
    );

    describe_histogram!(
        "meshlb_probe_duration_seconds",
        Unit::Seconds,
        "Probe round-trip time, by monitor type."
    );

    describe_counter!(
        "meshlb_probe_retries_total",
        "Immediate retries of failed probes, by monitor type."
    );

    describe_counter!(
        "meshlb_probe_overruns_total",
        "Probe rounds skipped because the previous probe of the target still ran."
    );

    describe_counter!(
        "meshlb_prober_previews_total",
        "Monitor previews the mesh asked of this prober, by outcome: run, invalid (its document does not validate here), skipped (too many remembered) or too_large (--preview-max-targets)."
    );
}
