//! The PoP's tunnel metrics (`meshlb_tunnel_*`), recorded as the hub counts (`pop.rs`); labels
//! of bounded cardinality (a refusal's reason, a stream's result).

use lb_core::metric::Metric;

pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_tunnel_connectors_accepted_total",
        &[],
        "Tunnel connector connections accepted (their hello verified) by this PoP.",
    ),
    Metric::counter(
        "meshlb_tunnel_connectors_refused_total",
        &["reason"],
        "Tunnel connector connections refused, by reason (full, timeout, handshake, unknown_tunnel, bad_proof, foreign_route, too_many_connections, bad_relay).",
    ),
    Metric::counter(
        "meshlb_tunnel_connectors_unresponsive_total",
        &[],
        "Tunnel connector connections dropped because an HTTP/2 PING went unanswered for the ping timeout.",
    ),
    Metric::gauge(
        "meshlb_tunnel_connections",
        &[],
        "Tunnel connector connections this PoP holds now, every tunnel's.",
    ),
    Metric::counter(
        "meshlb_tunnel_streams_total",
        &["result"],
        "Streams through tunnels to private endpoints, by result (opened, failed).",
    ),
    Metric::counter(
        "meshlb_tunnel_relayed_streams_total",
        &["result"],
        "Streams to private endpoints this node opened through another PoP holding the tunnel, by result (opened; failed: neither this PoP nor any holder opened it).",
    ),
];

/// HELP text of the metrics recorded here.
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
