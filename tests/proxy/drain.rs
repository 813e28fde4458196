//! `POST /drain` on the admin API: a drained endpoint takes no new clients, keeps its cookie
//! sessions for `drain_duration`, then they move; `DELETE /drain` brings it back; a drain made
//! on one aggregator holds on every other, also once the one it was made on is gone; with
//! `--state-dir` it survives a restart.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

use crate::{curl, Reply};

const HOST: &str = "drain.example.test";

/// A mesh of two aggregators (WEU with three probers, and ENAM), each with a proxy, over two
/// origins `a` and `b` behind a cookie-affinity load balancer with a 10 s drain.
pub struct DrainWorld {
    pub admin: SocketAddr,
    pub admin2: SocketAddr,
    pub url: String,
    pub url2: String,
    config: PathBuf,
    key: PathBuf,
    token: Vec<String>,
    seed: SocketAddr,
    _origins: (Origin, Origin),
    _mesh: Procs,
    _scratch: tempfile::TempDir,
}

impl DrainWorld {
    pub fn start() -> DrainWorld {
        let (scratch, key) = scratch_dir_with_key("drain");
        let dir = scratch.path();
        let a = named_origin("127.0.2.1", "a", Duration::ZERO);
        let b = named_origin("127.0.2.2", "b", Duration::ZERO);
        let config = dir.join("meshlb.toml");
        Config::new()
            .monitor(Monitor::http("http").interval(1).timeout(1))
            .pool(
                Pool::new("web")
                    .monitor("http")
                    .regions(&["WEU"])
                    .origin("a", ("127.0.2.1", a.port))
                    .origin("b", ("127.0.2.2", b.port)),
            )
            .load_balancer(
                Lb::new(HOST)
                    .pools(&["web"])
                    .proxied()
                    .affinity("cookie")
                    .drain_duration(10),
            )
            .write(&config);
        let (admin, proxy) = (free_tcp(), free_tcp());
        let token = admin_token_args(dir);
        let proxy_args = |proxy: SocketAddr| {
            [&["--proxy".to_string(), proxy.to_string()][..], &token[..]].concat()
        };
        let (mut mesh, seed) = start_mesh_seeded(&config, &key, admin, &proxy_args(proxy));
        // A second aggregator: a drain made on the first holds here too (shared in gossip).
        let (admin2, proxy2) = (free_tcp(), free_tcp());
        mesh.0.push(start_aggregator(
            &config,
            &key,
            "ENAM",
            admin2,
            seed,
            &proxy_args(proxy2),
        ));
        let world = DrainWorld {
            admin,
            admin2,
            url: format!("http://{proxy}/"),
            url2: format!("http://{proxy2}/"),
            config,
            key,
            token,
            seed,
            _origins: (a, b),
            _mesh: mesh,
            _scratch: scratch,
        };
        wait_for("both origins to serve", Duration::from_secs(20), || {
            world.origins_serving(&world.url) == ["a", "b"]
        });
        world
    }

    /// The endpoints ten new clients of `url` reached.
    fn origins_serving(&self, url: &str) -> Vec<String> {
        (0..10)
            .map(|_| curl(url, HOST, &[]).origin().to_string())
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect()
    }

    /// Nothing drained, on either aggregator, and both proxies send new clients to `a`: the
    /// state each trial starts from.
    fn undrained(&self) {
        assert!(drain_on(self.admin, "DELETE").is_empty());
        for (admin, url) in [(self.admin, &self.url), (self.admin2, &self.url2)] {
            wait_for("no drain in force", Duration::from_secs(10), || {
                drain_on(admin, "GET").is_empty()
            });
            wait_for("a to take new clients", Duration::from_secs(10), || {
                (0..10).any(|_| curl(url, HOST, &[]).origin() == "a")
            });
        }
    }

    /// Drains `a` on the first aggregator, and waits until its proxy sends new clients only to
    /// `b` (the next tally, at most 0.5 s later, applies it). When the drain was made.
    fn drain_a(&self) -> Instant {
        assert_eq!(drain_on(self.admin, "POST"), vec!["a"]);
        let drained_at = Instant::now();
        wait_for("new clients to avoid a", Duration::from_secs(6), || {
            (0..10).all(|_| curl(&self.url, HOST, &[]).origin() == "b")
        });
        drained_at
    }

    /// A session bound to `a`: its cookie (`name=value`).
    fn session_on_a(&self) -> String {
        let mut cookie = String::new();
        wait_for("a client bound to a", Duration::from_secs(10), || {
            let r = curl(&self.url, HOST, &[]);
            cookie = r
                .header("set-cookie")
                .and_then(|v| v.split(';').next())
                .unwrap_or("")
                .to_string();
            r.origin() == "a"
        });
        cookie
    }

    fn with_cookie(&self, cookie: &str) -> Reply {
        curl(&self.url, HOST, &["-H", &format!("Cookie: {cookie}")])
    }
}

/// POST, DELETE or GET /drain for `a` on the aggregator at `admin`; the drained endpoints'
/// names.
fn drain_on(admin: SocketAddr, method: &str) -> Vec<String> {
    let out = Command::new("curl")
        .args(["-s", "-X", method])
        .args(["-H", "Authorization: Bearer secret-token"])
        .arg(format!("http://{admin}/drain?pool=web&endpoint=a"))
        .output()
        .expect("curl");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    list.as_array()
        .expect("a list")
        .iter()
        .map(|d| d["endpoint"].as_str().unwrap_or("").to_string())
        .collect()
}

pub fn a_drained_endpoint_takes_no_new_clients(w: &mut DrainWorld) {
    w.undrained();
    w.drain_a();
    assert!((0..10).all(|_| curl(&w.url, HOST, &[]).origin() == "b"));
    w.undrained();
}

/// Within drain_duration (10 s; the drain starts at the whole second, so it lasts between 9
/// and 10 s) a session bound to the drained endpoint stays on it.
pub fn a_drained_endpoint_keeps_its_sessions_within_drain_duration(w: &mut DrainWorld) {
    w.undrained();
    let cookie = w.session_on_a();
    let drained_at = w.drain_a();
    let within = w.with_cookie(&cookie);
    assert!(
        drained_at.elapsed() < Duration::from_secs(9),
        "checked within the drain"
    );
    assert_eq!(
        within.origin(),
        "a",
        "an existing session keeps its endpoint while draining"
    );
    w.undrained();
}

/// Once drain_duration is over, the session moves, with a new cookie; not before.
pub fn a_drained_endpoints_sessions_move_after_drain_duration(w: &mut DrainWorld) {
    w.undrained();
    let cookie = w.session_on_a();
    let drained_at = w.drain_a();
    let mut moved = None;
    wait_for(
        "the session to move after the drain",
        Duration::from_secs(15),
        || {
            let r = w.with_cookie(&cookie);
            let ok = r.origin() == "b" && r.header("set-cookie").is_some();
            moved = ok.then(|| drained_at.elapsed());
            ok
        },
    );
    let moved = moved.expect("moved");
    assert!(
        moved >= Duration::from_secs(9),
        "not before drain_duration (whole seconds): {moved:?}"
    );
    w.undrained();
}

/// The other aggregator has the drain from gossip: its proxy sends new clients to b only.
pub fn a_drain_holds_on_the_other_aggregator(w: &mut DrainWorld) {
    w.undrained();
    w.drain_a();
    wait_for(
        "the drain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(w.admin2, "GET") == vec!["a"],
    );
    assert!((0..10).all(|_| curl(&w.url2, HOST, &[]).origin() == "b"));
    w.undrained();
}

/// `DELETE /drain` on one aggregator ends the drain on the other too.
pub fn an_undrain_holds_on_the_other_aggregator(w: &mut DrainWorld) {
    w.undrained();
    w.drain_a();
    wait_for(
        "the drain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(w.admin2, "GET") == vec!["a"],
    );
    assert!(drain_on(w.admin, "DELETE").is_empty());
    wait_for(
        "the undrain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(w.admin2, "GET").is_empty(),
    );
}

/// Undrained: new clients reach a again.
pub fn an_undrained_endpoint_takes_new_clients_again(w: &mut DrainWorld) {
    w.undrained();
    w.drain_a();
    assert!(drain_on(w.admin, "DELETE").is_empty());
    wait_for(
        "a to take new clients again",
        Duration::from_secs(5),
        || (0..10).any(|_| curl(&w.url, HOST, &[]).origin() == "a"),
    );
}

/// A drain outlives the aggregator it was made on: made on a third aggregator, which then
/// dies, it still holds on the second (which adopted the decision and publishes it itself).
pub fn a_drain_outlives_the_aggregator_it_was_made_on(w: &mut DrainWorld) {
    w.undrained();
    let admin3 = free_tcp();
    let mut third = Procs(vec![start_aggregator(
        &w.config, &w.key, "EEU", admin3, w.seed, &w.token,
    )]);
    wait_for(
        "the third aggregator's admin API",
        Duration::from_secs(20),
        || get(admin3, "/members").is_some(),
    );
    assert_eq!(drain_on(admin3, "POST"), vec!["a"]);
    wait_for(
        "the drain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(w.admin2, "GET") == vec!["a"],
    );
    for c in &mut third.0 {
        c.kill().expect("kill the third aggregator");
        c.wait().expect("reap it");
    }
    wait_for(
        "the second aggregator to see the third dead",
        Duration::from_secs(30),
        || {
            get(w.admin2, "/members").is_some_and(|m| {
                m.as_array().into_iter().flatten().any(|m| {
                    m["role"] == "aggregator" && m["region"] == "EEU" && m["alive"] == false
                })
            })
        },
    );
    assert_eq!(
        drain_on(w.admin2, "GET"),
        vec!["a"],
        "the drain is still in force"
    );
    assert!((0..10).all(|_| curl(&w.url2, HOST, &[]).origin() == "b"));
    w.undrained();
}
