//! The DNS world: a mesh (one aggregator serving DNS on 127.0.0.1 and ::1, three probers) over
//! nine origins, one per pool endpoint, plus one behind a host name.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::{addresses, one};
use test_support::config::{Config, Endpoint, Lb, Monitor, Pool, Zone};
use test_support::*;

/// The origins' addresses, one origin each.
pub const ORIGINS: [&str; 9] = [
    "127.0.0.11",
    "127.0.0.12",
    "127.0.0.21",
    "127.0.0.31",
    "127.0.0.41",
    "127.0.0.42",
    "127.0.0.51",
    "127.0.0.52",
    "::1",
];

pub struct World {
    pub origins: BTreeMap<&'static str, Origin>,
    pub admin: SocketAddr,
    pub dns4: SocketAddr,
    pub dns6: SocketAddr,
    pub config: PathBuf,
    /// The config file's text, and the same with the fallback pool disabled.
    pub text: String,
    pub fallback_disabled: String,
    pub aggregator: nix::unistd::Pid,
    /// The addresses of the origins stopped now.
    stopped: BTreeSet<&'static str>,
    _alias: Origin,
    _procs: Procs,
    _scratch: tempfile::TempDir,
}

/// The config; with `fallback_disabled`, the fallback pool `last` is disabled.
fn config(port: impl Fn(&str) -> u16, alias_port: u16, fallback_disabled: bool) -> String {
    let pool = |name: &str| Pool::new(name).monitor("http").regions(&["WEU"]);
    let one =
        |name: &str, endpoint: &str, ip: &'static str| pool(name).origin(endpoint, (ip, port(ip)));
    let last = one("last", "f1", "127.0.0.31");
    Config::new()
        .monitor(
            Monitor::http("http")
                .interval(1)
                .timeout(1)
                .retries(0)
                .consecutive_down(2),
        )
        .pool(
            pool("primary")
                .origin("p1", ("127.0.0.11", port("127.0.0.11")))
                .origin("p2", ("127.0.0.12", port("127.0.0.12"))),
        )
        .pool(one("secondary", "s1", "127.0.0.21"))
        .pool(if fallback_disabled {
            last.enabled(false)
        } else {
            last
        })
        .pool(
            pool("weighted")
                .endpoint(Endpoint::new("w1", ("127.0.0.41", port("127.0.0.41"))).weight(0.25))
                .endpoint(Endpoint::new("w2", ("127.0.0.42", port("127.0.0.42"))).weight(0.75)),
        )
        .pool(one("eu", "eu1", "127.0.0.51"))
        .pool(one("us", "us1", "127.0.0.52"))
        .pool(one("six", "v6", "::1"))
        .pool(pool("alias").origin("cdn", ("localhost", alias_port)))
        .zone(
            Zone::new("example.test")
                .nameservers(&["ns1.example.test", "ns2.example.test"])
                .negative_ttl(30),
        )
        .network_in_country("10.1.0.0/16", "DE")
        .network_in_region("10.2.0.0/16", "ENAM")
        .load_balancer(
            Lb::new("www.example.test")
                .pools(&["primary", "secondary"])
                .fallback("last")
                .ttl(20),
        )
        .load_balancer(Lb::new("weighted.example.test").pools(&["weighted"]))
        .load_balancer(
            Lb::new("geo.example.test")
                .pools(&["eu"])
                .region_pools(&[("WEU", &["eu"]), ("ENAM", &["us"])])
                .prefer_ecs("always"),
        )
        .load_balancer(Lb::new("six.example.test").pools(&["six"]))
        .load_balancer(Lb::new("cdn.example.test").pools(&["alias"]))
        .render()
}

impl World {
    /// Starts the origins and the mesh; returns once the primary pool is answered whole.
    pub fn start() -> World {
        let (scratch, key) = scratch_dir_with_key("dns");
        let origins: BTreeMap<&str, Origin> =
            ORIGINS.into_iter().map(|ip| (ip, origin_on(ip))).collect();
        let alias = origin();
        let config_file = scratch.path().join("meshlb.toml");
        let port = |ip: &str| origins[ip].port;
        let (text, disabled) = (
            config(port, alias.port, false),
            config(port, alias.port, true),
        );
        std::fs::write(&config_file, &text).expect("config");
        let admin = free_tcp();
        let dns4 = free_tcp_and_udp();
        let dns6 = free_tcp_and_udp_v6();
        let extra: Vec<String> = ["--dns", &dns4.to_string(), "--dns", &dns6.to_string()]
            .iter()
            .map(|a| a.to_string())
            .chain(["--dns-sockets".to_string(), "2".to_string()])
            .collect();
        let procs = start_mesh(&config_file, &key, admin, &extra);
        let pid = i32::try_from(procs.0[0].id()).expect("pid");
        let all_up = wait_for("the primary pool answered", Duration::from_secs(30), || {
            addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.11", "127.0.0.12"]
        });
        eprintln!("first full answer after {all_up:?}");
        World {
            origins,
            admin,
            dns4,
            dns6,
            config: config_file,
            text,
            fallback_disabled: disabled,
            aggregator: nix::unistd::Pid::from_raw(pid),
            stopped: BTreeSet::new(),
            _alias: alias,
            _procs: procs,
            _scratch: scratch,
        }
    }

    /// (address, verdict) of every endpoint of every pool in `/status`.
    fn verdicts(&self) -> Vec<(String, String)> {
        let Some(status) = get(self.admin, "/status") else {
            return Vec::new();
        };
        let pools = status["pools"].as_array().cloned().unwrap_or_default();
        pools
            .iter()
            .flat_map(|p| p["endpoints"].as_array().cloned().unwrap_or_default())
            .map(|e| {
                let field = |k: &str| e[k].as_str().unwrap_or("").to_string();
                (field("address"), field("verdict"))
            })
            .collect()
    }

    /// Stops the origins at the addresses `down` (those not stopped yet) and starts every
    /// other one that is stopped; returns at once.
    pub fn set_down(&mut self, down: &[&str]) {
        for (&ip, origin) in &self.origins {
            match (down.contains(&ip), self.stopped.contains(ip)) {
                (true, false) => {
                    origin.stop();
                    self.stopped.insert(ip);
                }
                (false, true) => {
                    origin.start();
                    self.stopped.remove(ip);
                }
                _ => {}
            }
        }
    }

    /// The origins at `down` stopped and every other one serving, and the mesh's verdicts
    /// agreeing (unhealthy and healthy): the state a trial starts from, whatever the trial
    /// before it left.
    pub fn establish(&mut self, down: &[&str]) {
        self.set_down(down);
        wait_for(
            &format!("{down:?} voted down and every other origin up"),
            Duration::from_secs(20),
            || {
                let v = self.verdicts();
                !v.is_empty()
                    && v.iter().all(|(address, verdict)| {
                        let expected = if down.contains(&address.as_str()) {
                            "unhealthy"
                        } else {
                            "healthy"
                        };
                        verdict == expected
                    })
            },
        );
    }

    /// Sends the aggregator SIGHUP (reload its config file).
    pub fn reload(&self) {
        nix::sys::signal::kill(self.aggregator, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    }
}
