//! Engine tests: every rule of docs/design.md#steering and Cloudflare's and Azure's worked examples, on configs
//! written as TOML the way an operator would.

mod affinity;
mod endpoint;
mod rules;
mod traffic;
mod why;

use std::collections::BTreeMap;
use std::net::IpAddr;

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::affinity::AffinityKey;
use crate::config::{Config, LoadBalancer};
use crate::health::{HealthSnapshot, Verdict};
use crate::region::Region;
use crate::regions_table::RegionsTable;
use crate::request::{Mode, Pop, RequestContext};
use crate::steering::{Decision, Engine, Outcome};

pub(super) fn regions() -> RegionsTable {
    RegionsTable::embedded().expect("embedded regions table")
}

pub(super) fn config(toml: &str) -> Config {
    match Config::parse("test.toml", toml, &regions()) {
        Ok(c) => c,
        Err(e) => panic!("test config invalid:\n{e}"),
    }
}

/// A test world: config, snapshot (all healthy unless changed), regions, key.
pub(super) struct World {
    pub config: Config,
    pub health: HealthSnapshot,
    pub regions: RegionsTable,
    pub key: AffinityKey,
}

impl World {
    pub fn new(toml: &str) -> Self {
        let config = config(toml);
        let health = HealthSnapshot::uniform(&config, Verdict::Healthy);
        World {
            config,
            health,
            regions: regions(),
            key: AffinityKey::derive(b"test"),
        }
    }

    pub fn lb(&self, name: &str) -> &LoadBalancer {
        self.config
            .load_balancer(name)
            .expect("load balancer exists")
    }

    pub fn set(&mut self, endpoint: &str, verdict: Verdict) {
        let (pool, ep) = self.ids(endpoint);
        self.health.endpoints[pool][ep].verdict = verdict;
    }

    pub fn ids(&self, endpoint: &str) -> (usize, usize) {
        let (p, e) = endpoint.split_once('/').expect("pool/endpoint");
        let pool = self.config.pool_by_name(p).expect("pool");
        let ep = self
            .config
            .pool(pool)
            .endpoint_by_name(e)
            .expect("endpoint");
        (pool.0, ep.0)
    }

    pub fn pop(&self, region: Region) -> Pop<'static> {
        Pop {
            region,
            datacenter: None,
            country: None,
            coordinates: self.regions.region(region).coordinates,
        }
    }

    pub fn ctx(&self, mode: Mode, region: Region) -> RequestContext<'static> {
        let mut c = RequestContext::new(mode, self.pop(region), 1_800_000_000);
        c.explain = true;
        c
    }

    pub fn decide(&self, lb: &str, ctx: &RequestContext<'_>, rng: &mut StdRng) -> Decision {
        Engine::new(&self.config, &self.regions, &self.key).decide(
            self.lb(lb),
            &self.health,
            ctx,
            rng,
        )
    }

    /// Runs `n` decisions and returns the share of each "pool/endpoint" (proxy) or "pool" key.
    pub fn shares(
        &self,
        lb: &str,
        ctx: &RequestContext<'_>,
        n: u32,
        by_endpoint: bool,
    ) -> BTreeMap<String, f64> {
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for _ in 0..n {
            let key = self.label(&self.decide(lb, ctx, &mut rng).outcome, by_endpoint);
            *counts.entry(key).or_default() += 1;
        }
        counts
            .into_iter()
            .map(|(k, c)| (k, f64::from(c) / f64::from(n)))
            .collect()
    }

    pub fn label(&self, outcome: &Outcome, by_endpoint: bool) -> String {
        match outcome {
            Outcome::Forward { target, .. } => {
                let p = self.config.pool(target.pool);
                if by_endpoint {
                    format!("{}/{}", p.name, p.endpoints[target.endpoint.0].name)
                } else {
                    p.name.clone()
                }
            }
            Outcome::Answer { pool, endpoints } => {
                let p = self.config.pool(*pool);
                if by_endpoint {
                    let names: Vec<&str> = endpoints
                        .iter()
                        .map(|e| p.endpoints[e.0].name.as_str())
                        .collect();
                    format!("{}/{}", p.name, names.join("+"))
                } else {
                    p.name.clone()
                }
            }
            Outcome::Fixed(f) => format!("fixed {}", f.status_code),
            Outcome::NoPool => "none".to_string(),
        }
    }

    pub fn one(&self, lb: &str, ctx: &RequestContext<'_>) -> String {
        let mut rng = StdRng::seed_from_u64(1);
        self.label(&self.decide(lb, ctx, &mut rng).outcome, true)
    }
}

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// Asserts `share` is within `tol` of `expected` (fractions).
#[track_caller]
pub(super) fn near(shares: &BTreeMap<String, f64>, key: &str, expected: f64, tol: f64) {
    let got = shares.get(key).copied().unwrap_or(0.0);
    assert!(
        (got - expected).abs() <= tol,
        "{key}: expected {expected:.4} ± {tol}, got {got:.4} in {shares:?}"
    );
}
