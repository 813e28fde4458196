//! `meshlb demo` as a user runs it: 40 real processes and the demo origins come up healthy,
//! `dig` and `curl` get answers from it, stopping an origin through its command input fails it
//! over and starting it brings it back, and Ctrl-C (SIGINT) stops every process.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::*;

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
    support::unbound(
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

#[test]
fn the_demo_runs_answers_fails_over_and_stops_cleanly() {
    let (dns, proxy, admin) = (free_tcp(), free_tcp(), free_tcp());
    let gossip = free_udp_range();
    let origin_port = free_tcp().port();
    let mut demo = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["demo", "--no-view"])
        .args(["--dns", &dns.to_string(), "--proxy", &proxy.to_string()])
        .args(["--admin", &admin.to_string()])
        .args(["--gossip-port", &gossip.to_string()])
        .args(["--origin-port", &origin_port.to_string()])
        // eu-2 flaps; a long up phase keeps it up for the whole test, whatever the timing.
        .args(["--flap", "600,20"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("meshlb demo");
    let mut input = demo.stdin.take().expect("stdin");

    let up = wait_for(
        "every demo endpoint to be healthy",
        Duration::from_secs(120),
        || {
            ["eu-1", "eu-2", "us-1", "us-2", "ap-1", "ap-2", "static"]
                .iter()
                .all(|e| healthy(admin, e) == Some(true))
        },
    );
    println!("demo healthy {up:?} after start");
    // A verdict needs only a majority of the datacenters that voted: wait for every prober
    // (13 regions x 3 datacenters) to be alive in the aggregator's view too.
    wait_for("39 live probers", Duration::from_secs(60), || {
        get(admin, "/members")
            .and_then(|m| m.as_array().cloned())
            .is_some_and(|m| {
                m.iter()
                    .filter(|m| m["role"] == "prober" && m["alive"] == true)
                    .count()
                    == 39
            })
    });

    // DNS: failover answers the first pool (eu); geo answers by the ECS region.
    let mut answer = dig_short(dns, "failover.demo.test");
    answer.sort();
    assert_eq!(answer, vec!["127.0.1.11", "127.0.1.12"]);
    let geo = Command::new("dig")
        .arg(format!("@{}", dns.ip()))
        .args([
            "-p",
            &dns.port().to_string(),
            "geo.demo.test",
            "A",
            "+short",
            "+subnet=10.3.0.0/24",
        ])
        .output()
        .expect("dig");
    let geo = String::from_utf8_lossy(&geo.stdout).to_string();
    assert!(
        geo.contains("127.0.1.3"),
        "SEAS clients get the ap pool: {geo}"
    );
    // The proxied www.demo.test resolves to the demo's PoP (its proxy), never to an origin
    // (seed 000: proxied hides the endpoints).
    wait_for(
        "www.demo.test to name the PoP",
        Duration::from_secs(20),
        || dig_short(dns, "www.demo.test") == vec![proxy.ip().to_string()],
    );
    // Through a real resolver (Unbound, demo.test delegated to the demo): the apex, the
    // names, NXDOMAIN, and ECS geo answers that differ per subnet.
    let resolver_dir = tempfile::tempdir().expect("dir");
    let resolver = free_tcp_and_udp();
    let _unbound = Procs(vec![unbound(resolver_dir.path(), resolver, dns)]);
    wait_for("the resolver answers", Duration::from_secs(20), || {
        resolve(resolver, &["demo.test", "SOA"]).0 == "NOERROR"
    });
    let (status, soa) = resolve(resolver, &["demo.test", "SOA"]);
    assert!(status == "NOERROR" && soa.len() == 1, "{status} {soa:?}");
    let (status, ns) = resolve(resolver, &["demo.test", "NS"]);
    assert_eq!(
        (status.as_str(), ns),
        ("NOERROR", vec!["ns1.demo.test.".to_string()])
    );
    assert_eq!(
        resolve(resolver, &["failover.demo.test", "A"]),
        (
            "NOERROR".to_string(),
            vec!["127.0.1.11".to_string(), "127.0.1.12".to_string()]
        )
    );
    assert_eq!(
        resolve(resolver, &["www.demo.test", "A"]),
        ("NOERROR".to_string(), vec![proxy.ip().to_string()])
    );
    assert_eq!(resolve(resolver, &["nothing.demo.test", "A"]).0, "NXDOMAIN");
    let ap = resolve(resolver, &["+subnet=10.3.0.0/24", "geo.demo.test", "A"]).1;
    let eu = resolve(resolver, &["+subnet=10.1.0.0/24", "geo.demo.test", "A"]).1;
    assert!(
        ap.iter().all(|a| a.starts_with("127.0.1.3")) && !ap.is_empty(),
        "SEAS through the resolver: {ap:?}"
    );
    assert!(
        eu.iter().all(|a| a.starts_with("127.0.1.1")) && !eu.is_empty(),
        "WEU through the resolver: {eu:?}"
    );

    // Each region measures its own RTTs (the origins emulate the distance from the probing
    // region): from SEAS the ap pool is nearest, from WEU the eu pool, and the fallback is far
    // from both.
    let rtt = |pool: &str, region: &str| -> Option<f64> {
        get(admin, "/status")?["pools"]
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
    // The proxy serves www.demo.test (dynamic latency from the PoP WEU) from the nearest real
    // pool, eu — not from the fallback.
    let page = || {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "5", "-H", "Host: www.demo.test"])
            .arg(format!("http://{proxy}/"))
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

    // Stop eu-1 through the demo's command input: the mesh marks it down, DNS drops it.
    writeln!(input, "kill eu-1").expect("command");
    let down = wait_for("eu-1 to be marked down", Duration::from_secs(15), || {
        healthy(admin, "eu-1") == Some(false)
    });
    println!("eu-1 down {down:?} after the command");
    assert!(!dig_short(dns, "failover.demo.test").contains(&"127.0.1.11".to_string()));
    writeln!(input, "start eu-1").expect("command");
    wait_for("eu-1 to be healthy again", Duration::from_secs(15), || {
        healthy(admin, "eu-1") == Some(true)
    });

    // Ctrl-C stops the demo and every process it started.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(demo.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let mut exited = None;
    wait_for("the demo to exit", Duration::from_secs(15), || {
        exited = demo.try_wait().ok().flatten();
        exited.is_some()
    });
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
