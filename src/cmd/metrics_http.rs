//! Prometheus metrics for meshlb processes: the recorder, and a tiny `/metrics` server for
//! probers (aggregators serve it on their admin API).

use std::convert::Infallible;
use std::net::SocketAddr;

use aggregator::admin::guard;
use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Installs the global recorder with node labels; `None` if one is already installed.
/// Bucket bounds (seconds) of every histogram: 50 µs (a DNS answer) to 30 s (a slow probe).
/// Real buckets rather than the exporter's default summaries, so Prometheus can aggregate
/// across nodes (`histogram_quantile` over `_bucket`), as the dashboards in deploy/ do.
const BUCKETS: [f64; 18] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
];

pub fn install(labels: &[(&str, &str)]) -> Option<PrometheusHandle> {
    let mut builder = PrometheusBuilder::new().set_buckets(&BUCKETS).ok()?;
    for (k, v) in labels {
        builder = builder.add_global_label(*k, *v);
    }
    let handle = builder.install_recorder().ok()?;
    describe();
    Some(handle)
}

/// HELP text of every metric (`promtool check metrics` requires it; tests/deploy.rs runs it).
fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    // The control plane (docs/api.md#metrics).
    describe_gauge!(
        "meshlb_config_generation",
        "The mesh config generation this node runs (0: a file of its own, or nothing yet from the primary)."
    );
    describe_gauge!(
        "meshlb_config_primary_seen",
        "1 while a live config primary is announced in gossip, else 0."
    );
    describe_counter!(
        "meshlb_config_fetches_total",
        "Fetches of the config primary's document, by result."
    );
    describe_counter!(
        "meshlb_config_documents_refused_total",
        "Config generations fetched from the primary that did not validate on this node."
    );
    describe_counter!(
        "meshlb_config_fetches_refused_total",
        "Config fetches the primary refused: a bad cluster-key signature or a clock off by more than 300 s."
    );
    // Probers.
    describe_counter!(
        "meshlb_admin_accept_errors_total",
        "Failed accepts on an admin or metrics listener (each waits 5 ms doubling to 1 s before the next)."
    );
    describe_counter!(
        "meshlb_admin_connections_refused_total",
        "Connections to an admin or metrics listener closed at accept because --admin-max-connections were open."
    );
    describe_counter!(
        "meshlb_proxy_connections_refused_total",
        "Client connections closed at accept because their proxy worker was at --proxy-max-connections-per-worker."
    );
    describe_counter!(
        "meshlb_proxy_send_timeouts_total",
        "Answers given up because the client took nothing for --proxy-send-timeout-ms: a stalled HTTP/1 write (connection closed) or an HTTP/2 stream whose window stayed shut (stream reset)."
    );
    describe_counter!(
        "meshlb_l4_accepted_total",
        "Layer-4 TCP connections accepted and UDP flows begun, by load balancer."
    );
    describe_counter!(
        "meshlb_l4_bytes_total",
        "Bytes relayed by layer-4 load balancers, by direction (to_origin, to_client)."
    );
    describe_counter!(
        "meshlb_l4_retries_total",
        "Layer-4 connections tried again on another endpoint after a refused or timed-out connect."
    );
    describe_counter!(
        "meshlb_l4_unserved_total",
        "Layer-4 connections or flows that no endpoint took (no pool could, or every connect failed)."
    );
    describe_counter!(
        "meshlb_l4_endpoint_opened_total",
        "Layer-4 connections and flows opened to an endpoint."
    );
    describe_gauge!(
        "meshlb_l4_endpoint_open",
        "Layer-4 connections and flows open to an endpoint now."
    );
    describe_counter!(
        "meshlb_l4_connect_failures_total",
        "Layer-4 connects to an endpoint that were refused, timed out, or named a host that did not resolve."
    );
    describe_counter!(
        "meshlb_l4_refused_total",
        "Layer-4 TCP connections closed at accept because --l4-max-connections were open."
    );
    describe_counter!(
        "meshlb_l4_flows_evicted_total",
        "Layer-4 UDP flows pushed out of a full flow table (--l4-udp-max-flows)."
    );
    describe_counter!(
        "meshlb_dns_tcp_refused_total",
        "DNS TCP connections closed at accept because --dns-tcp-max-connections were open."
    );
    describe_counter!(
        "meshlb_dns_rrl_total",
        "UDP DNS answers over the response-rate limit, by action: slipped (sent truncated) or dropped."
    );
    describe_counter!(
        "meshlb_proxy_header_sessions_evicted_total",
        "Header-affinity sessions pushed out, least recently used first, because the table was full (--proxy-max-header-sessions)."
    );
    describe_counter!(
        "meshlb_gossip_replayed_datagrams_total",
        "Authentic gossip datagrams refused because they were seen before (replays); also counted as rejected."
    );
    describe_counter!(
        "meshlb_gossip_misaddressed_datagrams_total",
        "Authentic gossip datagrams refused because they were sent to another node's address (a replay, or a seed address this node lacks as --advertise-alias); also counted as rejected."
    );
    describe_counter!(
        "meshlb_gossip_malformed_deltas_total",
        "Gossip deltas refused as malformed (a key version above the delta's max_version; vendor/chitchat/PATCHES.md)."
    );
    describe_counter!(
        "meshlb_drain_decisions_refused_total",
        "Drain decisions from other aggregators refused as stamped beyond now plus the clock skew."
    );
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
    // Configuration reloads (every node).
    describe_gauge!(
        "meshlb_config_last_reload_successful",
        "1 if the last configuration reload (or the start) succeeded, 0 if the file was refused."
    );
    describe_gauge!(
        "meshlb_config_last_reload_success_timestamp_seconds",
        Unit::Seconds,
        "When the configuration in force was loaded (unix seconds)."
    );
    describe_counter!(
        "meshlb_config_reloads_total",
        "Configuration reloads after the start, by result (success, failure)."
    );
    // Gossip (every node).
    describe_counter!(
        "meshlb_gossip_sent_bytes_total",
        Unit::Bytes,
        "Gossip bytes sent."
    );
    describe_counter!(
        "meshlb_gossip_received_bytes_total",
        Unit::Bytes,
        "Gossip bytes received."
    );
    describe_counter!(
        "meshlb_gossip_sent_datagrams_total",
        "Gossip datagrams sent."
    );
    describe_counter!(
        "meshlb_gossip_received_datagrams_total",
        "Gossip datagrams received."
    );
    describe_counter!(
        "meshlb_gossip_rejected_packets_total",
        "Gossip packets that failed authentication or parsing."
    );
    describe_counter!(
        "meshlb_gossip_fragmented_messages_total",
        "Gossip messages that needed two datagrams."
    );
    // Aggregators: the tally.
    describe_gauge!(
        "meshlb_aggregator_ready",
        "1 once the aggregator's answers can be trusted (GET /readyz): every monitored endpoint has a verdict or the warm-up timeout has passed; 0 while it warms up."
    );
    describe_gauge!(
        "meshlb_endpoint_state",
        "The tally's verdict on an endpoint (one-hot over state)."
    );
    describe_gauge!(
        "meshlb_off_roster_probers",
        "Live probers whose datacenter the regions table does not list for their region: their votes do not count."
    );
    describe_gauge!(
        "meshlb_member_state",
        "A monitor group member's own verdict on an endpoint (one-hot over state); monitoring_only members included."
    );
    describe_gauge!(
        "meshlb_pool_state",
        "Pool state from this PoP (one-hot over state)."
    );
    describe_gauge!(
        "meshlb_load_balancer_state",
        "Load balancer state (one-hot over state); critical: traffic on the fallback pool."
    );
    describe_gauge!(
        "meshlb_endpoint_rtt_seconds",
        Unit::Seconds,
        "EWMA of probe RTT to an endpoint measured from a region."
    );
    describe_gauge!(
        "meshlb_pool_rtt_seconds",
        Unit::Seconds,
        "EWMA of probe RTT to a pool measured from a region."
    );
    describe_counter!(
        "meshlb_health_changes_total",
        "Health changes, by kind (endpoint, pool, load_balancer)."
    );
    describe_gauge!("meshlb_tally_votes", "Votes counted in the last tally.");
    describe_gauge!(
        "meshlb_fail_static",
        "1 while the aggregator hears from no prober and serves its last known health."
    );
    describe_histogram!(
        "meshlb_tally_duration_seconds",
        Unit::Seconds,
        "Time to run one tally."
    );
    describe_gauge!(
        "meshlb_mesh_members",
        "Mesh members seen by the aggregator, by role, region and state (live/dead)."
    );
    describe_gauge!(
        "meshlb_config_drift_members",
        "Members gossiping a config hash other than the aggregator's."
    );
    describe_gauge!(
        "meshlb_region_info",
        "Constant 1 per region, labelled with its name and representative coordinates."
    );
    describe_counter!(
        "meshlb_notifications_total",
        "Notification attempts by channel, kind and result (sent, retried, failed)."
    );
    describe_gauge!(
        "meshlb_notifier_sender",
        "1 on the aggregator that sends notifications (the live one with the smallest node id)."
    );
    describe_counter!(
        "meshlb_notifications_dropped_total",
        "Health changes not queued for notification because the queue was full."
    );
    // Aggregators: DNS and the proxy.
    describe_counter!(
        "meshlb_dns_queries_total",
        "DNS queries answered, by load balancer, query type and response code."
    );
    describe_histogram!(
        "meshlb_dns_answer_duration_seconds",
        Unit::Seconds,
        "Time to parse, steer and encode one DNS answer."
    );
    describe_counter!(
        "meshlb_proxy_requests_total",
        "Proxied requests by load balancer, pool, endpoint and status class."
    );
    describe_histogram!(
        "meshlb_proxy_request_duration_seconds",
        Unit::Seconds,
        "Proxied request time until the response head is sent."
    );
    describe_counter!(
        "meshlb_proxy_retries_total",
        "Zero-downtime failover retries."
    );
    describe_counter!(
        "meshlb_proxy_errors_total",
        "The proxy's own error answers, by Cloudflare's code (521 refused, 522 connect timeout, 523 unreachable, 524 no answer in time, 525/526 TLS, 530 no pool, 502 broken answer)."
    );
    describe_counter!(
        "meshlb_proxy_affinity_hits_total",
        "Requests that followed an existing session affinity binding."
    );
    describe_counter!(
        "meshlb_proxy_origin_requests_total",
        "Requests sent to origins by connection: reused (kept alive), new, or resent on a new one after the origin dropped a reused one."
    );
}

/// Where a prober's `POST /-/reload` goes: the token it needs (none configured: refused) and
/// the reload task.
#[derive(Clone)]
pub struct ReloadEndpoint {
    pub token: Option<std::sync::Arc<str>>,
    pub requests: tokio::sync::mpsc::Sender<aggregator::reload::Request>,
}

fn answer(status: hyper::StatusCode, body: String, json: bool) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    let kind = if json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(kind),
    );
    r
}

/// `POST /-/reload` on a prober, as on the aggregator's admin API (`aggregator/src/admin/reload.rs`).
async fn reload(
    endpoint: &ReloadEndpoint,
    req: &hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    use hyper::StatusCode;
    let error = |status: StatusCode, why: &str| {
        answer(
            status,
            serde_json::json!({ "error": why }).to_string(),
            true,
        )
    };
    if let Err(r) = guard::mutation_allowed(
        endpoint.token.as_deref(),
        req.headers(),
        guard::Node::Prober,
    ) {
        return error(r.status, r.reason);
    }
    if req.method() != hyper::Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "/-/reload takes POST");
    }
    match aggregator::reload::ask(&endpoint.requests).await {
        Ok(o) => answer(
            o.status(),
            serde_json::to_string(&o).unwrap_or_default(),
            true,
        ),
        Err(e) => error(e.status, e.reason),
    }
}

/// Serves `GET /metrics` on `addr` (no token), and `POST /-/reload` when `reloads` is given,
/// within `limits` (`aggregator::admin::guard`).
pub async fn serve(
    addr: SocketAddr,
    handle: PrometheusHandle,
    reloads: Option<ReloadEndpoint>,
    limits: guard::Limits,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for /metrics"))?;
    let mut backoff = guard::AcceptBackoff::new();
    let slots = limits.slots();
    let head_timeout = limits.head_timeout;
    loop {
        let (stream, _, slot) = guard::accept(&listener, &mut backoff, &slots).await;
        let handle = handle.clone();
        let reloads = reloads.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let handle = handle.clone();
                let reloads = reloads.clone();
                async move {
                    let response = match (req.uri().path(), &reloads) {
                        ("/metrics", _) => {
                            let mut r = answer(hyper::StatusCode::OK, handle.render(), false);
                            r.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                hyper::header::HeaderValue::from_static(
                                    "text/plain; version=0.0.4",
                                ),
                            );
                            r
                        }
                        ("/-/reload", Some(endpoint)) => reload(endpoint, &req).await,
                        _ => answer(
                            hyper::StatusCode::NOT_FOUND,
                            "not found: /metrics, /-/reload\n".into(),
                            false,
                        ),
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = guard::http1(head_timeout)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
