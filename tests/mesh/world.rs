//! The mesh world: 39 `meshlb prober` processes (13 regions x 3 datacenters), one
//! `meshlb aggregator` with an admin token, an intruder prober with the wrong key, and two
//! HTTP origins behind one pool.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::Value;

use crate::REGIONS;
use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

/// The `i`-th datacenter of `region` in the embedded regions table (`a`, `b`, `c` below):
/// aggregators count votes only from datacenters the table lists.
fn roster_dc(region: &str, letter: &str) -> String {
    let regions = lb_core::regions_table::RegionsTable::embedded().expect("regions");
    let r: lb_core::region::Region = region.parse().expect("region");
    let i = usize::from(letter.as_bytes()[0] - b'a');
    regions.region(r).datacenters[i].code.clone()
}

pub fn node_id(region: &str, dc: &str) -> String {
    format!("prober-{}-{dc}", region.to_lowercase())
}

/// One prober of the world: where it stands and its process (an index into `procs`).
pub struct Prober {
    pub region: &'static str,
    pub dc: &'static str,
    pub proc: usize,
}

pub struct World {
    pub admin: SocketAddr,
    /// The `/metrics` listener of the prober of WEU's second datacenter (fra).
    pub prober_metrics: SocketAddr,
    pub token: PathBuf,
    pub one: Origin,
    pub probers: Vec<Prober>,
    pub procs: Procs,
    config: PathBuf,
    key: PathBuf,
    seed: SocketAddr,
    _two: Origin,
    _scratch: tempfile::TempDir,
}

fn mesh_config(one: u16, two: u16) -> Config {
    Config::new()
        .monitor(
            Monitor::http("http")
                .path("/")
                .interval(1)
                .timeout(1)
                .retries(0)
                .consecutive_down(2),
        )
        .pool(
            Pool::new("web")
                .monitor("http")
                .origin("one", ("127.0.0.1", one))
                .origin("two", ("127.0.0.1", two)),
        )
        .load_balancer(Lb::new("www.example.test").pools(&["web"]))
}

impl World {
    /// Starts the origins, the aggregator, the 39 probers and the intruder; returns once every
    /// prober is a live member and every region votes on both endpoints.
    pub fn start() -> World {
        let (scratch, key) = scratch_dir_with_key("mesh");
        let dir = scratch.path().to_path_buf();
        let (one, two) = (origin(), origin());
        let config = dir.join("meshlb.toml");
        mesh_config(one.port, two.port).write(&config);
        let token = dir.join("token");
        std::fs::write(&token, "secret-token").expect("token");
        let mut w = World {
            admin: free_tcp(),
            prober_metrics: free_tcp(),
            token,
            one,
            probers: Vec::new(),
            procs: Procs(Vec::new()),
            config,
            key,
            seed: free_udp(),
            _two: two,
            _scratch: scratch,
        };
        let aggregator = w.spawn_aggregator();
        w.procs.0.push(aggregator);
        for region in REGIONS {
            for dc in ["a", "b", "c"] {
                let child = w.spawn_prober(region, dc);
                w.probers.push(Prober {
                    region,
                    dc,
                    proc: w.procs.0.len(),
                });
                w.procs.0.push(child);
            }
        }
        let intruder = w.spawn_intruder(&dir);
        w.procs.0.push(intruder);
        w.wait_whole();
        w
    }

    fn mesh_args(&self, listen: SocketAddr, key: &std::path::Path) -> Vec<String> {
        vec![
            "--listen".into(),
            listen.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--key-file".into(),
            key.display().to_string(),
            "--gossip-interval-ms".into(),
            "100".into(),
        ]
    }

    fn spawn_aggregator(&self) -> Child {
        spawn_logged(
            Command::new(env!("CARGO_BIN_EXE_meshlb"))
                .args(["aggregator", "--config", self.config.to_str().unwrap()])
                .args(["--region", "WEU", "--admin", &self.admin.to_string()])
                .args(["--admin-token-file", self.token.to_str().unwrap()])
                .args(self.mesh_args(self.seed, &self.key)),
            "aggregator",
        )
    }

    /// An aggregator at the mesh's edge (`--mesh-edge`), its admin API on `admin`.
    pub fn spawn_edge(&self, admin: SocketAddr, node_id: &str) -> Child {
        spawn_logged(
            Command::new(env!("CARGO_BIN_EXE_meshlb"))
                .args(["aggregator", "--config", self.config.to_str().unwrap()])
                .args(["--region", "ENAM", "--admin", &admin.to_string()])
                .args(["--admin-token-file", self.token.to_str().unwrap()])
                .args(["--mesh-edge", "--node-id", node_id])
                .args(self.mesh_args(free_udp(), &self.key)),
            "edge aggregator",
        )
    }

    fn spawn_prober(&self, region: &str, dc: &str) -> Child {
        let metrics_args: Vec<String> = if (region, dc) == ("WEU", "b") {
            vec!["--metrics".into(), self.prober_metrics.to_string()]
        } else {
            Vec::new()
        };
        spawn_logged(
            Command::new(env!("CARGO_BIN_EXE_meshlb"))
                .args(["prober", "--config", self.config.to_str().unwrap()])
                .args(["--region", region, "--dc", &roster_dc(region, dc)])
                .args(["--node-id", &node_id(region, dc)])
                .args(metrics_args)
                .args(self.mesh_args(free_udp(), &self.key)),
            "prober",
        )
    }

    /// A prober with the wrong key.
    fn spawn_intruder(&self, dir: &std::path::Path) -> Child {
        let bad_key = dir.join("bad-key");
        std::fs::write(&bad_key, "some other cluster entirely, wrong key").expect("key");
        spawn_logged(
            Command::new(env!("CARGO_BIN_EXE_meshlb"))
                .args(["prober", "--config", self.config.to_str().unwrap()])
                .args(["--region", "SAS", "--dc", "bom", "--node-id", "intruder"])
                .args(self.mesh_args(free_udp(), &bad_key)),
            "intruder",
        )
    }

    /// The node ids of the live probers in `/members`.
    pub fn live_probers(&self) -> BTreeSet<String> {
        let members = get(self.admin, "/members").unwrap_or(Value::Null);
        members
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "prober" && m["alive"] == true)
            .filter_map(|m| m["node_id"].as_str().map(str::to_string))
            .collect()
    }

    pub fn all_probers(&self) -> BTreeSet<String> {
        self.probers
            .iter()
            .map(|p| node_id(p.region, p.dc))
            .collect()
    }

    /// Whether every prober has a live, fresh, healthy vote on both endpoints (so every one
    /// of the 13 regions votes), and both endpoints are healthy.
    fn every_prober_votes_healthy(&self) -> bool {
        let Some(status) = get(self.admin, "/status") else {
            return false;
        };
        let Some(endpoints) = status["pools"][0]["endpoints"].as_array() else {
            return false;
        };
        let all = self.all_probers();
        endpoints.len() == 2
            && endpoints.iter().all(|e| {
                let regions = e["regions"].as_array().cloned().unwrap_or_default();
                let voting: BTreeSet<String> = regions
                    .iter()
                    .flat_map(|r| r["datacenters"].as_array().cloned().unwrap_or_default())
                    .filter(|d| d["alive"] == true && d["stale"] == false && d["healthy"] == true)
                    .filter_map(|d| d["node"].as_str().map(str::to_string))
                    .collect();
                e["verdict"] == "healthy" && regions.len() == REGIONS.len() && voting == all
            })
    }

    /// Waits until every prober is a live member and votes both endpoints healthy: the state each trial starts from (bounded: 40 processes share two cores, so the
    /// last probers may still be joining).
    pub fn wait_whole(&self) {
        let all = self.all_probers();
        wait_for(
            "every prober a live member",
            Duration::from_secs(60),
            || self.live_probers() == all,
        );
        wait_for(
            "every prober votes both endpoints healthy",
            Duration::from_secs(30),
            || self.every_prober_votes_healthy(),
        );
    }

    /// Starts again every prober of `victims` (indices into `probers`) that was killed, and
    /// waits until the mesh is whole again.
    pub fn restart(&mut self, victims: &[usize]) {
        for &v in victims {
            let (region, dc, i) = (
                self.probers[v].region,
                self.probers[v].dc,
                self.probers[v].proc,
            );
            let child = self.spawn_prober(region, dc);
            // The dead process stays in `procs` (reaped when the world drops).
            let dead = std::mem::replace(&mut self.procs.0[i], child);
            self.procs.0.push(dead);
        }
        self.wait_whole();
    }
}
