//! Layer-4 metrics, their handles made once per generation so a connection costs no registry
//! lookup: by load balancer (connections or flows, bytes each way, retries, refusals) and by
//! endpoint (connections or flows opened, open now, connect failures).

use lb_core::metric::Metric;
use metrics::{Counter, Gauge};

use lb_core::config::{Config, LbId};
use lb_core::steering::Target;

#[derive(Debug)]
pub struct LbMetrics {
    /// TCP connections accepted, or UDP flows begun.
    pub accepted: Counter,
    /// Bytes from clients to origins, and back.
    pub bytes_in: Counter,
    pub bytes_out: Counter,
    /// Connections tried again on another endpoint after a failed connect.
    pub retries: Counter,
    /// Connections or flows no endpoint took (no pool, every connect failed).
    pub unserved: Counter,
}

#[derive(Debug)]
pub struct EndpointMetrics {
    pub opened: Counter,
    pub open: Gauge,
    pub connect_failures: Counter,
}

#[derive(Debug)]
pub struct L4Metrics {
    pub lbs: Vec<LbMetrics>,
    pub endpoints: Vec<Vec<EndpointMetrics>>,
    /// Over the node's connection or flow limit, closed or dropped at once.
    pub refused_connections: Counter,
    pub evicted_flows: Counter,
}

impl L4Metrics {
    pub fn new(config: &Config) -> L4Metrics {
        let lbs = config
            .load_balancers
            .iter()
            .map(|lb| {
                let transport = lb.layer4.as_ref().map_or("tcp", |l| l.transport.name());
                let labels = [
                    ("load_balancer", lb.name.clone()),
                    ("transport", transport.to_string()),
                ];
                LbMetrics {
                    accepted: metrics::counter!("meshlb_l4_accepted_total", &labels),
                    bytes_in: metrics::counter!(
                        "meshlb_l4_bytes_total",
                        &[
                            ("load_balancer", lb.name.clone()),
                            ("direction", "to_origin".to_string())
                        ]
                    ),
                    bytes_out: metrics::counter!(
                        "meshlb_l4_bytes_total",
                        &[
                            ("load_balancer", lb.name.clone()),
                            ("direction", "to_client".to_string())
                        ]
                    ),
                    retries: metrics::counter!("meshlb_l4_retries_total", &labels),
                    unserved: metrics::counter!("meshlb_l4_unserved_total", &labels),
                }
            })
            .collect();
        let endpoints = config
            .pools
            .iter()
            .map(|p| {
                p.endpoints
                    .iter()
                    .map(|e| {
                        let labels = [("pool", p.name.clone()), ("endpoint", e.name.clone())];
                        EndpointMetrics {
                            opened: metrics::counter!("meshlb_l4_endpoint_opened_total", &labels),
                            open: metrics::gauge!("meshlb_l4_endpoint_open", &labels),
                            connect_failures: metrics::counter!(
                                "meshlb_l4_connect_failures_total",
                                &labels
                            ),
                        }
                    })
                    .collect()
            })
            .collect();
        L4Metrics {
            lbs,
            endpoints,
            refused_connections: metrics::counter!("meshlb_l4_refused_total"),
            evicted_flows: metrics::counter!("meshlb_l4_flows_evicted_total"),
        }
    }

    pub fn lb(&self, lb: LbId) -> Option<&LbMetrics> {
        self.lbs.get(lb.0)
    }

    pub fn endpoint(&self, t: Target) -> Option<&EndpointMetrics> {
        self.endpoints.get(t.pool.0)?.get(t.endpoint.0)
    }
}

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_l4_accepted_total",
        &["load_balancer", "transport"],
        "Layer-4 TCP connections accepted and UDP flows begun, by load balancer.",
    ),
    Metric::counter(
        "meshlb_l4_bytes_total",
        &["direction", "load_balancer"],
        "Bytes relayed by layer-4 load balancers, by direction (to_origin, to_client).",
    ),
    Metric::counter(
        "meshlb_l4_retries_total",
        &["load_balancer", "transport"],
        "Layer-4 connections tried again on another endpoint after a refused or timed-out connect.",
    ),
    Metric::counter(
        "meshlb_l4_unserved_total",
        &["load_balancer", "transport"],
        "Layer-4 connections or flows that no endpoint took (no pool could, or every connect failed).",
    ),
    Metric::counter(
        "meshlb_l4_endpoint_opened_total",
        &["endpoint", "pool"],
        "Layer-4 connections and flows opened to an endpoint.",
    ),
    Metric::gauge(
        "meshlb_l4_endpoint_open",
        &["endpoint", "pool"],
        "Layer-4 connections and flows open to an endpoint now.",
    ),
    Metric::counter(
        "meshlb_l4_connect_failures_total",
        &["endpoint", "pool"],
        "Layer-4 connects to an endpoint that were refused, timed out, or named a host that did not resolve.",
    ),
    Metric::counter(
        "meshlb_l4_refused_total",
        &[],
        "Layer-4 TCP connections closed at accept because --l4-max-connections were open.",
    ),
    Metric::counter(
        "meshlb_l4_flows_evicted_total",
        &[],
        "Layer-4 UDP flows pushed out of a full flow table (--l4-udp-max-flows).",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
