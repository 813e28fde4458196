//! Each log's counters: written, dropped (and why), write errors, reopens.

use metrics::{counter, describe_counter, Counter};

pub(crate) struct LogCounters {
    pub log: &'static str,
    pub written: Counter,
    /// The queue was full: the writer (a slow disk, a stalled collector) fell behind.
    pub dropped_full: Counter,
    /// No collector was connected, or a write failed.
    pub dropped_unwritten: Counter,
    /// The writer had stopped.
    pub dropped_stopped: Counter,
    pub write_errors: Counter,
    pub reopened: Counter,
}

impl LogCounters {
    pub(crate) fn new(log: &'static str) -> Self {
        let dropped = |reason: &'static str| counter!("meshlb_log_records_dropped_total", "log" => log, "reason" => reason);
        LogCounters {
            log,
            written: counter!("meshlb_log_records_written_total", "log" => log),
            dropped_full: dropped("queue_full"),
            dropped_unwritten: dropped("unwritten"),
            dropped_stopped: dropped("stopped"),
            write_errors: counter!("meshlb_log_write_errors_total", "log" => log),
            reopened: counter!("meshlb_log_reopens_total", "log" => log),
        }
    }
}

/// Describes the records' metrics (once, at the exporter's start).
pub fn describe_metrics() {
    describe_counter!(
        "meshlb_log_records_written_total",
        "Records written by each log (access, l4, dnstap)."
    );
    describe_counter!(
        "meshlb_log_records_dropped_total",
        "Records dropped by each log: queue_full (the writer fell behind), unwritten (no collector connected or a write failed), stopped."
    );
    describe_counter!(
        "meshlb_log_write_errors_total",
        "Failed writes, opens and connections of each log's output."
    );
    describe_counter!(
        "meshlb_log_reopens_total",
        "Times each log's file was reopened (SIGUSR1, or its path renamed away) or its collector reconnected."
    );
}
