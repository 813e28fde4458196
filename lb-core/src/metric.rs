//! The metrics catalogue's entry: what one Prometheus metric is called, its type, its labels
//! and its HELP text. Each crate that records metrics lists them in one `METRICS` table (for
//! example `lb-core/dns/src/metrics.rs`), from which [`describe_metrics!`](crate::describe_metrics)
//! gives the recorder their HELP text and the workspace's `tests/metrics_catalogue.rs` checks
//! both the code (every metric recorded is in a table, with its labels) and
//! `docs/operations.md#metrics` (it lists exactly the tables' metrics).
//!
//! The type lives here, in the pure core, so that it costs the frontends nothing: the tables are
//! plain data and only the macro, expanded in a crate that depends on `metrics`, touches the
//! recorder.

/// A Prometheus metric type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
}

impl MetricType {
    /// Its name in the exposition's `# TYPE` line and in docs/operations.md.
    pub const fn name(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// The unit a metric is measured in, when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricUnit {
    Seconds,
    Bytes,
}

/// One metric of a crate's catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub kind: MetricType,
    pub unit: Option<MetricUnit>,
    /// The labels it is recorded with, beside the node's global ones (`node_role`,
    /// `node_region`, `node_dc`).
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

impl Metric {
    pub const fn counter(
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Metric {
        Metric {
            name,
            kind: MetricType::Counter,
            unit: None,
            labels,
            help,
        }
    }

    pub const fn gauge(
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Metric {
        Metric {
            name,
            kind: MetricType::Gauge,
            unit: None,
            labels,
            help,
        }
    }

    pub const fn histogram(
        name: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Metric {
        Metric {
            name,
            kind: MetricType::Histogram,
            unit: None,
            labels,
            help,
        }
    }

    /// The same metric, measured in `unit`.
    pub const fn in_unit(self, unit: MetricUnit) -> Metric {
        Metric {
            unit: Some(unit),
            ..self
        }
    }
}

/// Gives the installed recorder the HELP text (and unit) of every metric of a catalogue:
/// `lb_core::describe_metrics!(METRICS)`. Expanded in the calling crate, which must depend on
/// `metrics`.
#[macro_export]
macro_rules! describe_metrics {
    ($catalogue:expr) => {
        for m in $catalogue {
            let unit = m.unit.map(|u| match u {
                $crate::metric::MetricUnit::Seconds => ::metrics::Unit::Seconds,
                $crate::metric::MetricUnit::Bytes => ::metrics::Unit::Bytes,
            });
            match (m.kind, unit) {
                ($crate::metric::MetricType::Counter, Some(u)) => {
                    ::metrics::describe_counter!(m.name, u, m.help)
                }
                ($crate::metric::MetricType::Counter, None) => {
                    ::metrics::describe_counter!(m.name, m.help)
                }
                ($crate::metric::MetricType::Gauge, Some(u)) => {
                    ::metrics::describe_gauge!(m.name, u, m.help)
                }
                ($crate::metric::MetricType::Gauge, None) => {
                    ::metrics::describe_gauge!(m.name, m.help)
                }
                ($crate::metric::MetricType::Histogram, Some(u)) => {
                    ::metrics::describe_histogram!(m.name, u, m.help)
                }
                ($crate::metric::MetricType::Histogram, None) => {
                    ::metrics::describe_histogram!(m.name, m.help)
                }
            }
        }
    };
}
