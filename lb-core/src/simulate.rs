//! `meshlb simulate`: run many steering decisions offline against a config and a health state,
//! and count where they went. The operator's dry run, and a contract other tests rely on.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::affinity::AffinityKey;
use crate::config::{Config, EndpointId, LoadBalancer, PoolId};
use crate::health::{EndpointHealth, HealthSnapshot, PoolHealth, Verdict};
use crate::region::{Region, RegionMap};
use crate::regions_table::{CountryCode, RegionsTable};
use crate::request::{HttpFields, Location, Mode, Pop, RequestContext};
use crate::steering::{AffinityUpdate, Engine, Outcome};

/// The health state file (`--state`). Anything not listed is healthy, with no RTT data and no
/// open requests; a pool's counts default to the sum of its endpoints'.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointState>,
    #[serde(default)]
    pub pools: BTreeMap<String, PoolStateEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointState {
    /// Unset: healthy. Refused for a pool without a monitor, whose endpoints are always
    /// healthy: such a state could not happen.
    pub healthy: Option<bool>,
    /// Per-region verdicts, for pools with regional health sources.
    #[serde(default)]
    pub regional: BTreeMap<String, bool>,
    #[serde(default)]
    pub rtt_ms: BTreeMap<String, f64>,
    #[serde(default)]
    pub outstanding: u32,
    #[serde(default)]
    pub connections: u32,
    /// Unix seconds when the endpoint was disabled (drain start).
    pub disabled_at: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolStateEntry {
    #[serde(default)]
    pub rtt_ms: BTreeMap<String, f64>,
    pub outstanding: Option<u32>,
    pub connections: Option<u32>,
}

/// A state file's entry that does not fit the config: the field's path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct StateError {
    pub path: String,
    pub reason: String,
}

fn state_error(path: impl Into<String>, reason: impl Into<String>) -> StateError {
    StateError {
        path: path.into(),
        reason: reason.into(),
    }
}

fn region_map(path: &str, raw: &BTreeMap<String, f64>) -> Result<RegionMap<f64>, StateError> {
    raw.iter()
        .map(|(r, &v)| {
            let region = r
                .parse::<Region>()
                .map_err(|e| state_error(format!("{path}.{r}"), e.to_string()))?;
            if !v.is_finite() || v < 0.0 {
                return Err(state_error(
                    format!("{path}.{r}"),
                    "RTT must be a non-negative number of ms",
                ));
            }
            Ok((region, v))
        })
        .collect()
}

impl StateFile {
    /// Builds the snapshot; names that are not in the config are errors.
    pub fn to_snapshot(&self, config: &Config) -> Result<HealthSnapshot, StateError> {
        let mut snap = HealthSnapshot::uniform(config, Verdict::Healthy);
        for (key, st) in &self.endpoints {
            let (pool_name, ep_name) = key.split_once('/').ok_or_else(|| {
                state_error(format!("endpoints.{key}"), "expected \"<pool>/<endpoint>\"")
            })?;
            let pool = config.pool_by_name(pool_name).ok_or_else(|| {
                state_error(
                    format!("endpoints.{key}"),
                    format!("no pool is named `{pool_name}`"),
                )
            })?;
            let ep = config.pool(pool).endpoint_by_name(ep_name).ok_or_else(|| {
                state_error(
                    format!("endpoints.{key}"),
                    format!("pool `{pool_name}` has no endpoint `{ep_name}`"),
                )
            })?;
            if !config.pool(pool).is_monitored()
                && (st.healthy.is_some() || !st.regional.is_empty())
            {
                return Err(state_error(
                    format!("endpoints.{key}"),
                    format!(
                        "pool `{pool_name}` has no monitor: its endpoints are always healthy, so a state file cannot set their health"
                    ),
                ));
            }
            let mut regional = RegionMap::default();
            for (r, &v) in &st.regional {
                let region = r.parse::<Region>().map_err(|e| {
                    state_error(format!("endpoints.{key}.regional.{r}"), e.to_string())
                })?;
                regional.set(region, Some(v));
            }
            snap.endpoints[pool.0][ep.0] = EndpointHealth {
                verdict: if st.healthy.unwrap_or(true) {
                    Verdict::Healthy
                } else {
                    Verdict::Unhealthy
                },
                regional,
                rtt_ms: region_map(&format!("endpoints.{key}.rtt_ms"), &st.rtt_ms)?,
                outstanding: st.outstanding,
                connections: st.connections,
                disabled_at: st.disabled_at,
            };
        }
        for (i, eps) in snap.endpoints.iter().enumerate() {
            snap.pools[i] = PoolHealth {
                rtt_ms: RegionMap::default(),
                outstanding: eps
                    .iter()
                    .fold(0u32, |a, e| a.saturating_add(e.outstanding)),
                connections: eps
                    .iter()
                    .fold(0u32, |a, e| a.saturating_add(e.connections)),
            };
        }
        for (name, st) in &self.pools {
            let pool = config.pool_by_name(name).ok_or_else(|| {
                state_error(
                    format!("pools.{name}"),
                    format!("no pool is named `{name}`"),
                )
            })?;
            let entry = &mut snap.pools[pool.0];
            entry.rtt_ms = region_map(&format!("pools.{name}.rtt_ms"), &st.rtt_ms)?;
            if let Some(o) = st.outstanding {
                entry.outstanding = o;
            }
            if let Some(c) = st.connections {
                entry.connections = c;
            }
        }
        Ok(snap)
    }
}

/// Where the simulated clients are and how many requests they make.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub mode: Mode,
    pub pop_region: Region,
    pub pop_datacenter: Option<String>,
    pub clients: Clients,
    pub country: Option<CountryCode>,
    pub ecs: Option<IpNet>,
    pub requests: u64,
    pub seed: u64,
    /// The fixed clock of the run, Unix seconds.
    pub now: u64,
}

/// Which client addresses the requests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clients {
    None,
    One(IpAddr),
    /// N distinct addresses drawn from the seed; request i comes from client i mod N.
    Many(u32),
}

/// The counts, printed as JSON.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Report {
    pub lb: String,
    pub requests: u64,
    pub pools: BTreeMap<String, u64>,
    pub endpoints: BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answers: Option<BTreeMap<String, u64>>,
    pub none: u64,
    pub fixed_responses: u64,
}

/// The most distinct clients a simulation draws (memory stays small, drawing terminates).
pub const MAX_CLIENTS: u32 = 1_000_000;

/// Draws `n` distinct IPv4 client addresses from `rng`, avoiding 0.x and multicast space.
fn draw_clients(n: u32, rng: &mut StdRng) -> Vec<IpAddr> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n as usize);
    while out.len() < n as usize {
        let a = Ipv4Addr::from(rng.random_range(0x0100_0000u32..0xE000_0000));
        if seen.insert(a) {
            out.push(IpAddr::V4(a));
        }
    }
    out
}

pub fn run(
    config: &Config,
    regions: &RegionsTable,
    lb: &LoadBalancer,
    snapshot: &HealthSnapshot,
    sim: &Simulation,
) -> Report {
    let key = AffinityKey::derive(b"meshlb simulate");
    let engine = Engine::new(config, regions, &key);
    let mut rng = StdRng::seed_from_u64(sim.seed);
    let clients: Vec<Option<IpAddr>> = match &sim.clients {
        Clients::None => vec![None],
        Clients::One(ip) => vec![Some(*ip)],
        Clients::Many(n) => draw_clients((*n).max(1), &mut rng)
            .into_iter()
            .map(Some)
            .collect(),
    };
    let pop_dc = sim
        .pop_datacenter
        .as_deref()
        .and_then(|dc| regions.datacenter(dc));
    let pop_coordinates = pop_dc.map_or(regions.region(sim.pop_region).coordinates, |d| {
        d.coordinates
    });
    let location = sim.country.map(|c| Location {
        country: Some(c),
        region: regions.country_region(c),
        coordinates: None,
    });
    let mut report = Report {
        lb: lb.name.clone(),
        requests: sim.requests,
        pools: BTreeMap::new(),
        endpoints: BTreeMap::new(),
        answers: (sim.mode == Mode::Dns).then(BTreeMap::new),
        none: 0,
        fixed_responses: 0,
    };
    let mut cookie_jar: HashMap<usize, String> = HashMap::new();
    let no_headers: Vec<(String, String)> = Vec::new();
    for i in 0..sim.requests {
        let client_index = (i % clients.len() as u64) as usize;
        let client = clients[client_index];
        let http = HttpFields {
            method: "GET",
            host: &lb.name,
            path: "/",
            query: "",
            headers: &no_headers,
            cookies: &no_headers,
            tls: false,
        };
        let ctx = RequestContext {
            mode: sim.mode,
            pop: Pop {
                region: sim.pop_region,
                datacenter: sim.pop_datacenter.as_deref(),
                country: pop_dc.map(|d| d.country),
                coordinates: pop_coordinates,
            },
            client_ip: client,
            client_location: location,
            ecs: sim.ecs.map(|net| (net, location.unwrap_or_default())),
            http: (sim.mode == Mode::Proxy).then_some(http),
            dns: None,
            affinity_cookie: cookie_jar.get(&client_index).map(String::as_str),
            header_binding: None,
            load: None,
            now: sim.now,
            explain: false,
        };
        let decision = engine.decide(lb, snapshot, &ctx, &mut rng);
        if let AffinityUpdate::SetCookie(c) = decision.affinity {
            cookie_jar.insert(client_index, c.value);
        }
        match decision.outcome {
            Outcome::Forward { target, .. } => {
                count(&mut report, config, target.pool, &[target.endpoint]);
            }
            Outcome::Answer { pool, endpoints } => {
                count(&mut report, config, pool, &endpoints);
                let p = config.pool(pool);
                let mut addrs: Vec<String> = endpoints
                    .iter()
                    .map(|e| p.endpoints[e.0].address.to_string())
                    .collect();
                addrs.sort();
                if let Some(a) = report.answers.as_mut() {
                    *a.entry(addrs.join(",")).or_default() += 1;
                }
            }
            Outcome::Fixed(_) => report.fixed_responses += 1,
            Outcome::NoPool => report.none += 1,
        }
    }
    report
}

fn count(report: &mut Report, config: &Config, pool: PoolId, endpoints: &[EndpointId]) {
    let p = config.pool(pool);
    *report.pools.entry(p.name.clone()).or_default() += 1;
    for e in endpoints {
        *report
            .endpoints
            .entry(format!("{}/{}", p.name, p.endpoints[e.0].name))
            .or_default() += 1;
    }
}
