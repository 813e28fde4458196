//! `meshlb demo` as a user runs it: 40 real processes and the demo origins come up healthy,
//! `dig` and `curl` get answers from it, stopping an origin through its command input fails it
//! over and starting it brings it back, and Ctrl-C (SIGINT) stops every process.
//!
//! One demo, started once and shared by the named trials (a `libtest-mimic` harness, `main` at
//! the end, one trial at a time); the Ctrl-C trial runs last, as it ends the demo.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::*;

/// A base port with itself and the 39 above it free for UDP on 127.0.0.1, below Linux's
/// ephemeral range (32768 and up): a port there that is free now can be handed to any process's
/// outgoing socket before the demo's last prober binds it (CI saw exactly that when the test's
/// pid put the range there).
fn free_udp_range() -> u16 {
    for attempt in 0..200u32 {
        let offset = (std::process::id() + attempt * 97) % 12_000;
        let base = 20_000 + u16::try_from(offset).expect("below 12000");
        let all_free = (0..40).all(|i| UdpSocket::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return base;
        }
    }
    panic!("no range of 40 free UDP ports");
}

fn healthy(admin: SocketAddr, endpoint: &str) -> Option<bool> {
    let status = get(admin, "/status")?;
    let e = status["pools"]
        .as_array()?
        .iter()
        .flat_map(|p| p["endpoints"].as_array().into_iter().flatten())
        .find(|e| e["name"] == endpoint)?
        .clone();
    Some(e["verdict"] == "healthy")
}

/// A real Unbound resolver on `listen` that delegates `demo.test` to `stub` (the demo's DNS
/// server) and forwards the client's EDNS Client Subnet to it; every other name is refused, so
/// nothing leaves loopback.
fn unbound(dir: &std::path::Path, listen: SocketAddr, stub: SocketAddr) -> std::process::Child {
    test_support::unbound(
        dir,
        listen,
        &format!(
            r#"  do-not-query-localhost: no
  qname-minimisation: no
  module-config: "subnetcache iterator"
  send-client-subnet: {stub_ip}
  client-subnet-always-forward: yes
  local-zone: "." refuse
  local-zone: "test." nodefault
  local-zone: "demo.test." transparent
"#,
            stub_ip = stub.ip()
        ),
        &format!(
            "stub-zone:\n  name: \"demo.test\"\n  stub-addr: {}@{}\n",
            stub.ip(),
            stub.port()
        ),
    )
}

/// `dig` through a resolver (recursion wanted): status and the answers' data.
fn resolve(resolver: SocketAddr, args: &[&str]) -> (String, Vec<String>) {
    let out = Command::new("dig")
        .arg(format!("@{}", resolver.ip()))
        .args(["-p", &resolver.port().to_string(), "+tries=1", "+time=3"])
        .args(["+noall", "+comments", "+answer"])
        .args(args)
        .output()
        .expect("dig");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let status = text
        .lines()
        .find_map(|l| l.split("status: ").nth(1))
        .and_then(|s| s.split(',').next())
        .unwrap_or("")
        .to_string();
    let mut answers: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect();
    answers.sort();
    (status, answers)
}

/// `meshlb demo` running (its every endpoint healthy, its 39 probers alive), and a real
/// Unbound resolver delegating `demo.test` to it.
struct Demo {
    dns: SocketAddr,
    proxy: SocketAddr,
    admin: SocketAddr,
    /// The first of the 40 gossip ports.
    gossip: u16,
    /// The demo's command input.
    input: std::process::ChildStdin,
    resolver: SocketAddr,
    /// The demo, then Unbound.
    procs: Interrupting,
    _resolver_dir: tempfile::TempDir,
}

const ENDPOINTS: [&str; 8] = [
    "eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2", "static", "office-1",
];

fn live_probers(admin: SocketAddr) -> usize {
    get(admin, "/members")
        .and_then(|m| m.as_array().cloned())
        .map_or(0, |m| {
            m.iter()
                .filter(|m| m["role"] == "prober" && m["alive"] == true)
                .count()
        })
}

fn start_demo() -> Demo {
    let (dns, proxy, admin) = (free_tcp(), free_tcp(), free_tcp());
    let gossip = free_udp_range();
    let origin_port = free_tcp().port();
    let mut demo = spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(["demo", "--no-view"])
            .args(["--dns", &dns.to_string(), "--proxy", &proxy.to_string()])
            .args(["--admin", &admin.to_string()])
            .args(["--gossip-port", &gossip.to_string()])
            .args(["--origin-port", &origin_port.to_string()])
            .args(["--tunnel", &free_tcp().to_string()])
            // eu-2 flaps; a long up phase keeps it up for the whole run, whatever the timing.
            .args(["--flap", "600,20"])
            .stdin(Stdio::piped()),
        "demo",
    );
    let input = demo.stdin.take().expect("stdin");
    let mut procs = Interrupting(Procs(vec![demo]));
    let up = wait_for(
        "every demo endpoint to be healthy",
        Duration::from_secs(120),
        || ENDPOINTS.iter().all(|e| healthy(admin, e) == Some(true)),
    );
    println!("demo healthy {up:?} after start");
    // A verdict needs only a majority of the datacenters that voted: wait for every prober
    // (13 regions x 3 datacenters) to be alive in the aggregator's view too.
    wait_for("39 live probers", Duration::from_secs(60), || {
        live_probers(admin) == 39
    });
    let resolver_dir = tempfile::tempdir().expect("dir");
    let resolver = free_tcp_and_udp();
    procs.0 .0.push(unbound(resolver_dir.path(), resolver, dns));
    wait_for("the resolver answers", Duration::from_secs(20), || {
        resolve(resolver, &["demo.test", "SOA"]).0 == "NOERROR"
    });
    Demo {
        dns,
        proxy,
        admin,
        gossip,
        input,
        resolver,
        procs,
        _resolver_dir: resolver_dir,
    }
}

static DEMO: Shared<Demo> = Shared::new(start_demo);

/// The demo's processes, the demo first: stopped with Ctrl-C (SIGINT) when dropped, so that
/// the demo stops the 40 processes it started (killed, it would leave them running), then
/// killed if still there.
struct Interrupting(Procs);

impl Interrupting {
    fn demo(&mut self) -> &mut std::process::Child {
        &mut self.0 .0[0]
    }
}

impl Drop for Interrupting {
    fn drop(&mut self) {
        let demo = self.demo();
        if let Ok(None) = demo.try_wait() {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(demo.id()).expect("pid"));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            wait_until(Duration::from_secs(15), || {
                demo.try_wait().is_ok_and(|s| s.is_some())
            });
        }
    }
}

fn every_demo_endpoint_comes_up_healthy_with_every_prober_alive(d: &mut Demo) {
    for e in ENDPOINTS {
        assert_eq!(healthy(d.admin, e), Some(true), "{e}");
    }
    assert_eq!(live_probers(d.admin), 39);
}

fn failover_answers_the_first_pool(d: &mut Demo) {
    let mut answer = dig_short(d.dns, "failover.demo.test");
    answer.sort();
    assert_eq!(answer, vec!["127.0.1.11", "127.0.1.12"]);
}

fn geo_answers_by_the_ecs_region(d: &mut Demo) {
    let geo = Command::new("dig")
        .arg(format!("@{}", d.dns.ip()))
        .args(["-p", &d.dns.port().to_string(), "geo.demo.test", "A"])
        .args(["+short", "+subnet=10.3.0.0/24"])
        .output()
        .expect("dig");
    let geo = String::from_utf8_lossy(&geo.stdout).to_string();
    assert!(
        geo.contains("127.0.1.3"),
        "SEAS clients get the ap pool: {geo}"
    );
}

fn a_proxied_name_resolves_to_the_pop_never_to_an_origin(d: &mut Demo) {
    // Proxied hides the endpoints (docs/design.md).
    wait_for(
        "www.demo.test to name the PoP",
        Duration::from_secs(20),
        || dig_short(d.dns, "www.demo.test") == vec![d.proxy.ip().to_string()],
    );
}

fn a_real_resolver_gets_the_apex_through_the_delegation(d: &mut Demo) {
    let (status, soa) = resolve(d.resolver, &["demo.test", "SOA"]);
    assert!(status == "NOERROR" && soa.len() == 1, "{status} {soa:?}");
    let (status, ns) = resolve(d.resolver, &["demo.test", "NS"]);
    assert_eq!(
        (status.as_str(), ns),
        ("NOERROR", vec!["ns1.demo.test.".to_string()])
    );
}

fn a_real_resolver_gets_the_names_and_nxdomain_for_the_rest(d: &mut Demo) {
    assert_eq!(
        resolve(d.resolver, &["failover.demo.test", "A"]),
        (
            "NOERROR".to_string(),
            vec!["127.0.1.11".to_string(), "127.0.1.12".to_string()]
        )
    );
    assert_eq!(
        resolve(d.resolver, &["www.demo.test", "A"]),
        ("NOERROR".to_string(), vec![d.proxy.ip().to_string()])
    );
    assert_eq!(
        resolve(d.resolver, &["nothing.demo.test", "A"]).0,
        "NXDOMAIN"
    );
}

fn a_real_resolver_gets_geo_answers_that_differ_per_client_subnet(d: &mut Demo) {
    let ap = resolve(d.resolver, &["+subnet=10.3.0.0/24", "geo.demo.test", "A"]).1;
    let eu = resolve(d.resolver, &["+subnet=10.1.0.0/24", "geo.demo.test", "A"]).1;
    assert!(
        ap.iter().all(|a| a.starts_with("127.0.1.3")) && !ap.is_empty(),
        "SEAS through the resolver: {ap:?}"
    );
    assert!(
        eu.iter().all(|a| a.starts_with("127.0.1.1")) && !eu.is_empty(),
        "WEU through the resolver: {eu:?}"
    );
}

fn each_region_measures_its_own_rtts(d: &mut Demo) {
    // The origins emulate the distance from the probing region: from SEAS the ap pool is
    // nearest, from WEU the eu pool, and the fallback is far from both.
    let rtt = |pool: &str, region: &str| -> Option<f64> {
        get(d.admin, "/status")?["pools"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == pool)?["rtt_ms"][region]
            .as_f64()
    };
    wait_for(
        "regional RTTs that tell the pools apart",
        Duration::from_secs(60),
        || {
            let (Some(ap_seas), Some(eu_seas), Some(ap_weu), Some(eu_weu), Some(static_weu)) = (
                rtt("ap", "SEAS"),
                rtt("eu", "SEAS"),
                rtt("ap", "WEU"),
                rtt("eu", "WEU"),
                rtt("static", "WEU"),
            ) else {
                return false;
            };
            ap_seas < eu_seas && eu_weu < ap_weu && eu_weu < static_weu
        },
    );
}

fn the_proxy_serves_from_the_nearest_real_pool_not_the_fallback(d: &mut Demo) {
    // Dynamic latency from the PoP WEU: the eu pool.
    let page = || {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "5", "-H", "Host: www.demo.test"])
            .arg(format!("http://{}/", d.proxy))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(page().starts_with("hello from "));
    wait_for(
        "www.demo.test served by the eu pool",
        Duration::from_secs(60),
        || page().contains("(pool eu)"),
    );
}

fn the_private_pool_is_served_through_the_demo_s_tunnel(d: &mut Demo) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", "-H", "Host: office.demo.test"])
        .arg(format!("http://{}/", d.proxy))
        .output()
        .expect("curl");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains("(pool office)"), "{page}");
}

fn an_origin_stopped_through_the_command_input_fails_over_and_comes_back(d: &mut Demo) {
    writeln!(d.input, "kill eu-1").expect("command");
    let admin = d.admin;
    let down = wait_for("eu-1 to be marked down", Duration::from_secs(15), || {
        healthy(admin, "eu-1") == Some(false)
    });
    println!("eu-1 down {down:?} after the command");
    let answer = dig_short(d.dns, "failover.demo.test");
    writeln!(d.input, "start eu-1").expect("command");
    assert!(
        !answer.contains(&"127.0.1.11".to_string()),
        "DNS drops eu-1: {answer:?}"
    );
    wait_for("eu-1 to be healthy again", Duration::from_secs(15), || {
        healthy(admin, "eu-1") == Some(true)
    });
}

fn ctrl_c_stops_the_demo_and_every_process_it_started(d: &mut Demo) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(d.procs.demo().id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let mut exited = None;
    let ended = wait_until(Duration::from_secs(15), || {
        exited = d.procs.demo().try_wait().ok().flatten();
        exited.is_some()
    });
    let (admin, gossip) = (d.admin, d.gossip);
    assert!(
        ended.is_some(),
        "the demo did not exit within 15 s of SIGINT"
    );
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    assert!(
        std::net::TcpStream::connect(admin).is_err(),
        "the aggregator is gone"
    );
    let freed = (0..40).all(|i| UdpSocket::bind(("127.0.0.1", gossip + i)).is_ok());
    assert!(
        freed,
        "every gossip port is free again: no prober is left running"
    );
}

fn main() {
    let mut all = trials![DEMO =>
        every_demo_endpoint_comes_up_healthy_with_every_prober_alive,
        failover_answers_the_first_pool,
        geo_answers_by_the_ecs_region,
        a_proxied_name_resolves_to_the_pop_never_to_an_origin,
        a_real_resolver_gets_the_apex_through_the_delegation,
        a_real_resolver_gets_the_names_and_nxdomain_for_the_rest,
        a_real_resolver_gets_geo_answers_that_differ_per_client_subnet,
        each_region_measures_its_own_rtts,
        the_proxy_serves_from_the_nearest_real_pool_not_the_fallback,
        the_private_pool_is_served_through_the_demo_s_tunnel,
        an_origin_stopped_through_the_command_input_fails_over_and_comes_back,
    ];
    // Last, as it ends the demo (a trial run after it starts another).
    all.push(DEMO.ending(
        stringify!(ctrl_c_stops_the_demo_and_every_process_it_started),
        ctrl_c_stops_the_demo_and_every_process_it_started,
    ));
    trials::run(all, Threads::One);
}
