//! The config primary's world (`PRIMARY`): a primary on an empty file with the write and the
//! read token, at most three previews of one origin each and one prober to run them, and
//! Cloudflare's documentation examples of a monitor, a pool and a load balancer, which were
//! its first writes.

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use test_support::*;

use super::mesh_world::{members_at, node, prober_args};
use crate::{call, LBS, MONITORS, POOLS, READ, WRITE};

/// Cloudflare's documentation example of a monitor (`POST .../load_balancers/monitors`),
/// with the fields meshlb has and values a loopback origin answers.
pub fn cloudflare_monitor(port: u16) -> String {
    json!({
        "allow_insecure": true,
        "consecutive_down": 0,
        "consecutive_up": 0,
        "description": "Login page monitor",
        "expected_body": "ok",
        "expected_codes": "2xx",
        "follow_redirects": true,
        "header": { "Host": ["example.com"], "X-App-ID": ["abc123"] },
        "interval": 5,
        "method": "GET",
        "path": "/health",
        "port": port,
        "retries": 0,
        "timeout": 2,
        "type": "http"
    })
    .to_string()
}

/// Cloudflare's example of a pool (`POST .../load_balancers/pools`), fields meshlb has.
pub fn cloudflare_pool(name: &str, monitor: &str, origins: &[(&str, &str, f64)]) -> String {
    let origins: Vec<Value> = origins
        .iter()
        .map(|(name, address, weight)| {
            json!({
                "address": address,
                "enabled": true,
                "header": { "Host": ["example.com"] },
                "name": name,
                "port": 0,
                "weight": weight
            })
        })
        .collect();
    json!({
        "name": name,
        "origins": origins,
        "check_regions": ["WEU"],
        "description": "Primary data center - Provider XYZ",
        "enabled": true,
        "latitude": 50.1,
        "load_shedding": {
            "default_percent": 0, "default_policy": "random",
            "session_percent": 0, "session_policy": "hash"
        },
        "longitude": 8.7,
        "minimum_origins": 1,
        "monitor": monitor,
        "notification_filter": {
            "origin": { "disable": false, "healthy": true },
            "pool": { "disable": false, "healthy": false }
        },
        "origin_steering": { "policy": "random" }
    })
    .to_string()
}

/// Cloudflare's example of a load balancer (`POST /zones/{zone}/load_balancers`), fields
/// meshlb has.
pub fn cloudflare_lb(name: &str, pools: &[&str], fallback: &str) -> String {
    json!({
        "default_pools": pools,
        "fallback_pool": fallback,
        "name": name,
        "adaptive_routing": { "failover_across_pools": true },
        "country_pools": { "GB": [pools[0]], "US": pools },
        "description": "Load Balancer for www.example.com",
        "location_strategy": { "mode": "resolver_ip", "prefer_ecs": "always" },
        "proxied": true,
        "random_steering": { "default_weight": 0.2, "pool_weights": { pools[0]: 0.4 } },
        "region_pools": { "WNAM": pools, "ENAM": [pools[0]] },
        "session_affinity": "cookie",
        "session_affinity_attributes": {
            "drain_duration": 100, "samesite": "Auto", "secure": "Auto",
            "zero_downtime_failover": "sticky"
        },
        "session_affinity_ttl": 1800,
        "steering_policy": "dynamic_latency",
        "ttl": 30
    })
    .to_string()
}

pub fn tokens(dir: &std::path::Path) -> Vec<String> {
    let read = dir.join("read-token");
    std::fs::write(&read, "read-only-token").expect("read token");
    let mut args = admin_token_args(dir);
    args.extend(["--admin-read-token-file".into(), read.display().to_string()]);
    args
}

/// A config primary on an empty `config` with `args` (its tokens and limits), up.
pub fn start_primary(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    args: Vec<String>,
) -> Procs {
    start_primary_seeded(config, key, admin, free_udp(), args)
}

/// [`start_primary`] gossiping with `seed` (a prober's address: no other node is its seed).
pub fn start_primary_seeded(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    seed: SocketAddr,
    mut args: Vec<String>,
) -> Procs {
    std::fs::write(config, "").expect("empty config");
    args.push("--config-primary".into());
    let procs = Procs(vec![start_aggregator(
        config, key, "WEU", admin, seed, &args,
    )]);
    wait_up(admin);
    procs
}

pub fn wait_up(admin: SocketAddr) {
    wait_for("the admin API", Duration::from_secs(30), || {
        TcpStream::connect(admin).is_ok()
    });
}

/// A config primary on an empty file, with the write and the read token, at most three
/// previews of one origin each, and what its first writes answered: Cloudflare's example
/// monitor, two pools (`primary-dc-1` and `fallback`) and a load balancer over them, written in
/// that order as the trials find them.
pub struct Primary {
    pub dir: tempfile::TempDir,
    pub config: std::path::PathBuf,
    pub admin: SocketAddr,
    pub monitor: (u16, String, Value),
    pub pool: (u16, String, Value),
    pub fallback: (u16, String, Value),
    pub lb: (u16, String, Value),
    _origin: Origin,
    _procs: Procs,
}

pub fn start_primary_world() -> Primary {
    let (dir, key) = scratch_dir_with_key("api");
    let config = dir.path().join("meshlb.toml");
    let admin = free_tcp();
    let mut args = tokens(dir.path());
    args.extend(["--api-preview-max", "3", "--api-preview-max-origins", "1"].map(String::from));
    // One prober in WEU, following the primary's config, runs the previews (a preview no live
    // prober can run is refused).
    let seed = free_udp();
    let mut procs = start_primary_seeded(&config, &key, admin, seed, args);
    let mut prober = prober_args(dir.path(), &key, seed, 0);
    if let Some(i) = prober.iter().position(|a| a == "--listen") {
        prober[i + 1] = seed.to_string();
    }
    procs.0.push(node(&prober));
    wait_for("the prober in the mesh", Duration::from_secs(60), || {
        members_at(admin, 1).0 == 2
    });
    let origin = origin();
    let monitor = call(
        admin,
        WRITE,
        "POST",
        MONITORS,
        Some(&cloudflare_monitor(origin.port)),
        &[],
    );
    let id = monitor.2["result"]["id"].as_str().unwrap_or("").to_string();
    let pool = cloudflare_pool("primary-dc-1", &id, &[("app-server-1", "127.0.0.1", 0.6)]);
    let pool = call(admin, WRITE, "POST", POOLS, Some(&pool), &[]);
    let fallback = cloudflare_pool("fallback", &id, &[("b", "127.0.0.1", 1.0)]);
    let fallback = call(admin, WRITE, "POST", POOLS, Some(&fallback), &[]);
    let lb = cloudflare_lb("www.example.com", &["primary-dc-1"], "fallback");
    let lb = call(admin, WRITE, "POST", LBS, Some(&lb), &[]);
    Primary {
        dir,
        config,
        admin,
        monitor,
        pool,
        fallback,
        lb,
        _origin: origin,
        _procs: procs,
    }
}

impl Primary {
    /// The id the API gave the monitor.
    pub fn monitor_id(&self) -> String {
        let m = &self.monitor.2;
        m["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("the monitor was not created: {m:#}"))
            .to_string()
    }

    /// The generation in force (`GET /config`).
    pub fn generation(&self) -> u64 {
        let (_, _, state) = call(self.admin, READ, "GET", "/config", None, &[]);
        state["result"]["generation"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generation in {state:#}"))
    }

    /// `meshlb ARGS --admin ... --token-file ...`: exit code, stdout, stderr.
    pub fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let token = self.dir.path().join("admin-token");
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(args)
            .args(["--admin", &self.admin.to_string()])
            .args(["--token-file", token.to_str().unwrap()])
            .output()
            .expect("meshlb");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }
}
