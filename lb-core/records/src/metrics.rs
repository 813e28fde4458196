//! Each log's counters: written, dropped (and why), write errors, reopens.

use lb_core::metric::Metric;
use metrics::counter;

/// One log's counters, looked up in the recorder at each use: a log starts with the node's
/// flags, before the node installs its Prometheus recorder, and a handle taken then would
/// count into nothing. Each use is rare (a drop, an error, a reopen) or once per batch
/// (written).
pub(crate) struct LogCounters {
    pub log: &'static str,
}

/// Why a record was dropped.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dropped {
    /// The queue was full: the writer (a slow disk, a stalled collector) fell behind.
    QueueFull,
    /// No collector was connected, or a write failed.
    Unwritten,
    /// The writer had stopped.
    Stopped,
}

impl LogCounters {
    pub(crate) fn new(log: &'static str) -> Self {
        LogCounters { log }
    }

    pub(crate) fn written(&self, n: u64) {
        if n > 0 {
            counter!("meshlb_log_records_written_total", "log" => self.log).increment(n);
        }
    }

    pub(crate) fn dropped(&self, why: Dropped, n: u64) {
        let reason = match why {
            Dropped::QueueFull => "queue_full",
            Dropped::Unwritten => "unwritten",
            Dropped::Stopped => "stopped",
        };
        counter!("meshlb_log_records_dropped_total", "log" => self.log, "reason" => reason)
            .increment(n);
    }

    pub(crate) fn write_error(&self) {
        counter!("meshlb_log_write_errors_total", "log" => self.log).increment(1);
    }

    pub(crate) fn reopened(&self) {
        counter!("meshlb_log_reopens_total", "log" => self.log).increment(1);
    }
}

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_log_records_written_total",
        &["log"],
        "Records written by each log (access, l4, dnstap).",
    ),
    Metric::counter(
        "meshlb_log_records_dropped_total",
        &["log", "reason"],
        "Records dropped by each log: queue_full (the writer fell behind), unwritten (no collector connected or a write failed), stopped.",
    ),
    Metric::counter(
        "meshlb_log_write_errors_total",
        &["log"],
        "Failed writes, opens and connections of each log's output.",
    ),
    Metric::counter(
        "meshlb_log_reopens_total",
        &["log"],
        "Times each log's file was reopened (SIGUSR1, or its path renamed away) or its collector reconnected.",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
