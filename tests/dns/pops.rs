//! A proxied load balancer hides its origins (Cloudflare's proxied records; docs/design.md).
//! Two aggregators (PoPs WEU and ENAM) advertise their proxies; DNS answers the proxied name
//! with them, nearest to the client first (by the PoP, or by the ECS subnet's region), never
//! with an origin; a PoP that dies leaves the answer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use crate::{addresses, one, Dig};
use test_support::config::{Config, Lb, Pool, Zone};
use test_support::*;

/// The answer's addresses in the order they came.
fn in_order(d: &Dig) -> Vec<String> {
    d.answers.iter().map(|(_, v)| v.clone()).collect()
}

pub struct PopsWorld {
    admin_a: SocketAddr,
    dns: SocketAddr,
    config: PathBuf,
    key: PathBuf,
    gossip_a: SocketAddr,
    /// The WEU PoP (serving DNS), then the ENAM one.
    procs: Procs,
    _scratch: tempfile::TempDir,
}

fn pops_config() -> Config {
    Config::new()
        .pool(Pool::new("web").origin("o", "192.0.2.1"))
        .zone(Zone::new("example.test"))
        .network_in_region("10.2.0.0/16", "ENAM")
        .load_balancer(
            Lb::new("www.example.test")
                .pools(&["web"])
                .proxied()
                .prefer_ecs("always"),
        )
}

impl PopsWorld {
    pub fn start() -> PopsWorld {
        let (scratch, key) = scratch_dir_with_key("dns-pops");
        let config = scratch.path().join("meshlb.toml");
        pops_config().write(&config);
        let mut w = PopsWorld {
            admin_a: free_tcp(),
            dns: free_tcp_and_udp(),
            config,
            key,
            gossip_a: free_udp(),
            procs: Procs(Vec::new()),
            _scratch: scratch,
        };
        let dns = w.dns.to_string();
        let a = w.spawn(
            "WEU",
            w.admin_a,
            w.gossip_a,
            &["--dns", &dns, "--dns-sockets", "1"],
        );
        w.procs.0.push(a);
        let b = w.spawn_enam();
        w.procs.0.push(b);
        w.wait_both();
        w
    }

    fn spawn(&self, region: &str, admin: SocketAddr, listen: SocketAddr, extra: &[&str]) -> Child {
        let advertise = if region == "WEU" {
            &["--advertise-proxy", "127.0.0.11"][..]
        } else {
            &[
                "--advertise-proxy",
                "127.0.0.12",
                "--advertise-proxy",
                "::1",
            ][..]
        };
        spawn_logged(
            Command::new(env!("CARGO_BIN_EXE_meshlb"))
                .args(["aggregator", "--config", self.config.to_str().unwrap()])
                .args(["--region", region, "--admin", &admin.to_string()])
                .args(["--proxy", &free_tcp().to_string(), "--proxy-workers", "1"])
                .args(["--listen", &listen.to_string()])
                .args(["--seed", &self.gossip_a.to_string()])
                .args(["--key-file", self.key.to_str().unwrap()])
                .args(["--gossip-interval-ms", "100"])
                .args(advertise)
                .args(extra),
            "aggregator",
        )
    }

    fn spawn_enam(&self) -> Child {
        self.spawn("ENAM", free_tcp(), free_udp(), &[])
    }

    fn query(&self, args: &[&str]) -> Dig {
        one(self.dns, args)
    }

    /// Waits until both PoPs are in the answer: the state each trial starts from.
    fn wait_both(&self) {
        wait_for("both PoPs in the answer", Duration::from_secs(30), || {
            addresses(&self.query(&["www.example.test", "A"])) == ["127.0.0.11", "127.0.0.12"]
        });
    }
}

/// Located by the PoP answering (WEU): the WEU PoP first.
pub fn the_answering_pops_own_address_comes_first(w: &mut PopsWorld) {
    w.wait_both();
    assert_eq!(
        in_order(&w.query(&["www.example.test", "A"])),
        ["127.0.0.11", "127.0.0.12"]
    );
}

/// A client subnet in ENAM: the ENAM PoP first, scoped to the network that decided.
pub fn a_client_subnets_region_puts_its_pop_first(w: &mut PopsWorld) {
    w.wait_both();
    let enam = w.query(&["+subnet=10.2.3.0/24", "www.example.test", "A"]);
    assert_eq!(in_order(&enam), ["127.0.0.12", "127.0.0.11"]);
    assert_eq!(enam.ecs.as_deref(), Some("10.2.3.0/24/16"), "{enam:?}");
}

pub fn aaaa_for_a_proxied_name_answers_the_pops_ipv6_addresses(w: &mut PopsWorld) {
    w.wait_both();
    assert_eq!(in_order(&w.query(&["www.example.test", "AAAA"])), ["::1"]);
}

pub fn a_proxied_name_never_reveals_an_origin(w: &mut PopsWorld) {
    w.wait_both();
    for qtype in ["A", "AAAA", "ANY"] {
        let d = w.query(&["www.example.test", qtype]);
        assert!(
            !d.answers.iter().any(|(_, v)| v == "192.0.2.1"),
            "an origin revealed for {qtype}: {d:?}"
        );
    }
}

/// `explain` shows the eligible PoPs and the order.
pub fn explain_shows_the_eligible_pops_in_order(w: &mut PopsWorld) {
    w.wait_both();
    let explained =
        get(w.admin_a, "/explain?lb=www.example.test&mode=dns&pop=ENAM").expect("explain");
    let nodes: Vec<&str> = explained["pops"]
        .as_array()
        .expect("pops")
        .iter()
        .filter_map(|p| p["region"].as_str())
        .collect();
    assert_eq!(nodes, ["ENAM", "WEU"], "{explained}");
}

/// The ENAM PoP dies: it leaves the answer. (It is started again afterwards.)
pub fn a_dead_pop_leaves_the_answer(w: &mut PopsWorld) {
    w.wait_both();
    let _ = w.procs.0[1].kill();
    let _ = w.procs.0[1].wait();
    wait_for(
        "the dead PoP out of the answer",
        Duration::from_secs(30),
        || in_order(&w.query(&["www.example.test", "A"])) == ["127.0.0.11"],
    );
    let enam = w.spawn_enam();
    let dead = std::mem::replace(&mut w.procs.0[1], enam);
    w.procs.0.push(dead);
    w.wait_both();
}
