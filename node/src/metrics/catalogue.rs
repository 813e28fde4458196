//! The node crate's metrics catalogue: the control plane, reloads, the listeners' guard and
//! gossip.

use lb_core::metric::{Metric, MetricUnit};

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::gauge(
        "meshlb_config_generation",
        &[],
        "The mesh config generation this node runs (0: a file of its own, or nothing yet from the primary).",
    ),
    Metric::gauge(
        "meshlb_config_primary_seen",
        &[],
        "1 while a live config primary is announced in gossip, else 0.",
    ),
    Metric::counter(
        "meshlb_config_fetches_total",
        &["result"],
        "Fetches of the config primary's document, by result.",
    ),
    Metric::gauge(
        "meshlb_config_store_up",
        &[],
        "1 while the config store (--config-store) answered this node's last request, else 0.",
    ),
    Metric::counter(
        "meshlb_config_store_writes_total",
        &["result"],
        "Writes to the config store, by result: success, conflict (a lost race or a stale If-Match) or failure (no member answered).",
    ),
    Metric::counter(
        "meshlb_config_documents_forged_total",
        &["what"],
        "Announcements and fetched documents whose writer signature did not check out (a node holding only the cluster key, or a relay that altered the document), refused.",
    ),
    Metric::counter(
        "meshlb_config_document_bytes_sent_total",
        &[],
        "Bytes of config documents this node served to followers (compressed as sent).",
    ),
    Metric::counter(
        "meshlb_config_fetches_served_total",
        &["sent"],
        "Fetches of this node's document, by what was sent: full, delta, or busy (refused 503 over --config-serve-max).",
    ),
    Metric::counter(
        "meshlb_config_documents_refused_total",
        &[],
        "Config generations fetched from the primary that did not validate on this node.",
    ),
    Metric::gauge(
        "meshlb_config_last_reload_successful",
        &[],
        "1 if the last configuration reload (or the start) succeeded, 0 if the file was refused.",
    ),
    Metric::gauge(
        "meshlb_config_last_reload_success_timestamp_seconds",
        &[],
        "When the configuration in force was loaded (unix seconds).",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::counter(
        "meshlb_config_reloads_total",
        &["result"],
        "Configuration reloads after the start, by result (success, failure).",
    ),
    Metric::counter(
        "meshlb_admin_accept_errors_total",
        &[],
        "Failed accepts on an admin or metrics listener (each waits 5 ms doubling to 1 s before the next).",
    ),
    Metric::counter(
        "meshlb_admin_tls_handshake_failures_total",
        &[],
        "TLS handshakes on an admin or metrics listener that failed (no or an unverified client certificate, a plain-HTTP client, a bad ClientHello) or outlasted --admin-head-timeout-ms.",
    ),
    Metric::counter(
        "meshlb_admin_credential_reloads_total",
        &["result"],
        "Re-reads of an admin listener's token and TLS files on reload, by result (a failure keeps the previous credentials).",
    ),
    Metric::counter(
        "meshlb_admin_send_timeouts_total",
        &[],
        "Answers of an admin or metrics listener given up because the client took nothing for --admin-send-timeout-ms (the connection is closed).",
    ),
    Metric::counter(
        "meshlb_admin_connections_refused_total",
        &[],
        "Connections to an admin or metrics listener closed at accept because --admin-max-connections were open.",
    ),
    Metric::counter(
        "meshlb_gossip_replayed_datagrams_total",
        &[],
        "Authentic gossip datagrams refused because they were seen before (replays); also counted as rejected.",
    ),
    Metric::counter(
        "meshlb_gossip_misaddressed_datagrams_total",
        &[],
        "Authentic gossip datagrams refused because they were sent to another node's address (a replay, or a seed address this node lacks as --advertise-alias); also counted as rejected.",
    ),
    Metric::counter(
        "meshlb_gossip_malformed_deltas_total",
        &[],
        "Gossip deltas refused as malformed (a key version above the delta's max_version; vendor/chitchat/PATCHES.md).",
    ),
    Metric::counter(
        "meshlb_gossip_sent_bytes_total",
        &[],
        "Gossip bytes sent.",
    )
    .in_unit(MetricUnit::Bytes),
    Metric::counter(
        "meshlb_gossip_received_bytes_total",
        &[],
        "Gossip bytes received.",
    )
    .in_unit(MetricUnit::Bytes),
    Metric::counter(
        "meshlb_gossip_sent_datagrams_total",
        &[],
        "Gossip datagrams sent.",
    ),
    Metric::counter(
        "meshlb_gossip_received_datagrams_total",
        &[],
        "Gossip datagrams received.",
    ),
    Metric::counter(
        "meshlb_gossip_rejected_packets_total",
        &[],
        "Gossip packets that failed authentication or parsing.",
    ),
    Metric::counter(
        "meshlb_gossip_fragmented_messages_total",
        &[],
        "Gossip messages that needed two datagrams.",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
