//! The aggregator's view of the mesh: members with their tags and liveness, and every live
//! prober's published results, re-parsed only when a value's version changes. Vote freshness
//! is the time since the prober's `progress` key last moved, as seen here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Instant;

use chitchat::Chitchat;
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use mesh::keys::{self, EndpointResult};
use mesh::Role;
use serde::Serialize;

use crate::tally::{Ballot, ProberId, Vote};

/// A cluster member as the admin API shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Member {
    pub node_id: String,
    pub generation: u64,
    pub address: SocketAddr,
    pub role: Role,
    /// `None` when the tag names no region (a member cannot vote without one); shown as `""`.
    #[serde(serialize_with = "region_code")]
    pub region: Option<Region>,
    pub datacenter: String,
    pub version: String,
    pub config_hash: String,
    /// The mesh config generation it runs (docs/api.md#one-config-for-the-mesh).
    pub config_generation: Option<u64>,
    /// A generation it refused: `generation sha256 reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_refused: Option<String>,
    /// When the member loaded its config (unix seconds), when it says.
    pub config_loaded_at: Option<u64>,
    pub alive: bool,
    /// Runs a config other than this aggregator's.
    pub config_drift: bool,
    /// An aggregator's advertised proxy addresses (`--advertise-proxy`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proxy_addrs: Vec<std::net::IpAddr>,
    /// An aggregator that says it is ready (`GET /readyz`).
    pub ready: bool,
}

fn region_code<S: serde::Serializer>(region: &Option<Region>, s: S) -> Result<S::Ok, S::Error> {
    match region {
        Some(r) => s.serialize_str(r.code()),
        None => s.serialize_str(""),
    }
}

struct ProberCache {
    progress: Option<String>,
    progress_moved: Instant,
    /// result key (`keys::pool_key`: a pool, or one member of its monitor group) -> (value
    /// version, parsed results)
    pools: HashMap<String, (u64, BTreeMap<String, EndpointResult>)>,
}

/// Incrementally maintained view.
#[derive(Default)]
pub struct MeshView {
    probers: HashMap<(String, u64), ProberCache>,
    members: Vec<Member>,
    /// The drain decisions every live aggregator (this one included) publishes.
    drains: Vec<keys::DrainDecision>,
}

impl MeshView {
    /// Reads what changed from chitchat (call with the lock held; cheap when nothing changed).
    /// Returns whether anything the tally reads changed.
    pub fn refresh(&mut self, c: &Chitchat, own_config_hash: &str, now: Instant) -> bool {
        let live: HashSet<_> = c.live_nodes().cloned().collect();
        let mut changed = false;
        let mut members = Vec::with_capacity(c.node_states().len());
        let mut seen = HashSet::new();
        let mut drains = Vec::new();
        for (id, st) in c.node_states() {
            // Drain decisions are an aggregator's to make: a prober's `drains` key is ignored.
            let role = Role::parse(st.get(keys::ROLE).unwrap_or(""));
            if live.contains(id) && role == Role::Aggregator {
                if let Some(v) = st.get(keys::DRAINS) {
                    drains.extend(keys::decode_drains(v));
                }
            }
            let get = |k: &str| st.get(k).unwrap_or("").to_string();
            let member = Member {
                node_id: id.node_id.to_string(),
                generation: id.generation_id,
                address: id.gossip_advertise_addr,
                role,
                region: st.get(keys::REGION).and_then(|r| r.parse().ok()),
                datacenter: get(keys::DATACENTER),
                version: get(keys::VERSION),
                config_hash: get(keys::CONFIG_HASH),
                config_generation: st.get(keys::CONFIG_GENERATION).and_then(|g| g.parse().ok()),
                config_refused: st.get(keys::CONFIG_REFUSED).map(str::to_string),
                config_loaded_at: st.get(keys::CONFIG_LOADED_AT).and_then(|t| t.parse().ok()),
                alive: live.contains(id),
                config_drift: false,
                proxy_addrs: st
                    .get(keys::PROXY_ADDRS)
                    .map(keys::decode_addrs)
                    .unwrap_or_default(),
                ready: st.get(keys::READY) == Some("1"),
            };
            let member = Member {
                config_drift: !member.config_hash.is_empty()
                    && member.config_hash != own_config_hash,
                ..member
            };
            if member.role == Role::Prober {
                let key = (member.node_id.clone(), member.generation);
                seen.insert(key.clone());
                let cache = self.probers.entry(key).or_insert_with(|| {
                    changed = true;
                    ProberCache {
                        progress: None,
                        progress_moved: now,
                        pools: HashMap::new(),
                    }
                });
                let progress = st.get(keys::PROGRESS).map(str::to_string);
                if progress != cache.progress {
                    cache.progress = progress;
                    cache.progress_moved = now;
                }
                for (k, vv) in st.key_values_including_deleted() {
                    if !k.starts_with(keys::POOL_PREFIX) {
                        continue;
                    }
                    let pool = k;
                    if vv.is_deleted() {
                        changed |= cache.pools.remove(pool).is_some();
                    } else if cache.pools.get(pool).is_none_or(|(v, _)| *v != vv.version) {
                        cache
                            .pools
                            .insert(pool.to_string(), (vv.version, keys::decode_pool(&vv.value)));
                        changed = true;
                    }
                }
            }
            members.push(member);
        }
        let before = self.probers.len();
        self.probers.retain(|k, _| seen.contains(k));
        changed |= self.probers.len() != before;
        let liveness = |m: &[Member]| {
            m.iter()
                .map(|m| (m.node_id.clone(), m.alive, m.ready, m.proxy_addrs.clone()))
                .collect::<Vec<_>>()
        };
        changed |= liveness(&members) != liveness(&self.members);
        self.members = members;
        changed |= drains != self.drains;
        self.drains = drains;
        changed
    }

    /// The PoPs DNS answers proxied names with: live, ready aggregators on this config (one
    /// on another may not know a load balancer this one answers for) that advertise proxy
    /// addresses and tell their region.
    pub fn proxy_pops(&self) -> Vec<lb_core::pops::ProxyPop> {
        self.members
            .iter()
            .filter(|m| m.role == Role::Aggregator && m.alive && m.ready && !m.config_drift)
            .filter(|m| !m.proxy_addrs.is_empty())
            .filter_map(|m| {
                Some(lb_core::pops::ProxyPop {
                    node: m.node_id.clone(),
                    region: m.region?,
                    addresses: m.proxy_addrs.clone(),
                })
            })
            .collect()
    }

    /// Drain decisions published by live aggregators.
    pub fn drains(&self) -> &[keys::DrainDecision] {
        &self.drains
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Live probers whose (region, datacenter) the regions table does not list: their votes
    /// do not count.
    pub fn off_roster<'a>(&'a self, roster: &'a RegionsTable) -> impl Iterator<Item = &'a Member> {
        self.members.iter().filter(move |m| {
            m.role == Role::Prober
                && m.alive
                && !m.region.is_some_and(|r| roster.on_roster(r, &m.datacenter))
        })
    }

    /// Every prober's ballot against `config` (indexed like it), from probers on the roster
    /// only: a datacenter `roster` lists for the prober's region.
    pub fn ballots(&self, config: &Config, roster: &RegionsTable, now: Instant) -> Vec<Ballot> {
        let mut out = Vec::new();
        for m in self.members.iter().filter(|m| m.role == Role::Prober) {
            let Some(region) = m.region else {
                continue;
            };
            if !roster.on_roster(region, &m.datacenter) {
                continue;
            }
            let Some(cache) = self.probers.get(&(m.node_id.clone(), m.generation)) else {
                continue;
            };
            let age = now.saturating_duration_since(cache.progress_moved);
            let votes = config
                .pools
                .iter()
                .map(|pool| {
                    pool.checks
                        .iter()
                        .map(|check| {
                            let key = keys::pool_key(&pool.name, config.check_label(pool, check));
                            let results = cache.pools.get(&key).map(|(_, r)| r);
                            pool.endpoints
                                .iter()
                                .map(|e| {
                                    results.and_then(|r| r.get(&e.name)).map(|r| Vote {
                                        healthy: r.healthy,
                                        rtt_ms: r.rtt_ms,
                                        code: r.code,
                                        reason: r.reason.clone(),
                                        age,
                                    })
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect();
            out.push(Ballot {
                prober: ProberId {
                    region,
                    datacenter: m.datacenter.clone(),
                    node: m.node_id.clone(),
                },
                alive: m.alive,
                votes,
            });
        }
        out
    }
}
