//! A mesh whose config lives in a real three-member etcd cluster: two aggregators on the
//! store (`--config-store`), each serving DNS and the proxy, and two probers following the
//! config through gossip. Generations are signed with a writer key the aggregators hold; the
//! probers hold its public key alone, so they take only what a writer signed. The store starts
//! empty; the world writes a pool and two load
//! balancers through the first aggregator.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};
use test_support::etcd::EtcdCluster;
use test_support::*;

pub static MESH: Shared<StoreMesh> = Shared::new(StoreMesh::start);

/// The admin token `admin_token_args` gives the aggregators.
const TOKEN: &str = "secret-token";
pub const POOLS: &str = "/client/v4/accounts/meshlb/load_balancers/pools";
pub const ORIGIN: &str = "127.0.4.1";

pub struct StoreMesh {
    pub etcd: EtcdCluster,
    /// The aggregators' admin, DNS and proxy addresses.
    pub admin: [SocketAddr; 2],
    pub dns: [SocketAddr; 2],
    pub proxy: [SocketAddr; 2],
    /// agg1, agg2 (restartable), then the probers.
    pub aggregators: [Option<Child>; 2],
    args: [Vec<String>; 2],
    _probers: Procs,
    _origin: Origin,
    _dir: tempfile::TempDir,
}

impl Drop for StoreMesh {
    fn drop(&mut self) {
        for c in self.aggregators.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl StoreMesh {
    fn start() -> StoreMesh {
        let (dir, key) = scratch_dir_with_key("store");
        let d = dir.path();
        // Generations signed with a writer key: each store aggregator signs what it writes and
        // what it reads from the store; the probers hold the public key alone.
        let out = Command::new(meshlb_bin())
            .args(["config", "keygen", "--out", &d.display().to_string()])
            .output()
            .expect("meshlb config keygen");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (signing, public_key) = (
            d.join("signing.key").display().to_string(),
            d.join("signing.pub").display().to_string(),
        );
        let etcd = EtcdCluster::start(d, 3);
        let origin = named_origin(ORIGIN, "origin", Duration::ZERO);
        let seed = free_udp();
        let (admin, dns, proxy) = (
            [free_tcp(), free_tcp()],
            [free_tcp_and_udp(), free_tcp_and_udp()],
            [free_tcp(), free_tcp()],
        );
        let args: [Vec<String>; 2] = std::array::from_fn(|i| {
            let config = d.join(format!("agg{i}.toml"));
            std::fs::write(&config, "").expect("config");
            let mut v: Vec<String> = [
                "aggregator",
                "--config",
                &config.display().to_string(),
                "--region",
                "WEU",
                "--node-id",
                &format!("agg{}", i + 1),
                "--admin",
                &admin[i].to_string(),
                "--dns",
                &dns[i].to_string(),
                "--proxy",
                &proxy[i].to_string(),
                "--config-store",
                &etcd.url("meshlb-tests"),
                "--config-signing-key",
                &signing,
                "--config-verify-key",
                &public_key,
            ]
            .map(String::from)
            .to_vec();
            v.extend(admin_token_args(d));
            let listen = if i == 0 { seed } else { free_udp() };
            v.extend(gossip_args(listen, seed, &key));
            v
        });
        let aggregators = [0, 1].map(|i| Some(aggregator(&args[i], i)));
        let mut probers = Procs(Vec::new());
        for (i, dc) in ["ams", "fra"].iter().enumerate() {
            let config = d.join(format!("prober{i}.toml"));
            std::fs::write(&config, "").expect("config");
            let mut v: Vec<String> = [
                "prober",
                "--config",
                &config.display().to_string(),
                "--region",
                "WEU",
                "--dc",
                dc,
                "--node-id",
                &format!("prober-{dc}"),
                "--config-from-mesh",
                "--config-verify-key",
                &public_key,
            ]
            .map(String::from)
            .to_vec();
            v.extend(gossip_args(free_udp(), seed, &key));
            probers
                .0
                .push(spawn_logged(Command::new(meshlb_bin()).args(&v), "prober"));
        }
        let mesh = StoreMesh {
            etcd,
            admin,
            dns,
            proxy,
            aggregators,
            args,
            _probers: probers,
            _origin: origin,
            _dir: dir,
        };
        for a in admin {
            wait_for("an aggregator's admin API", Duration::from_secs(30), || {
                TcpStream::connect(a).is_ok()
            });
        }
        wait_for("four live members", Duration::from_secs(30), || {
            mesh.generations(0).len() == 4
        });
        let pool = json!({ "name": "web", "origins": [{ "name": "o", "address": ORIGIN, "port": mesh._origin.port }] });
        let (status, _, body, _) = api(admin[0], "POST", POOLS, Some(&pool.to_string()), None);
        assert_eq!(status, 200, "{body}");
        for (name, proxied) in [("www.store.test", false), ("web.store.test", true)] {
            let lb = json!({ "name": name, "default_pools": ["web"], "fallback_pool": "web", "proxied": proxied });
            let path = "/client/v4/zones/meshlb/load_balancers";
            let (status, _, body, _) = api(admin[0], "POST", path, Some(&lb.to_string()), None);
            assert_eq!(status, 200, "{body}");
        }
        mesh.wait_all_at(mesh.generation_of(0));
        mesh
    }

    /// Each live member's config generation, as aggregator `i` sees them.
    pub fn generations(&self, i: usize) -> Vec<(String, u64)> {
        get(self.admin[i], "/members").map_or_else(Vec::new, |m| live_generations(&m))
    }

    /// Aggregator `i`'s generation in force.
    pub fn generation_of(&self, i: usize) -> u64 {
        get(self.admin[i], "/config").map_or(0, |c| c["result"]["generation"].as_u64().unwrap_or(0))
    }

    /// Waits until every live member runs `generation` or a newer one.
    pub fn wait_all_at(&self, generation: u64) {
        wait_for(
            &format!("every node at generation {generation}"),
            Duration::from_secs(30),
            || {
                let g = self.generations(0);
                g.len() == 4 && g.iter().all(|(_, at)| *at >= generation)
            },
        );
    }

    /// Kills aggregator `i` (SIGKILL).
    pub fn kill_aggregator(&mut self, i: usize) {
        if let Some(mut c) = self.aggregators[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts aggregator `i` again; returns once its admin API answers.
    pub fn restart_aggregator(&mut self, i: usize) {
        if self.aggregators[i].is_none() {
            self.aggregators[i] = Some(aggregator(&self.args[i], i));
        }
        let admin = self.admin[i];
        wait_for("the restarted aggregator", Duration::from_secs(30), || {
            TcpStream::connect(admin).is_ok()
        });
    }
}

fn aggregator(args: &[String], i: usize) -> Child {
    spawn_logged(
        Command::new(meshlb_bin()).args(args),
        &format!("store-agg{}", i + 1),
    )
}

/// One API call with the admin token: (status, ETag generation, body, Retry-After).
pub fn api(
    admin: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    if_match: Option<u64>,
) -> (u16, u64, String, Option<String>) {
    let Ok(mut s) = TcpStream::connect(admin) else {
        return (0, 0, String::new(), None);
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let body = body.unwrap_or("");
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(g) = if_match {
        head.push_str(&format!("If-Match: \"{g}\"\r\n"));
    }
    head.push_str("\r\n");
    let mut raw = String::new();
    if s.write_all(head.as_bytes()).is_err()
        || s.write_all(body.as_bytes()).is_err()
        || s.read_to_string(&mut raw).is_err()
    {
        return (0, 0, String::new(), None);
    }
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let etag = header("etag")
        .and_then(|e| e.trim_matches('"').parse().ok())
        .unwrap_or(0);
    (status, etag, body.to_string(), header("retry-after"))
}

/// A pool named `name` over the world's origin, as the API takes it.
pub fn pool(name: &str) -> String {
    json!({ "name": name, "origins": [{ "name": "o", "address": ORIGIN }] }).to_string()
}

/// The names of the pools aggregator `i` holds.
pub fn pool_names(admin: SocketAddr) -> Vec<String> {
    let (_, _, body, _) = api(admin, "GET", &format!("{POOLS}?per_page=1000"), None, None);
    let v: Value = serde_json::from_str(&body).unwrap_or_default();
    v["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}
