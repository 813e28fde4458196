//! Monitor groups end to end: real probers probe an HTTP and a TCP member (and a
//! `monitoring_only` one) of a group on real loopback servers, the aggregator combines them,
//! `/status` shows each member with its votes, events name the member that moved a verdict,
//! and `dig` sees the endpoint leave and come back.

mod support;

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// A TCP listener on `ip:port` that accepts and drops connections (a TCP monitor's origin).
fn tcp_listener(ip: &str, port: u16) {
    let l = TcpListener::bind((ip, port)).expect("tcp listener");
    std::thread::spawn(move || {
        for conn in l.incoming() {
            drop(conn);
        }
    });
}

fn dig_a(dns: SocketAddr, name: &str) -> Vec<String> {
    let out = Command::new("dig")
        .arg(format!("@{}", dns.ip()))
        .args(["-p", &dns.port().to_string()])
        .args(["+norec", "+short", "+tries=1", "+time=2", name, "A"])
        .output()
        .expect("dig (dnsutils)");
    let mut a: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    a.sort();
    a
}

/// Endpoint `name` of the first pool in `/status`.
fn endpoint<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["pools"][0]["endpoints"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
}

/// (verdict of the endpoint, verdict of each member by monitor name).
fn verdicts(admin: SocketAddr, name: &str) -> Option<(String, Vec<(String, String)>)> {
    let status = get(admin, "/status")?;
    let e = endpoint(&status, name)?;
    let members = e["members"]
        .as_array()?
        .iter()
        .map(|m| {
            (
                m["monitor"].as_str().unwrap_or("").to_string(),
                m["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    Some((e["verdict"].as_str()?.to_string(), members))
}

fn wait_verdicts(admin: SocketAddr, name: &str, want: (&str, [&str; 3]), what: &str) {
    let want_members: Vec<(String, String)> = ["http", "tcp", "side"]
        .iter()
        .zip(want.1)
        .map(|(m, v)| (m.to_string(), v.to_string()))
        .collect();
    let mut seen = None;
    let ok = wait_until(Duration::from_secs(40), || {
        seen = verdicts(admin, name);
        seen.as_ref()
            .is_some_and(|(v, m)| v == want.0 && *m == want_members)
    });
    assert!(ok.is_some(), "{what}: want {want:?}, last seen {seen:?}");
}

#[test]
fn a_group_combines_an_http_and_a_tcp_member_across_real_probers() {
    let (scratch, key) = scratch_dir_with_key("groups");
    let dir = scratch.path();
    let (http_a, http_b) = (origin_on("127.0.0.1"), origin_on("127.0.0.2"));
    // The TCP member probes one port on both endpoints' addresses.
    let tcp_a = origin_on("127.0.0.1");
    let tcp_port = tcp_a.port;
    tcp_listener("127.0.0.2", tcp_port);
    let closed = free_tcp().port();
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
interval = 1
timeout = 1
retries = 0
[[monitors]]
name = "tcp"
type = "tcp"
port = {tcp_port}
interval = 1
timeout = 1
retries = 0
[[monitors]]
name = "side"
type = "tcp"
port = {closed}
interval = 1
timeout = 1
retries = 0
[[monitor_groups]]
name = "web-and-port"
members = [
  {{ monitor = "http", must_be_healthy = true }},
  {{ monitor = "tcp" }},
  {{ monitor = "side", monitoring_only = true }},
]
[[pools]]
name = "web"
monitor_group = "web-and-port"
check_regions = ["WEU"]
origins = [
  {{ name = "a", address = "127.0.0.1", port = {pa} }},
  {{ name = "b", address = "127.0.0.2", port = {pb} }},
]
[[load_balancers]]
name = "www.groups.test"
default_pools = ["web"]
ttl = 5
"#,
            pa = http_a.port,
            pb = http_b.port,
        ),
    )
    .expect("config");
    let admin = free_tcp();
    let dns = free_tcp_and_udp();
    let extra: Vec<String> = vec!["--dns".into(), dns.to_string()];
    let _procs = start_mesh(&config, &key, admin, &extra);

    // Every member tallied; the monitoring_only one fails (closed port) without deciding.
    wait_verdicts(
        admin,
        "a",
        ("healthy", ["healthy", "healthy", "unhealthy"]),
        "first verdicts",
    );
    // The verdict moves on a majority of the three datacenters; wait for the third one's vote
    // too, so the counts below are the steady state.
    let mut status = Value::Null;
    wait_for(
        "all three DCs vote on side",
        Duration::from_secs(10),
        || {
            status = get(admin, "/status").unwrap_or(Value::Null);
            endpoint(&status, "a")
                .is_some_and(|a| a["members"][2]["regions"][0]["unhealthy_dcs"] == 3)
        },
    );
    let a = endpoint(&status, "a").expect("a");
    assert_eq!(a["regions"], Value::Array(Vec::new()), "{a:#}");
    let side = &a["members"][2];
    assert_eq!(
        (side["role"].as_str(), side["type"].as_str()),
        (Some("monitoring_only"), Some("tcp"))
    );
    let votes = &side["regions"][0];
    assert_eq!(votes["region"], "WEU");
    assert_eq!(votes["unhealthy_dcs"], 3, "{votes:#}");
    assert!(
        votes["datacenters"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("refused")),
        "{votes:#}"
    );
    let cli = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["status", "--admin", &admin.to_string()])
        .output()
        .expect("meshlb status");
    let cli = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.lines().any(|l| l.contains("side (monitoring_only)")
            && l.contains("unhealthy")
            && l.contains("WEU -0/3/0")),
        "meshlb status shows each member with its votes:\n{cli}"
    );
    let www = "www.groups.test";
    wait_for("both endpoints in DNS", Duration::from_secs(10), || {
        dig_a(dns, www) == ["127.0.0.1", "127.0.0.2"]
    });
    let text = scrape(admin);
    assert!(
        text.lines().any(|l| l.starts_with("meshlb_member_state{")
            && l.contains("monitor=\"side\"")
            && l.contains("state=\"unhealthy\"")
            && l.ends_with(" 1")),
        "no member gauge in:\n{text}"
    );

    // The deciding TCP member of a fails: one of two deciding members is no majority.
    tcp_a.stop();
    wait_verdicts(
        admin,
        "a",
        ("unhealthy", ["healthy", "unhealthy", "unhealthy"]),
        "tcp down",
    );
    wait_for("a out of DNS", Duration::from_secs(10), || {
        dig_a(dns, www) == ["127.0.0.2"]
    });
    let events = get(admin, "/events?endpoint=a").expect("events");
    let events = events.as_array().cloned().unwrap_or_default();
    let member = events
        .iter()
        .find(|e| e["kind"] == "member" && e["monitor"] == "tcp" && e["to"] == "unhealthy")
        .unwrap_or_else(|| panic!("no member event in {events:#?}"));
    assert_eq!(member["role"], "decides");
    // The event carries the votes at the moment of the change: a majority, 2 or 3 of 3 DCs.
    let at_change = member["regions"][0]["unhealthy_dcs"].as_u64();
    assert!(matches!(at_change, Some(2 | 3)), "{member:#}");
    let down = events
        .iter()
        .find(|e| e["kind"] == "endpoint" && e["to"] == "unhealthy")
        .unwrap_or_else(|| panic!("no endpoint event in {events:#?}"));
    let changed: Vec<&str> = down["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["changed"] == true)
        .filter_map(|m| m["monitor"].as_str())
        .collect();
    assert_eq!(
        changed,
        ["tcp"],
        "the event names the member that moved it: {down:#}"
    );

    // Back; then the must-be-healthy HTTP member fails while TCP passes.
    tcp_a.start();
    wait_verdicts(
        admin,
        "a",
        ("healthy", ["healthy", "healthy", "unhealthy"]),
        "tcp back",
    );
    http_a.stop();
    wait_verdicts(
        admin,
        "a",
        ("unhealthy", ["unhealthy", "healthy", "unhealthy"]),
        "must-be-healthy http down",
    );
    wait_for("a out of DNS again", Duration::from_secs(10), || {
        dig_a(dns, www) == ["127.0.0.2"]
    });
    let (b, _) = verdicts(admin, "b").expect("b");
    assert_eq!(b, "healthy", "b never changed");
}
