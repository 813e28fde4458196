//! The running world as the trials see it: its processes, origins and addresses, and what the
//! aggregators say (members, verdicts, events, DNS answers, the proxy's).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use crate::origins::{Latency, Origin};
use crate::world::World;

/// The world and what the trials need to know of it.
pub struct Mesh {
    pub world: World,
    pub origins: BTreeMap<String, Origin>,
    pub latency: Arc<Latency>,
    /// The config primary's file (agg1's; the others follow it through the mesh).
    pub config: std::path::PathBuf,
    /// Origin name -> its address.
    pub addr: BTreeMap<String, Ipv4Addr>,
    pub agg: [Ipv4Addr; 2],
    /// Region code -> its probers' node names.
    pub probers: BTreeMap<String, Vec<String>>,
}

impl Mesh {
    /// Whether every live member of the mesh (41 of them) reports mesh config `generation`
    /// (the primary's `/members`) with one config hash.
    pub fn mesh_at(&self, generation: u64) -> bool {
        let members: Vec<serde_json::Value> = self
            .world
            .json("client", self.admin(0), "/members")
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        let live: Vec<&serde_json::Value> = members.iter().filter(|x| x["alive"] == true).collect();
        let hashes: std::collections::BTreeSet<&str> = live
            .iter()
            .filter_map(|x| x["config_hash"].as_str())
            .collect();
        live.len() == 41
            && hashes.len() == 1
            && live
                .iter()
                .all(|x| x["config_generation"] == serde_json::json!(generation))
    }

    /// The config generation each aggregator runs (0: no answer).
    pub fn generations(&self) -> [u64; 2] {
        [0, 1].map(|i| {
            self.status(i)
                .and_then(|s| s["config_generation"].as_u64())
                .unwrap_or(0)
        })
    }

    pub fn admin(&self, agg: usize) -> SocketAddr {
        SocketAddr::new(self.agg[agg].into(), 9090)
    }

    pub fn status(&self, agg: usize) -> Option<serde_json::Value> {
        self.world.json("client", self.admin(agg), "/status")
    }

    pub fn verdict(&self, agg: usize, endpoint: &str) -> Option<String> {
        let s = self.status(agg)?;
        s["pools"]
            .as_array()?
            .iter()
            .flat_map(|p| p["endpoints"].as_array().into_iter().flatten())
            .find(|e| e["name"] == endpoint)
            .and_then(|e| e["verdict"].as_str().map(str::to_string))
    }

    /// Health changes that are news (not first verdicts) logged by aggregator `agg`.
    pub fn changes(&self, agg: usize) -> usize {
        self.world
            .json("client", self.admin(agg), "/events")
            .and_then(|e| e.as_array().cloned())
            .map_or(0, |a| {
                a.iter()
                    .filter(|e| e["kind"] == "endpoint" && e["initial"] != true)
                    .count()
            })
    }

    /// The aggregator's gossip transport counters, as its metrics give them.
    pub fn gossip_counters(&self, agg: usize) -> String {
        let (_, text) = self.world.admin_get("client", self.admin(agg), "/metrics");
        text.lines()
            .filter(|l| l.starts_with("meshlb_gossip_"))
            .map(|l| l.trim_start_matches("meshlb_gossip_"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn all_changes(&self) -> usize {
        self.changes(0) + self.changes(1)
    }

    pub fn live_probers(&self, agg: usize) -> usize {
        self.world
            .json("client", self.admin(agg), "/members")
            .and_then(|m| m.as_array().cloned())
            .map_or(0, |a| {
                a.iter()
                    .filter(|m| m["role"] == "prober" && m["alive"] == true)
                    .count()
            })
    }

    /// The SOA record in the authority section of an answer for `name`, if any.
    pub fn soa(&self, agg: usize, name: &str) -> bool {
        self.world
            .exec(
                "client",
                &[
                    "dig",
                    &format!("@{}", self.agg[agg]),
                    name,
                    "A",
                    "+tries=1",
                    "+time=2",
                    "+noall",
                    "+authority",
                ],
            )
            .contains("\tSOA\t")
    }

    pub fn dig(&self, agg: usize, name: &str) -> (String, Vec<String>) {
        let out = self.world.exec(
            "client",
            &[
                "dig",
                &format!("@{}", self.agg[agg]),
                name,
                "A",
                "+tries=1",
                "+time=2",
                "+noall",
                "+comments",
                "+answer",
                "+authority",
            ],
        );
        let status = out
            .lines()
            .find_map(|l| l.split("status: ").nth(1))
            .map(|s| s.split(',').next().unwrap_or("").to_string())
            .unwrap_or_default();
        let answers = out
            .lines()
            .filter(|l| !l.starts_with(';') && l.contains("\tA\t"))
            .filter_map(|l| l.split_whitespace().last().map(str::to_string))
            .collect();
        (status, answers)
    }

    pub fn proxy(&self, agg: usize) -> (u16, String) {
        let (code, body) = self.world.http(
            "client",
            SocketAddr::new(self.agg[agg].into(), 8080),
            "/",
            "www.chaos.test",
        );
        (code, body.trim().to_string())
    }

    /// Every prober's node name.
    pub fn all_probers(&self) -> Vec<String> {
        self.probers.values().flatten().cloned().collect()
    }
}
