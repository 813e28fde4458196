//! The proxy's world: a mesh (one aggregator with a plain and a TLS proxy listener, three
//! probers) over twelve named origins, and the load balancers every steering, affinity,
//! tunnelling and failover trial uses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use test_support::config::{Config, Endpoint, Lb, Monitor, Pool, Rule};
use test_support::*;

use crate::curl;

/// The origins by name and address. Only `slow` holds `/hold` requests open (for `HOLD`).
pub const ORIGINS: [(&str, &str); 12] = [
    ("w1", "127.0.1.1"),
    ("w2", "127.0.1.2"),
    ("slow", "127.0.1.3"),
    ("fast", "127.0.1.4"),
    ("h1", "127.0.1.5"),
    ("h2", "127.0.1.6"),
    ("h3", "127.0.1.7"),
    ("z1", "127.0.1.8"),
    ("z2", "127.0.1.9"),
    ("down", "127.0.1.10"),
    ("x1", "127.0.1.11"),
    ("x2", "127.0.1.12"),
];

pub const HOLD: Duration = Duration::from_secs(5);

/// The names TLS termination has a certificate for, in the order of `World::certs`.
pub const TLS_NAMES: [&str; 2] = ["tls.example.test", "other.example.test"];

pub struct World {
    pub origins: BTreeMap<&'static str, Origin>,
    /// (certificate, key) files for each of `TLS_NAMES`.
    pub certs: Vec<(PathBuf, PathBuf)>,
    pub admin: SocketAddr,
    pub proxy: SocketAddr,
    pub proxy_tls: SocketAddr,
    /// `http://{proxy}/`.
    pub url: String,
    pub dir: PathBuf,
    _procs: Procs,
    _scratch: tempfile::TempDir,
}

/// The pools and load balancers; `at(name)` is where origin `name` listens.
fn config(at: impl Fn(&str) -> (&'static str, u16)) -> Config {
    let pool = |name: &str, origins: &[&str]| {
        origins.iter().fold(
            Pool::new(name).monitor("http").regions(&["WEU"]),
            |p, &o| p.origin(o, at(o)),
        )
    };
    let proxied = |name: &str, pools: &[&str]| Lb::new(name).pools(pools).proxied();
    Config::new()
        .monitor(
            Monitor::http("http")
                .interval(1)
                .timeout(1)
                .retries(0)
                .consecutive_down(2),
        )
        .pool(
            Pool::new("weighted")
                .monitor("http")
                .regions(&["WEU"])
                .endpoint(Endpoint::new("w1", at("w1")).weight(0.25))
                .endpoint(Endpoint::new("w2", at("w2")).weight(0.75)),
        )
        .pool(pool("lors", &["slow", "fast"]).steering("least_outstanding_requests"))
        .pool(
            pool("three", &["h1"])
                .endpoint(Endpoint::new("h2", at("h2")).host("override.example"))
                .origin("h3", at("h3")),
        )
        .pool(pool("hashed", &["h1", "h2", "h3"]).steering("hash"))
        .pool(pool("zdt", &["z1", "z2"]))
        .pool(pool("dead", &["down"]))
        .pool(pool("solo", &["x1"]))
        .pool(pool("spare", &["x2"]))
        .load_balancer(proxied("weighted.example.test", &["weighted"]))
        .load_balancer(proxied("lors.example.test", &["lors"]))
        .load_balancer(
            proxied("sticky.example.test", &["three"])
                .affinity("cookie")
                .affinity_ttl(1800)
                .rule(
                    Rule::new(
                        "checkout gets time",
                        "http.request.uri.path == \"/checkout\"",
                    )
                    .overrides("session_affinity_ttl = 7200"),
                ),
        )
        .load_balancer(proxied("ipcookie.example.test", &["three"]).affinity("ip_cookie"))
        .load_balancer(proxied("hash.example.test", &["hashed"]))
        .load_balancer(proxied("zdt.example.test", &["zdt"]).zero_downtime_failover("temporary"))
        .load_balancer(proxied("nozdt.example.test", &["zdt"]))
        .load_balancer(
            proxied("across.example.test", &["solo", "spare"])
                .zero_downtime_failover("temporary")
                .failover_across_pools(),
        )
        .load_balancer(proxied("dead.example.test", &["dead"]))
        .load_balancer(proxied("tls.example.test", &["weighted"]))
        .load_balancer(proxied("other.example.test", &["weighted"]))
}

/// Two self-signed certificates (one per name of `TLS_NAMES`) written to `dir`.
fn certificates(dir: &std::path::Path) -> Vec<(PathBuf, PathBuf)> {
    TLS_NAMES
        .iter()
        .map(|name| {
            let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("cert");
            let (cert, key) = (
                dir.join(format!("{name}.pem")),
                dir.join(format!("{name}.key")),
            );
            std::fs::write(&cert, c.cert.pem()).expect("cert");
            std::fs::write(&key, c.signing_key.serialize_pem()).expect("key");
            (cert, key)
        })
        .collect()
}

impl World {
    /// Starts the origins and the mesh, and returns once the mesh voted: every endpoint of
    /// `three` answers, `dead` (its origin stopped) answers 530, and the aggregator is ready.
    pub fn start() -> World {
        let (scratch, key) = scratch_dir_with_key("proxy");
        let dir = scratch.path().to_path_buf();
        let origins: BTreeMap<&str, Origin> = ORIGINS
            .iter()
            .map(|&(name, ip)| {
                let wait = if name == "slow" { HOLD } else { Duration::ZERO };
                (name, named_origin(ip, name, wait))
            })
            .collect();
        let at = |name: &str| {
            let ip = ORIGINS.iter().find(|(n, _)| *n == name).unwrap().1;
            (ip, origins[name].port)
        };
        let config_file = dir.join("meshlb.toml");
        config(at).write(&config_file);
        let certs = certificates(&dir);
        let (admin, proxy, proxy_tls) = (free_tcp(), free_tcp(), free_tcp());
        let mut extra: Vec<String> = vec![
            "--proxy".into(),
            proxy.to_string(),
            "--proxy-tls".into(),
            proxy_tls.to_string(),
        ];
        for (c, k) in &certs {
            extra.extend(["--tls-cert".into(), c.display().to_string()]);
            extra.extend(["--tls-key".into(), k.display().to_string()]);
        }
        let procs = start_mesh(&config_file, &key, admin, &extra);
        let world = World {
            origins,
            certs,
            admin,
            proxy,
            proxy_tls,
            url: format!("http://{proxy}/"),
            dir,
            _procs: procs,
            _scratch: scratch,
        };
        world.origins["down"].stop();
        wait_for("the mesh voted", Duration::from_secs(30), || {
            world.endpoints_answering("sticky.example.test", 30) == 3
                && curl(&world.url, "dead.example.test", &[]).status == 530
        });
        // Every other pool has its verdicts too (until then it is Unknown and takes nothing).
        wait_for("the aggregator ready", Duration::from_secs(30), || {
            get(admin, "/readyz").is_some_and(|r| r["ready"] == true)
        });
        world
    }

    /// How many endpoints answered `n` requests for `host`.
    pub fn endpoints_answering(&self, host: &str, n: usize) -> usize {
        (0..n)
            .map(|_| curl(&self.url, host, &[]).origin().to_string())
            .collect::<BTreeSet<String>>()
            .len()
    }

    /// Waits until every endpoint of every pool but `dead` is voted healthy (the proxy takes
    /// the same verdicts at the same tally): the state each trial starts from, whatever the
    /// trial before it stopped.
    pub fn wait_steady(&self) {
        wait_for(
            "every endpoint but dead's healthy",
            Duration::from_secs(20),
            || {
                get(self.admin, "/status").is_some_and(|s| {
                    s["pools"].as_array().is_some_and(|pools| {
                        pools.iter().filter(|p| p["name"] != "dead").all(|p| {
                            p["endpoints"]
                                .as_array()
                                .is_some_and(|e| e.iter().all(|e| e["verdict"] == "healthy"))
                        })
                    })
                })
            },
        );
    }

    /// The verdict on endpoint `endpoint` of pool `pool` in `/status`.
    pub fn verdict(&self, pool: &str, endpoint: &str) -> Option<String> {
        let status = get(self.admin, "/status")?;
        let pool = status["pools"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == pool)?;
        let e = pool["endpoints"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == endpoint)?;
        e["verdict"].as_str().map(str::to_string)
    }

    /// A number in the aggregator's Prometheus text: the value of the series `series` (its
    /// name and labels exactly as printed); 0 when it is absent.
    pub fn metric(&self, series: &str) -> f64 {
        let prefix = format!("{series} ");
        scrape(self.admin)
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}
