//! The mesh's world (`MESH`): a config primary, a follower aggregator with DNS and four
//! probers started with `--config-from-mesh`, and the command lines and waits its trials share.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};
use test_support::*;

use super::world::{cloudflare_pool, wait_up};
use crate::{call, LBS, MONITORS, POOLS, WRITE};

pub fn members_at(admin: SocketAddr, generation: u64) -> (usize, usize) {
    let Some(members) = get(admin, "/members") else {
        return (0, 0);
    };
    let members = members.as_array().cloned().unwrap_or_default();
    let live: Vec<&Value> = members
        .iter()
        .filter(|m| m["alive"] == json!(true))
        .collect();
    let at = live
        .iter()
        .filter(|m| m["config_generation"] == json!(generation))
        .count();
    (live.len(), at)
}

pub fn dig(dns: SocketAddr, name: &str) -> Vec<String> {
    let mut lines = dig_short(dns, name);
    lines.sort();
    lines
}

pub fn node(args: &[String]) -> Child {
    spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_meshlb")).args(args),
        "node",
    )
}

/// A mesh whose config comes from one primary: the primary aggregator, a second aggregator
/// (with DNS) and four probers started with `--config-from-mesh`, one of them with a regions
/// table without France. The primary has written a monitor, pool `eu` over origins `a`
/// (127.0.0.2) and `b` (127.0.0.3, which answers 404 on `/missing`), and `www.example.com`
/// over it.
pub struct Mesh {
    pub dir: tempfile::TempDir,
    pub key: std::path::PathBuf,
    pub primary: SocketAddr,
    pub secondary: SocketAddr,
    pub dns: SocketAddr,
    pub seed: SocketAddr,
    a: Origin,
    b: Origin,
    /// The primary, then the follower aggregator, then the probers `prober-0` to `prober-3`.
    pub procs: Procs,
}

/// The gossip arguments of a node listening on `listen`.
pub fn mesh_args(listen: SocketAddr, seed: SocketAddr, key: &std::path::Path) -> Vec<String> {
    let (listen, seed, key) = (
        listen.to_string(),
        seed.to_string(),
        key.display().to_string(),
    );
    ["--listen", &listen, "--seed", &seed, "--key-file", &key]
        .into_iter()
        .chain(["--gossip-interval-ms", "100"])
        .map(String::from)
        .collect()
}

/// The config primary's command line (its gossip address is the mesh's seed).
pub fn primary_args(
    dir: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    seed: SocketAddr,
) -> Vec<String> {
    let config = dir.join("primary.toml").display().to_string();
    let mut args: Vec<String> = ["aggregator", "--config", &config, "--region", "WEU"]
        .into_iter()
        .chain(["--admin", &admin.to_string(), "--config-primary"])
        .map(String::from)
        .collect();
    args.extend(admin_token_args(dir));
    args.extend(mesh_args(seed, seed, key));
    args
}

/// A prober following the mesh's config; `prober-3` has a regions table without France.
pub fn prober_args(
    dir: &std::path::Path,
    key: &std::path::Path,
    seed: SocketAddr,
    i: usize,
) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if i == 3 {
        let regions = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
            .expect("regions");
        let no_france: String = regions
            .lines()
            .filter(|l| !l.starts_with("FR "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file = dir.join("regions-no-fr.toml");
        std::fs::write(&file, no_france).expect("regions");
        args.extend(["--regions".into(), file.display().to_string()]);
    }
    let config = dir.join(format!("prober-{i}.toml")).display().to_string();
    let dc = ["ams", "fra", "lhr", "ams"][i];
    let id = format!("prober-{i}");
    args.extend(
        ["prober", "--config", &config, "--region", "WEU", "--dc", dc]
            .into_iter()
            .chain(["--config-from-mesh", "--node-id", &id])
            .map(String::from),
    );
    args.extend(mesh_args(free_udp(), seed, key));
    args
}

pub fn start_mesh_world() -> Mesh {
    let (dir, key) = scratch_dir_with_key("api-mesh");
    std::fs::write(dir.path().join("primary.toml"), "").expect("config");
    // `b` answers 404 on `/missing`: a preview of that path fails there alone.
    let (a, b) = (
        origin_on("127.0.0.2"),
        origin_missing("127.0.0.3", "/missing"),
    );
    let (primary, secondary, dns) = (free_tcp(), free_tcp(), free_tcp_and_udp());
    let seed = free_udp();
    let mut procs = Procs(vec![node(&primary_args(dir.path(), &key, primary, seed))]);
    let config = dir.path().join("secondary.toml").display().to_string();
    let mut args: Vec<String> = ["aggregator", "--config", &config, "--region", "WEU"]
        .into_iter()
        .chain(["--admin", &secondary.to_string(), "--config-from-mesh"])
        .chain(["--dns", &dns.to_string()])
        .map(String::from)
        .collect();
    args.extend(admin_token_args(dir.path()));
    args.extend(mesh_args(free_udp(), seed, &key));
    procs.0.push(node(&args));
    for i in 0..4 {
        procs.0.push(node(&prober_args(dir.path(), &key, seed, i)));
    }
    wait_up(primary);
    wait_up(secondary);
    wait_for("every node in the mesh", Duration::from_secs(60), || {
        members_at(primary, 1) == (6, 6)
    });
    let monitor = json!({ "name": "web", "type": "http", "interval": 2, "timeout": 1, "retries": 0, "path": "/" });
    let (status, _, e) = call(
        primary,
        WRITE,
        "POST",
        MONITORS,
        Some(&monitor.to_string()),
        &[],
    );
    assert_eq!(status, 200, "the monitor: {e:#}");
    let mut pool: Value = serde_json::from_str(&cloudflare_pool(
        "eu",
        "web",
        &[("a", "127.0.0.2", 1.0), ("b", "127.0.0.3", 1.0)],
    ))
    .expect("pool");
    pool["origins"][0]["port"] = json!(a.port);
    pool["origins"][1]["port"] = json!(b.port);
    let (status, _, e) = call(primary, WRITE, "POST", POOLS, Some(&pool.to_string()), &[]);
    assert_eq!(status, 200, "the pool: {e:#}");
    let lb = json!({ "name": "www.example.com", "default_pools": ["eu"], "fallback_pool": "eu", "ttl": 30 });
    let (status, _, e) = call(primary, WRITE, "POST", LBS, Some(&lb.to_string()), &[]);
    assert_eq!(status, 200, "the load balancer: {e:#}");
    Mesh {
        dir,
        key,
        primary,
        secondary,
        dns,
        seed,
        a,
        b,
        procs,
    }
}

impl Mesh {
    /// Waits until every node (six, all alive) is at `generation`.
    pub fn wait_everywhere(&self, generation: u64, what: &str) {
        wait_for(what, Duration::from_secs(60), || {
            members_at(self.primary, generation) == (6, 6)
        });
    }

    /// Writes `body` to `path` on the primary with `method`: the generation written.
    pub fn write(&self, method: &str, path: &str, body: &str) -> u64 {
        let (status, etag, e) = call(self.primary, WRITE, method, path, Some(body), &[]);
        assert_eq!(status, 200, "{e:#}");
        etag.parse().expect("generation")
    }

    /// Makes pool `eu`'s origins `a` alone, or `a` and `b`: returns the generation written.
    pub fn write_origins(&self, with_b: bool) -> u64 {
        let mut origins = vec![json!({ "name": "a", "address": "127.0.0.2", "port": self.a.port })];
        if with_b {
            origins.push(json!({ "name": "b", "address": "127.0.0.3", "port": self.b.port }));
        }
        let patch = json!({ "origins": origins }).to_string();
        self.write("PATCH", &format!("{POOLS}/eu"), &patch)
    }

    /// Pool `eu` with both origins, at every node, both answered by the follower's DNS.
    pub fn serve_both(&self) {
        let generation = self.write_origins(true);
        self.wait_everywhere(generation, "every node at the generation with a and b");
        let both = vec!["127.0.0.2".to_string(), "127.0.0.3".to_string()];
        wait_for(
            "DNS answers both endpoints",
            Duration::from_secs(60),
            || dig(self.dns, "www.example.com") == both,
        );
    }

    /// The primary's generation in force.
    pub fn generation(&self) -> u64 {
        let (_, _, state) = call(self.primary, WRITE, "GET", "/config", None, &[]);
        state["result"]["generation"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generation in {state:#}"))
    }
}
