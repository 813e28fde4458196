//! `GET /explain?lb=NAME[&pop=REGION][&client=IP][&mode=dns|proxy]`: why a request from
//! there goes where it goes, on the current snapshot (one steering decision, explained).

use std::net::IpAddr;

use http::StatusCode;
use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::request::{Mode, Pop, RequestContext};
use lb_core::steering::{Engine, Outcome};
use lb_core::Region;
use serde::Serialize;

use super::reply::{error, json, Reply};
use crate::private_reach::PrivateReach;
use crate::shared::Shared;

#[derive(Serialize)]
struct Explained {
    load_balancer: String,
    pop: String,
    mode: &'static str,
    outcome: String,
    ttl: u32,
    matched_rules: Vec<String>,
    steps: Vec<String>,
    /// For a proxied load balancer asked over DNS: the PoPs that were eligible, nearest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pops: Vec<PopExplained>,
    /// The private endpoints of the outcome and how this PoP reaches them (through which
    /// tunnel, its connections here, its holders).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    private: Vec<PrivateExplained>,
}

#[derive(Serialize)]
struct PrivateExplained {
    endpoint: String,
    #[serde(flatten)]
    reach: PrivateReach,
}

#[derive(Serialize)]
struct PopExplained {
    node: String,
    region: String,
    addresses: Vec<std::net::IpAddr>,
    distance_km: f64,
}

/// Explains one steering decision for the query's load balancer, PoP, client and mode: the
/// query read, the load balancer found and its mode settled, the request made up, decided and
/// told. A proxied load balancer asked over DNS is answered with PoPs (`explain_pops`).
pub(super) fn explain(shared: &Shared, query: &str) -> Reply {
    let asked = match Asked::parse(query, shared.setup.settings.region) {
        Ok(asked) => asked,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let in_force = shared.in_force.load();
    let config = in_force.config();
    let Some(lb) = asked.lb.as_deref().and_then(|n| config.load_balancer(n)) else {
        return error(StatusCode::NOT_FOUND, "lb: no such load balancer");
    };
    let mode = match mode_for(asked.mode.as_deref(), lb.proxied) {
        Ok(mode) => mode,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    // The table the aggregator runs with (`--regions`), not the embedded one.
    let regions = &shared.setup.regions;
    let key = lb_core::affinity::AffinityKey::derive(b"meshlb explain");
    let engine = Engine::new(config, regions, &key);
    let snapshot = in_force.generation.snapshot();
    let now = lb_core::clock::unix_secs();
    let pop = asked.pop;
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
    ctx.client_ip = asked.client;
    ctx.explain = true;
    if lb.proxied && mode == Mode::Dns {
        return explain_pops(shared, lb, &ctx);
    }
    let mut rng = rand::rng();
    let mut d = engine.decide(lb, &snapshot, &ctx, &mut rng);
    let private = private_of(shared, config, &d.outcome);
    d.explanation
        .extend(private.iter().map(|p| p.reach.in_words(&p.endpoint)));
    json(
        StatusCode::OK,
        &Explained {
            load_balancer: lb.name.clone(),
            pop: pop.code().to_string(),
            mode: if mode == Mode::Dns { "dns" } else { "proxy" },
            outcome: outcome_text(config, &d.outcome),
            ttl: d.ttl,
            matched_rules: d.matched_rules,
            steps: d.explanation,
            pops: Vec::new(),
            private,
        },
    )
}

/// What `/explain` was asked: the load balancer, the PoP's region (this aggregator's unless
/// given), the client's address, the mode.
struct Asked {
    lb: Option<String>,
    pop: Region,
    client: Option<IpAddr>,
    mode: Option<String>,
}

impl Asked {
    /// Reads the query string; the error names the parameter at fault.
    fn parse(query: &str, here: Region) -> Result<Asked, String> {
        let mut asked = Asked {
            lb: None,
            pop: here,
            client: None,
            mode: None,
        };
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "lb" => asked.lb = Some(v.into_owned()),
                "pop" => match v.parse() {
                    Ok(r) => asked.pop = r,
                    Err(e) => return Err(format!("pop: {e}")),
                },
                "client" => match v.parse::<IpAddr>() {
                    Ok(ip) => asked.client = Some(ip),
                    Err(_) => return Err(format!("client: `{v}` is not an IP address")),
                },
                "mode" => asked.mode = Some(v.into_owned()),
                other => {
                    return Err(format!(
                        "unknown parameter `{other}` (lb, pop, client, mode)"
                    ))
                }
            }
        }
        Ok(asked)
    }
}

/// The mode asked for, else the load balancer's own: the proxy's when it is proxied.
fn mode_for(asked: Option<&str>, proxied: bool) -> Result<Mode, String> {
    match asked {
        Some("dns") => Ok(Mode::Dns),
        Some("proxy") => Ok(Mode::Proxy),
        None if proxied => Ok(Mode::Proxy),
        None => Ok(Mode::Dns),
        Some(other) => Err(format!("mode: `{other}` (dns or proxy)")),
    }
}

/// A decision's outcome in words, its endpoints named `pool/endpoint`.
fn outcome_text(config: &Config, outcome: &Outcome) -> String {
    let name = |p: PoolId, e: EndpointId| {
        format!(
            "{}/{}",
            config.pool(p).name,
            config.pool(p).endpoints[e.0].name
        )
    };
    match outcome {
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
    }
}

/// A proxied load balancer over DNS: the live, ready PoPs, nearest to the client first, as
/// the DNS server answers (`lb-core/dns/src/responder.rs`); never its origins.
fn explain_pops(
    shared: &Shared,
    lb: &lb_core::config::LoadBalancer,
    ctx: &lb_core::request::RequestContext<'_>,
) -> Reply {
    let regions = &shared.setup.regions;
    let settings = &lb.settings;
    let client = lb_core::steering::locate(
        settings.location_strategy,
        settings.steering_policy,
        ctx,
        regions,
    );
    let pops = shared.pops.load();
    let ranked = lb_core::pops::nearest_first(&pops, client.coordinates, regions);
    let mut steps = vec![format!(
        "proxied: answered with meshlb's PoPs, never its origins; the client is located by {} in {}",
        client.source.name(),
        client.region.code()
    )];
    steps.push(format!(
        "{} live, ready PoP(s) advertise proxy addresses",
        ranked.len()
    ));
    let outcome = match ranked.first() {
        Some(first) => format!(
            "answer the PoPs nearest first: {} ({}, {:.0} km) first",
            first.pop.node,
            first.pop.region.code(),
            first.distance_km
        ),
        None => "NODATA with the SOA: no PoP advertises its proxy (--advertise-proxy)".into(),
    };
    json(
        StatusCode::OK,
        &Explained {
            load_balancer: lb.name.clone(),
            pop: ctx.pop.region.code().to_string(),
            mode: "dns",
            outcome,
            ttl: settings.ttl,
            matched_rules: Vec::new(),
            steps,
            pops: ranked
                .iter()
                .map(|r| PopExplained {
                    node: r.pop.node.clone(),
                    region: r.pop.region.code().to_string(),
                    addresses: r.pop.addresses.clone(),
                    distance_km: (r.distance_km * 10.0).round() / 10.0,
                })
                .collect(),
            private: Vec::new(),
        },
    )
}

/// The private endpoints an outcome forwards to or answers, each with its reach from here.
fn private_of(shared: &Shared, config: &Config, outcome: &Outcome) -> Vec<PrivateExplained> {
    let targets: Vec<(PoolId, EndpointId)> = match outcome {
        Outcome::Forward { target, retry } => std::iter::once(target)
            .chain(retry.as_ref())
            .map(|t| (t.pool, t.endpoint))
            .collect(),
        Outcome::Answer { pool, endpoints } => endpoints.iter().map(|&e| (*pool, e)).collect(),
        Outcome::Fixed(_) | Outcome::NoPool => Vec::new(),
    };
    targets
        .into_iter()
        .filter_map(|(p, e)| {
            let reach = PrivateReach::of(shared, config, p, e)?;
            let pool = config.pool(p);
            Some(PrivateExplained {
                endpoint: format!("{}/{}", pool.name, pool.endpoints[e.0].name),
                reach,
            })
        })
        .collect()
}
