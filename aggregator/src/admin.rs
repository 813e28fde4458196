//! The admin API (DESIGN section 6), JSON over HTTP with an optional bearer token:
//!
//! - `GET /status`: every load balancer, pool and endpoint with its state and the votes behind
//!   it (per region, per datacenter: healthy, RTT, code, reason — the shape of Cloudflare's
//!   pool health `pop_health`), EWMA RTTs, whether the aggregator is static.
//! - `GET /events?since=&until=&pool=&endpoint=`: health changes (unix ms bounds).
//! - `GET /members`: mesh members, their tags and liveness, config drift.
//! - `GET /explain?lb=NAME[&pop=REGION][&client=IP][&mode=dns|proxy]`: why a request from
//!   there goes where it goes, on the current snapshot (one steering decision, explained).
//! - `GET /metrics`: Prometheus text format, no token needed.
//! - `GET /healthz`: liveness of the aggregator itself, no token needed.
//! - `GET /readyz`: 200 once its answers can be trusted (every monitored endpoint has a
//!   verdict, or the warm-up timeout has passed), 503 before; no token needed.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use lb_core::config::{EndpointId, PoolId};
use serde::Serialize;
use tokio::net::TcpListener;

use crate::events::{EventFilter, RegionVotes};
use crate::service::Shared;

#[derive(Serialize)]
struct Status {
    snapshot_version: u64,
    fail_static: bool,
    votes_counted: usize,
    load_balancers: Vec<LbStatus>,
    pools: Vec<PoolStatus>,
}

#[derive(Serialize)]
struct LbStatus {
    name: String,
    state: String,
    proxied: bool,
}

#[derive(Serialize)]
struct PoolStatus {
    name: String,
    state: &'static str,
    rtt_ms: BTreeMap<String, f64>,
    endpoints: Vec<EndpointStatus>,
}

#[derive(Serialize)]
struct EndpointStatus {
    name: String,
    address: String,
    enabled: bool,
    healthy: Option<bool>,
    verdict: String,
    rtt_ms: BTreeMap<String, f64>,
    /// Drained through `/drain` since (unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    drained_since: Option<u64>,
    regions: Vec<RegionVotes>,
}

fn status(shared: &Shared) -> Status {
    let config = &shared.config;
    let snapshot = shared.snapshot.load();
    let ballots = shared.ballots.load();
    let lb_states = shared.lb_states.load();
    let region = shared.settings.region;
    let pools = config
        .pools
        .iter()
        .enumerate()
        .map(|(pi, p)| PoolStatus {
            name: p.name.clone(),
            state: snapshot.pool_state(config, PoolId(pi), region).name(),
            rtt_ms: snapshot
                .pool(PoolId(pi))
                .rtt_ms
                .iter()
                .map(|(r, v)| (r.code().to_string(), v))
                .collect(),
            endpoints: p
                .endpoints
                .iter()
                .enumerate()
                .map(|(ei, e)| {
                    let h = snapshot.endpoint(PoolId(pi), EndpointId(ei));
                    EndpointStatus {
                        name: e.name.clone(),
                        address: e.address.to_string(),
                        enabled: e.enabled,
                        healthy: match h.verdict {
                            lb_core::health::Verdict::Healthy => Some(true),
                            lb_core::health::Verdict::Unhealthy => Some(false),
                            lb_core::health::Verdict::Unknown => None,
                        },
                        verdict: format!("{:?}", h.verdict).to_lowercase(),
                        drained_since: h.disabled_at,
                        rtt_ms: h
                            .rtt_ms
                            .iter()
                            .map(|(r, v)| (r.code().to_string(), v))
                            .collect(),
                        regions: if p.monitor.is_some() {
                            shared.endpoint_votes(&ballots, PoolId(pi), EndpointId(ei))
                        } else {
                            Vec::new()
                        },
                    }
                })
                .collect(),
        })
        .collect();
    Status {
        snapshot_version: snapshot.version,
        fail_static: snapshot.fail_static,
        votes_counted: shared.votes_counted.load(Ordering::Relaxed),
        load_balancers: config
            .load_balancers
            .iter()
            .enumerate()
            .map(|(i, lb)| LbStatus {
                name: lb.name.clone(),
                state: lb_states
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or("unknown".to_string(), |s| format!("{s:?}").to_lowercase()),
                proxied: lb.proxied,
            })
            .collect(),
        pools,
    }
}

#[derive(Serialize)]
struct Explained {
    load_balancer: String,
    pop: String,
    mode: &'static str,
    outcome: String,
    ttl: u32,
    matched_rules: Vec<String>,
    steps: Vec<String>,
}

fn explain(shared: &Shared, query: &str) -> Response<Full<Bytes>> {
    use lb_core::request::{Mode, Pop, RequestContext};
    use lb_core::steering::{Engine, Outcome};
    let (mut lb_name, mut pop, mut client, mut mode) = (None, shared.settings.region, None, None);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "lb" => lb_name = Some(v.into_owned()),
            "pop" => match v.parse() {
                Ok(r) => pop = r,
                Err(e) => return error(StatusCode::BAD_REQUEST, &format!("pop: {e}")),
            },
            "client" => match v.parse::<std::net::IpAddr>() {
                Ok(ip) => client = Some(ip),
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("client: `{v}` is not an IP address"),
                    )
                }
            },
            "mode" => mode = Some(v.into_owned()),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown parameter `{other}` (lb, pop, client, mode)"),
                )
            }
        }
    }
    let config = &shared.config;
    let Some(lb) = lb_name.as_deref().and_then(|n| config.load_balancer(n)) else {
        return error(StatusCode::NOT_FOUND, "lb: no such load balancer");
    };
    let mode = match mode.as_deref() {
        Some("dns") => Mode::Dns,
        Some("proxy") => Mode::Proxy,
        None if lb.proxied => Mode::Proxy,
        None => Mode::Dns,
        Some(other) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("mode: `{other}` (dns or proxy)"),
            )
        }
    };
    let regions = match lb_core::RegionsTable::embedded() {
        Ok(r) => r,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let key = lb_core::affinity::AffinityKey::derive(b"meshlb explain");
    let engine = Engine::new(config, &regions, &key);
    let snapshot = shared.snapshot.load();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut ctx = RequestContext::new(
        mode,
        Pop {
            region: pop,
            datacenter: None,
            country: None,
            coordinates: regions.region(pop).coordinates,
        },
        now,
    );
    ctx.client_ip = client;
    ctx.explain = true;
    let mut rng = rand::rng();
    let d = engine.decide(lb, &snapshot, &ctx, &mut rng);
    let name = |p: lb_core::config::PoolId, e: EndpointId| {
        format!(
            "{}/{}",
            config.pool(p).name,
            config.pool(p).endpoints[e.0].name
        )
    };
    let outcome = match &d.outcome {
        Outcome::Forward { target, retry } => format!(
            "forward to {}{}",
            name(target.pool, target.endpoint),
            retry.map_or(String::new(), |r| format!(
                " (retry at {})",
                name(r.pool, r.endpoint)
            ))
        ),
        Outcome::Answer { pool, endpoints } => {
            let list: Vec<String> = endpoints.iter().map(|&e| name(*pool, e)).collect();
            if list.is_empty() {
                "NODATA".to_string()
            } else {
                format!("answer {}", list.join(", "))
            }
        }
        Outcome::Fixed(f) => format!("fixed response {}", f.status_code),
        Outcome::NoPool => "no pool: HTTP 530 / NODATA with the SOA".to_string(),
    };
    json(
        StatusCode::OK,
        &Explained {
            load_balancer: lb.name.clone(),
            pop: pop.code().to_string(),
            mode: if mode == Mode::Dns { "dns" } else { "proxy" },
            outcome,
            ttl: d.ttl,
            matched_rules: d.matched_rules,
            steps: d.explanation,
        },
    )
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

/// Compares in time independent of where the strings differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn route(shared: &Shared, token: Option<&str>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path == "/healthz" {
        return json(StatusCode::OK, &serde_json::json!({ "ok": true }));
    }
    // For whatever routes clients here (a readiness probe, an anycast announcer): no secrets.
    if path == "/readyz" {
        let readiness = shared.readiness();
        let status = if readiness.ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return json(status, &readiness);
    }
    // Metrics carry states and counts, no secrets: scraped without the token.
    if path == "/metrics" {
        let text = shared
            .metrics
            .as_ref()
            .map_or_else(String::new, |h| h.render());
        let mut r = Response::new(Full::new(Bytes::from(text)));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; version=0.0.4"),
        );
        return r;
    }
    if let Some(token) = token {
        let given = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| same_token(g, token)) {
            return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
        }
    }
    if path == "/drain" {
        return drain(shared, req.method(), req.uri().query().unwrap_or(""));
    }
    if req.method() != http::Method::GET {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "the admin API is read-only apart from /drain: use GET",
        );
    }
    match path {
        "/status" => json(StatusCode::OK, &status(shared)),
        "/members" => json(StatusCode::OK, &**shared.members.load()),
        "/events" => {
            let mut filter = EventFilter::default();
            let query = req.uri().query().unwrap_or("");
            for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
                match &*k {
                    "since" | "until" => match v.parse::<u64>() {
                        Ok(ms) if k == "since" => filter.since_ms = Some(ms),
                        Ok(ms) => filter.until_ms = Some(ms),
                        Err(_) => {
                            return error(
                                StatusCode::BAD_REQUEST,
                                &format!("{k}: expected unix milliseconds, got `{v}`"),
                            )
                        }
                    },
                    "pool" => filter.pool = Some(v.into_owned()),
                    "endpoint" => filter.endpoint = Some(v.into_owned()),
                    other => {
                        return error(
                            StatusCode::BAD_REQUEST,
                            &format!("unknown parameter `{other}` (since, until, pool, endpoint)"),
                        )
                    }
                }
            }
            match shared.events.lock() {
                Ok(log) => json(StatusCode::OK, &log.query(&filter)),
                Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "event log unavailable"),
            }
        }
        "/explain" => explain(shared, req.uri().query().unwrap_or("")),
        _ => error(
            StatusCode::NOT_FOUND,
            "no such endpoint: /status, /events, /members, /explain, /healthz, /readyz",
        ),
    }
}

#[derive(Serialize)]
struct Drained {
    pool: String,
    endpoint: String,
    since: u64,
}

/// `GET /drain` lists drained endpoints; `POST /drain?pool=P&endpoint=E` drains one (no new
/// traffic; affinity sessions stay for the load balancer's `drain_duration`, Cloudflare's
/// "disable origin"); `DELETE` the same undoes it. Per aggregator: drain on each.
fn drain(shared: &Shared, method: &http::Method, query: &str) -> Response<Full<Bytes>> {
    let config = &shared.config;
    let list = |drains: &std::collections::BTreeMap<(PoolId, EndpointId), u64>| {
        let v: Vec<Drained> = drains
            .iter()
            .map(|(&(p, e), &since)| Drained {
                pool: config.pool(p).name.clone(),
                endpoint: config.pool(p).endpoints[e.0].name.clone(),
                since,
            })
            .collect();
        json(StatusCode::OK, &v)
    };
    if method == http::Method::GET {
        return match shared.drains.lock() {
            Ok(drains) => list(&drains),
            Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "drain table unavailable"),
        };
    }
    if method != http::Method::POST && method != http::Method::DELETE {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "/drain takes GET, POST or DELETE",
        );
    }
    let (mut pool, mut endpoint) = (None, None);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*k {
            "pool" => pool = Some(v.into_owned()),
            "endpoint" => endpoint = Some(v.into_owned()),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("unknown parameter `{other}` (pool, endpoint)"),
                )
            }
        }
    }
    let (Some(pool), Some(endpoint)) = (pool, endpoint) else {
        return error(StatusCode::BAD_REQUEST, "give pool=NAME and endpoint=NAME");
    };
    let Some(p) = config.pool_by_name(&pool) else {
        return error(StatusCode::NOT_FOUND, &format!("no pool is named `{pool}`"));
    };
    let Some(e) = config.pool(p).endpoint_by_name(&endpoint) else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("pool `{pool}` has no endpoint `{endpoint}`"),
        );
    };
    let (Ok(mut decisions), Ok(mut drains)) = (shared.drain_decisions.lock(), shared.drains.lock())
    else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "drain table unavailable");
    };
    let at_ms = unix_ms();
    let draining = method == http::Method::POST;
    // A drain already in force keeps its start; the decision is published in gossip by the
    // tally loop, and takes effect here at once.
    let since = drains
        .get(&(p, e))
        .copied()
        .unwrap_or_else(lb_edge::unix_now);
    decisions.insert(
        (p, e),
        mesh::keys::DrainDecision {
            pool,
            endpoint,
            draining,
            since,
            at_ms,
        },
    );
    if draining {
        drains.insert((p, e), since);
    } else {
        drains.remove(&(p, e));
    }
    list(&drains)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Serves the admin API on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, token: Option<String>) {
    let token: Option<Arc<str>> = token.map(Into::into);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        let token = token.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = route(&shared, token.as_deref(), &req);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The admin listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for the admin API: {source}")]
pub struct BindError {
    pub addr: SocketAddr,
    source: std::io::Error,
}

/// Binds the admin listener (an error names the address).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })
}
