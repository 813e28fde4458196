//! Per-request metrics with handles registered at start, so a request costs one hash lookup
//! and a few atomic adds instead of building label sets:
//! `meshlb_proxy_requests_total{load_balancer, pool, endpoint, status_class}`,
//! `meshlb_proxy_request_duration_seconds{load_balancer}`, `meshlb_proxy_retries_total`,
//! `meshlb_proxy_affinity_hits_total` (by load balancer) and
//! `meshlb_proxy_errors_total{load_balancer, code}` (the proxy's own error answers).

use lb_core::metric::{Metric, MetricUnit};
use metrics::{counter, histogram, Counter, Histogram};

use lb_core::config::{Config, LbId};
use lb_core::steering::Target;

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The error answers the proxy makes itself, by Cloudflare's codes (`route/forward.rs`,
/// `route/proxy.rs`).
pub(crate) const ERROR_CODES: [u16; 8] = [502, 521, 522, 523, 524, 525, 526, 530];

type Classes = [Counter; 5];

fn classes(lb: &str, pool: &str, endpoint: &str) -> Classes {
    CLASSES.map(|c| {
        counter!("meshlb_proxy_requests_total",
            "load_balancer" => lb.to_string(), "pool" => pool.to_string(),
            "endpoint" => endpoint.to_string(), "status_class" => c)
    })
}

#[derive(Debug)]
pub(crate) struct LbMetrics {
    /// Requests answered without an endpoint (no pool took them, fixed responses); a request
    /// a rule sent to a pool the load balancer does not list is counted under that pool.
    no_target: Classes,
    /// (pool, endpoint) -> counters, for every endpoint this load balancer can reach.
    targets: foldhash::HashMap<(usize, usize), Classes>,
    pub duration: Histogram,
    pub retries: Counter,
    pub affinity_hits: Counter,
    /// `errors[i]` counts `ERROR_CODES[i]`.
    errors: [Counter; 8],
}

impl LbMetrics {
    /// Counts one error answer the proxy made; codes outside `ERROR_CODES` are not counted.
    pub fn error(&self, code: u16) {
        if let Some(i) = ERROR_CODES.iter().position(|&c| c == code) {
            self.errors[i].increment(1);
        }
    }
}

#[derive(Debug)]
pub(crate) struct ProxyMetrics {
    pub lbs: Vec<LbMetrics>,
}

impl ProxyMetrics {
    pub fn new(config: &Config) -> Self {
        let lbs = config
            .load_balancers
            .iter()
            .map(|lb| {
                let mut targets = foldhash::HashMap::default();
                for pool in lb.settings.all_pools() {
                    let p = config.pool(pool);
                    for (i, e) in p.endpoints.iter().enumerate() {
                        targets.insert((pool.0, i), classes(&lb.name, &p.name, &e.name));
                    }
                }
                LbMetrics {
                    no_target: classes(&lb.name, "", ""),
                    targets,
                    duration: histogram!("meshlb_proxy_request_duration_seconds", "load_balancer" => lb.name.clone()),
                    retries: counter!("meshlb_proxy_retries_total", "load_balancer" => lb.name.clone()),
                    affinity_hits: counter!("meshlb_proxy_affinity_hits_total", "load_balancer" => lb.name.clone()),
                    errors: ERROR_CODES.map(|code| {
                        counter!("meshlb_proxy_errors_total", "load_balancer" => lb.name.clone(), "code" => code.to_string())
                    }),
                }
            })
            .collect();
        ProxyMetrics { lbs }
    }

    pub fn request(&self, config: &Config, lb: LbId, target: Option<Target>, status: u16) {
        let Some(m) = self.lbs.get(lb.0) else { return };
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        match target.and_then(|t| m.targets.get(&(t.pool.0, t.endpoint.0)).map(|c| (t, c))) {
            Some((_, c)) => c[class].increment(1),
            None => match target {
                // A rule sent the request to a pool the load balancer does not list.
                Some(t) => {
                    let p = config.pool(t.pool);
                    let e = p
                        .endpoints
                        .get(t.endpoint.0)
                        .map_or("", |e| e.name.as_str());
                    classes(&config.lb(lb).name, &p.name, e)[class].increment(1);
                }
                None => m.no_target[class].increment(1),
            },
        }
    }
}

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_proxy_connections_refused_total",
        &[],
        "Client connections closed at accept because their proxy worker was at --proxy-max-connections-per-worker.",
    ),
    Metric::counter(
        "meshlb_proxy_send_timeouts_total",
        &[],
        "Answers given up because the client took nothing for --proxy-send-timeout-ms: a stalled HTTP/1 write (connection closed) or an HTTP/2 stream whose window stayed shut (stream reset).",
    ),
    Metric::counter(
        "meshlb_proxy_header_sessions_evicted_total",
        &[],
        "Header-affinity sessions pushed out, least recently used first, because the table was full (--proxy-max-header-sessions).",
    ),
    Metric::counter(
        "meshlb_proxy_requests_total",
        &["endpoint", "load_balancer", "pool", "status_class"],
        "Proxied requests by load balancer, pool, endpoint and status class.",
    ),
    Metric::histogram(
        "meshlb_proxy_request_duration_seconds",
        &["load_balancer"],
        "Proxied request time until the response head is sent.",
    )
    .in_unit(MetricUnit::Seconds),
    Metric::counter(
        "meshlb_proxy_retries_total",
        &["load_balancer"],
        "Zero-downtime failover retries.",
    ),
    Metric::counter(
        "meshlb_proxy_errors_total",
        &["code", "load_balancer"],
        "The proxy's own error answers, by Cloudflare's code (521 refused, 522 connect timeout, 523 unreachable, 524 no answer in time, 525/526 TLS, 530 no pool, 502 broken answer).",
    ),
    Metric::counter(
        "meshlb_proxy_affinity_hits_total",
        &["load_balancer"],
        "Requests that followed an existing session affinity binding.",
    ),
    Metric::counter(
        "meshlb_proxy_origin_requests_total",
        &["connection"],
        "Requests sent to origins by connection: reused (kept alive), new, or resent on a new one after the origin dropped a reused one.",
    ),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
