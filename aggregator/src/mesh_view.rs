//! The aggregator's view of the mesh: members with their tags and liveness, and every live
//! prober's published results, re-parsed only when a value's version changes. Vote freshness
//! is the time since the prober's `progress` key last moved, as seen here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Instant;

use chitchat::Chitchat;
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use mesh::keys::{self, EndpointResult};
use mesh::Role;
use serde::Serialize;

use crate::tally::{Ballot, PoolVotes, ProberId, Vote};

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
    /// An aggregator's tunnel address and certificate pin (`keys::TUNNEL_RELAY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_relay: Option<String>,
    /// The tunnels it holds live connections of, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tunnels: Vec<tunnel::TunnelId>,
}

fn region_code<S: serde::Serializer>(region: &Option<Region>, s: S) -> Result<S::Ok, S::Error> {
    match region {
        Some(r) => s.serialize_str(r.code()),
        None => s.serialize_str(""),
    }
}

fn vote(r: EndpointResult) -> Vote {
    Vote {
        healthy: r.healthy,
        rtt_ms: r.rtt_ms,
        code: r.code,
        reason: r.reason.map(Into::into),
    }
}

/// One result key's value, parsed once per version, and laid out in the order of a config's
/// endpoints once per config: a tally of 10,000 endpoints x 39 probers then shares 3,900 laid
/// out values instead of looking up, or copying, 390,000 votes (bench/aggregator-memory.sh).
struct PoolResults {
    version: u64,
    by_name: BTreeMap<String, Vote>,
    /// `by_name` in the order of a pool's endpoints, for the config it was laid out for (the
    /// `Weak` keeps that allocation, so a later config cannot be mistaken for it).
    laid_out: Option<(Weak<Config>, usize, PoolVotes)>,
}

impl PoolResults {
    fn new(version: u64, results: BTreeMap<String, EndpointResult>) -> PoolResults {
        PoolResults {
            version,
            by_name: results.into_iter().map(|(k, v)| (k, vote(v))).collect(),
            laid_out: None,
        }
    }

    /// The results in the order of `config`'s pool `pool`.
    fn in_order(&mut self, config: &Arc<Config>, pool: usize) -> PoolVotes {
        if let Some((c, p, laid_out)) = &self.laid_out {
            if *p == pool && std::ptr::eq(c.as_ptr(), Arc::as_ptr(config)) {
                return Arc::clone(laid_out);
            }
        }
        let order: PoolVotes = config.pools[pool]
            .endpoints
            .iter()
            .map(|e| self.by_name.get(&e.name).cloned())
            .collect();
        self.laid_out = Some((Arc::downgrade(config), pool, Arc::clone(&order)));
        order
    }
}

struct ProberCache {
    progress: Option<String>,
    progress_moved: Instant,
    /// The node's `max_version` when its keys were last read: every set or delete raises it,
    /// so while it stands still the keys need not be walked again (39 x 100 result keys at
    /// 10,000 endpoints, hashed and compared on every refresh otherwise).
    read_at_version: Option<u64>,
    /// result key (`keys::pool_key`: a pool, or one member of its monitor group) -> its
    /// parsed value
    pools: HashMap<String, PoolResults>,
}

impl ProberCache {
    /// Takes in every result key of `st` whose version moved (parsed once per version) and
    /// drops the deleted ones; whether any did.
    fn read_results(&mut self, st: &chitchat::NodeState) -> bool {
        let mut changed = false;
        for (k, vv) in st.key_values_including_deleted() {
            if !k.starts_with(keys::POOL_PREFIX) {
                continue;
            }
            if vv.is_deleted() {
                changed |= self.pools.remove(k).is_some();
            } else if self.pools.get(k).is_none_or(|p| p.version != vv.version) {
                self.pools.insert(
                    k.to_string(),
                    PoolResults::new(vv.version, keys::decode_pool(&vv.value)),
                );
                changed = true;
            }
        }
        changed
    }
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
                tunnel_relay: st.get(keys::TUNNEL_RELAY).map(str::to_string),
                tunnels: st
                    .get(keys::TUNNELS_HELD)
                    .map(tunnel::holders::read_held)
                    .unwrap_or_default(),
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
                        read_at_version: None,
                        pools: HashMap::new(),
                    }
                });
                let progress = st.get(keys::PROGRESS).map(str::to_string);
                if progress != cache.progress {
                    cache.progress = progress;
                    cache.progress_moved = now;
                }
                let version = Some(st.max_version());
                if cache.read_at_version != version {
                    cache.read_at_version = version;
                    changed |= cache.read_results(st);
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

    /// The live aggregators that hold tunnels, from the members as this refresh read them
    /// (the prober, which keeps no such view, reads them with `meshlb_node::tunnel_holders`).
    pub fn tunnel_holders(&self) -> Vec<tunnel::Holder> {
        self.members
            .iter()
            .filter(|m| m.role == Role::Aggregator && m.alive && !m.tunnels.is_empty())
            .filter_map(|m| {
                let relay = m.tunnel_relay.as_deref()?;
                let mut holder = tunnel::Holder::read(&m.node_id, relay, None)?;
                holder.tunnels = m.tunnels.clone();
                Some(holder)
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
    pub fn ballots(
        &mut self,
        config: &Arc<Config>,
        roster: &RegionsTable,
        now: Instant,
    ) -> Vec<Ballot> {
        let mut out = Vec::new();
        for m in self.members.iter().filter(|m| m.role == Role::Prober) {
            let Some(region) = m.region else {
                continue;
            };
            if !roster.on_roster(region, &m.datacenter) {
                continue;
            }
            let Some(cache) = self.probers.get_mut(&(m.node_id.clone(), m.generation)) else {
                continue;
            };
            let age = now.saturating_duration_since(cache.progress_moved);
            let votes = config
                .pools
                .iter()
                .enumerate()
                .map(|(pi, pool)| {
                    pool.checks
                        .iter()
                        .map(|check| {
                            let key = keys::pool_key(&pool.name, config.check_label(pool, check));
                            match cache.pools.get_mut(&key) {
                                None => vec![None; pool.endpoints.len()].into(),
                                Some(results) => results.in_order(config, pi),
                            }
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
                age,
                votes,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(origins: &[&str]) -> Arc<Config> {
        let origins: Vec<String> = origins
            .iter()
            .map(|n| format!("{{ name = \"{n}\", address = \"192.0.2.1\" }}"))
            .collect();
        let text = format!(
            "[[pools]]\nname = \"p\"\norigins = [{}]\n",
            origins.join(", ")
        );
        Arc::new(
            Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions"))
                .expect("config"),
        )
    }

    fn result(healthy: bool) -> EndpointResult {
        EndpointResult {
            healthy,
            rtt_ms: None,
            code: None,
            reason: (!healthy).then(|| "refused".to_string()),
        }
    }

    #[test]
    fn results_follow_each_configs_endpoint_order() {
        let mut results = PoolResults::new(
            1,
            [
                ("a".to_string(), result(true)),
                ("b".to_string(), result(false)),
            ]
            .into(),
        );
        let healthy = |v: PoolVotes| {
            v.iter()
                .map(|c| c.as_ref().map(|c| c.healthy))
                .collect::<Vec<_>>()
        };
        let first = config(&["a", "b"]);
        assert_eq!(
            healthy(results.in_order(&first, 0)),
            [Some(true), Some(false)]
        );
        let reordered = config(&["b", "c", "a"]);
        assert_eq!(
            healthy(results.in_order(&reordered, 0)),
            [Some(false), None, Some(true)],
            "a reload's new order, and an endpoint nobody voted on yet"
        );
        drop(first);
        let again = config(&["a", "b"]);
        assert_eq!(
            healthy(results.in_order(&again, 0)),
            [Some(true), Some(false)],
            "a new config is laid out anew, whatever its address"
        );
        let shared = results.in_order(&again, 0)[1]
            .as_ref()
            .and_then(|c| c.reason.clone());
        assert_eq!(shared.as_deref(), Some("refused"));
        assert!(
            Arc::ptr_eq(&results.in_order(&again, 0), &results.in_order(&again, 0)),
            "every ballot of one config shares one laid-out value"
        );
    }

    #[test]
    fn a_probers_results_are_read_again_only_when_its_keys_move() {
        let (_seeds_tx, seeds) = tokio::sync::watch::channel(Default::default());
        let tags = [
            (keys::ROLE, "prober"),
            (keys::REGION, "WEU"),
            (keys::DATACENTER, "ams"),
        ];
        let mut c = Chitchat::with_chitchat_id_and_seeds(
            chitchat::ChitchatConfig {
                chitchat_id: chitchat::ChitchatId::new(
                    "prober-weu-ams".to_string(),
                    1,
                    "127.0.0.1:17281".parse().expect("address"),
                ),
                cluster_id: "test".to_string(),
                gossip_interval: std::time::Duration::from_millis(100),
                listen_addr: "127.0.0.1:17281".parse().expect("address"),
                seed_nodes: Vec::new(),
                failure_detector_config: chitchat::FailureDetectorConfig::default(),
                marked_for_deletion_grace_period: std::time::Duration::from_secs(3600),
                catchup_callback: None,
                extra_liveness_predicate: None,
                protocol_version: chitchat::ProtocolVersion::V0,
                bounded: None,
                tier: chitchat::Tier::Core,
                view: chitchat::ViewSettings::default(),
            },
            seeds,
            tags.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let text = "[[monitors]]\nname = \"m\"\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\n\
                    origins = [{ name = \"a\", address = \"192.0.2.1\" }]\n";
        let roster = RegionsTable::embedded().expect("regions");
        let config = Arc::new(Config::parse("t.toml", text, &roster).expect("config"));
        let pool = &config.pools[0];
        let key = keys::pool_key(&pool.name, config.check_label(pool, &pool.checks[0]));
        let value = |up: bool| keys::encode_pool(&[("a".to_string(), result(up))].into());
        let now = Instant::now();
        let seen = |view: &mut MeshView| {
            let ballots = view.ballots(&config, &roster, now);
            ballots
                .first()
                .and_then(|b| b.vote(0, 0, 0))
                .map(|v| v.healthy)
        };
        let mut view = MeshView::default();
        c.self_node_state().set(key.clone(), value(true));
        assert!(view.refresh(&c, "", now));
        assert_eq!(seen(&mut view), Some(true));
        assert!(!view.refresh(&c, "", now), "nothing moved");
        c.self_node_state().set(key.clone(), value(false));
        assert!(view.refresh(&c, "", now), "a new value is read");
        assert_eq!(seen(&mut view), Some(false));
        c.self_node_state().delete(&key);
        assert!(view.refresh(&c, "", now), "a deletion is read");
        assert_eq!(seen(&mut view), None);
    }
}
