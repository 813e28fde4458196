//! Monitor groups end to end: real probers probe an HTTP and a TCP member (and a
//! `monitoring_only` one) of a group on real loopback servers, the aggregator combines them,
//! `/status` shows each member with its votes, events name the member that moved a verdict,
//! and `dig` sees the endpoint leave and come back.
//!
//! One mesh, started once and shared by the named trials (a `libtest-mimic` harness, `main` at
//! the end); a trial that stops a member's origin starts it again and waits for the steady
//! state.

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use test_support::config::{Config, Lb, Monitor, MonitorGroup, Pool};
use test_support::*;

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

/// A mesh (with DNS) over pool `web` of endpoints `a` (127.0.0.1) and `b` (127.0.0.2), judged
/// by monitor group `web-and-port`: `http` (must be healthy), `tcp` (one port on both
/// addresses) and `side` (`monitoring_only`, on a closed port, so always unhealthy).
struct World {
    admin: SocketAddr,
    dns: SocketAddr,
    http_a: Origin,
    tcp_a: Origin,
    /// Whether `tcp_member_fails_and_recovers` ran in this world.
    tcp_outage_done: bool,
    _http_b: Origin,
    _scratch: tempfile::TempDir,
    _procs: Procs,
}

const WWW: &str = "www.groups.test";

fn groups_config(tcp_port: u16, closed: u16, pa: u16, pb: u16) -> String {
    let every_second = |m: Monitor| m.interval(1).timeout(1).retries(0);
    Config::new()
        .monitor(every_second(Monitor::http("http")))
        .monitor(every_second(Monitor::tcp("tcp").port(tcp_port)))
        .monitor(every_second(Monitor::tcp("side").port(closed)))
        .monitor_group(
            MonitorGroup::new("web-and-port")
                .must_be_healthy("http")
                .member("tcp")
                .monitoring_only("side"),
        )
        .pool(
            Pool::new("web")
                .monitor_group("web-and-port")
                .regions(&["WEU"])
                .origin("a", ("127.0.0.1", pa))
                .origin("b", ("127.0.0.2", pb)),
        )
        .load_balancer(Lb::new(WWW).pools(&["web"]).ttl(5))
        .render()
}

fn start_world() -> World {
    let (scratch, key) = scratch_dir_with_key("groups");
    let (http_a, http_b) = (origin_on("127.0.0.1"), origin_on("127.0.0.2"));
    // The TCP member probes one port on both endpoints' addresses.
    let tcp_a = origin_on("127.0.0.1");
    tcp_listener("127.0.0.2", tcp_a.port);
    let closed = free_tcp().port();
    let config = scratch.path().join("meshlb.toml");
    let text = groups_config(tcp_a.port, closed, http_a.port, http_b.port);
    std::fs::write(&config, text).expect("config");
    let (admin, dns) = (free_tcp(), free_tcp_and_udp());
    let procs = start_mesh(&config, &key, admin, &["--dns".into(), dns.to_string()]);
    World {
        admin,
        dns,
        http_a,
        tcp_a,
        tcp_outage_done: false,
        _http_b: http_b,
        _scratch: scratch,
        _procs: procs,
    }
}

static WORLD: Shared<World> = Shared::new(start_world);

impl World {
    /// Waits for the steady state: `a` healthy with `side` unhealthy, voted by all three DCs
    /// (a verdict moves on a majority, so the third vote can come later); `/status` then.
    fn steady(&self) -> Value {
        wait_verdicts(
            self.admin,
            "a",
            ("healthy", ["healthy", "healthy", "unhealthy"]),
            "the steady state",
        );
        let mut status = Value::Null;
        wait_for(
            "all three DCs vote on side",
            Duration::from_secs(10),
            || {
                status = get(self.admin, "/status").unwrap_or(Value::Null);
                endpoint(&status, "a")
                    .is_some_and(|a| a["members"][2]["regions"][0]["unhealthy_dcs"] == 3)
            },
        );
        status
    }

    /// The deciding TCP member of `a` fails, then comes back: checked on the way (one of two
    /// deciding members is no majority: `a` goes, out of DNS).
    fn tcp_member_fails_and_recovers(&mut self) {
        self.steady();
        {
            let _stopped = Stopped::new([&self.tcp_a]);
            let down = ("unhealthy", ["healthy", "unhealthy", "unhealthy"]);
            wait_verdicts(self.admin, "a", down, "tcp down");
            wait_for("a out of DNS", Duration::from_secs(10), || {
                dig_a(self.dns, WWW) == ["127.0.0.2"]
            });
        }
        self.tcp_outage_done = true;
        self.steady();
    }

    /// The events of endpoint `a` since the world started, after a TCP member outage.
    fn events_after_tcp_outage(&mut self) -> Vec<Value> {
        if !self.tcp_outage_done {
            self.tcp_member_fails_and_recovers();
        }
        let events = get(self.admin, "/events?endpoint=a").expect("events");
        events.as_array().cloned().unwrap_or_default()
    }
}

fn a_monitoring_only_member_fails_without_deciding_the_verdict(w: &mut World) {
    let status = w.steady();
    let a = endpoint(&status, "a").expect("a");
    assert_eq!(a["verdict"], "healthy", "{a:#}");
    assert_eq!(a["regions"], Value::Array(Vec::new()), "{a:#}");
    let side = &a["members"][2];
    assert_eq!(
        (side["role"].as_str(), side["type"].as_str()),
        (Some("monitoring_only"), Some("tcp"))
    );
}

fn status_shows_each_members_votes_with_the_reason(w: &mut World) {
    let status = w.steady();
    let votes = &endpoint(&status, "a").expect("a")["members"][2]["regions"][0];
    assert_eq!(votes["region"], "WEU");
    assert_eq!(votes["unhealthy_dcs"], 3, "{votes:#}");
    let reason = votes["datacenters"][0]["reason"].as_str();
    assert!(reason.is_some_and(|r| r.contains("refused")), "{votes:#}");
}

fn meshlb_status_shows_each_member_with_its_votes(w: &mut World) {
    w.steady();
    let cli = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["status", "--admin", &w.admin.to_string()])
        .output()
        .expect("meshlb status");
    let cli = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.lines().any(|l| l.contains("side (monitoring_only)")
            && l.contains("unhealthy")
            && l.contains("WEU -0/3/0")),
        "meshlb status shows each member with its votes:\n{cli}"
    );
}

fn endpoints_whose_group_is_healthy_are_answered_in_dns(w: &mut World) {
    w.steady();
    wait_for("both endpoints in DNS", Duration::from_secs(10), || {
        dig_a(w.dns, WWW) == ["127.0.0.1", "127.0.0.2"]
    });
}

fn each_member_has_a_state_gauge(w: &mut World) {
    w.steady();
    let text = scrape(w.admin);
    assert!(
        text.lines().any(|l| l.starts_with("meshlb_member_state{")
            && l.contains("monitor=\"side\"")
            && l.contains("state=\"unhealthy\"")
            && l.ends_with(" 1")),
        "no member gauge in:\n{text}"
    );
}

fn a_failing_deciding_member_without_a_majority_fails_the_endpoint(w: &mut World) {
    // Checked on the way through the outage.
    w.tcp_member_fails_and_recovers();
}

fn a_member_event_carries_its_role_and_the_votes_at_the_change(w: &mut World) {
    let events = w.events_after_tcp_outage();
    let member = events
        .iter()
        .find(|e| e["kind"] == "member" && e["monitor"] == "tcp" && e["to"] == "unhealthy")
        .unwrap_or_else(|| panic!("no member event in {events:#?}"));
    assert_eq!(member["role"], "decides");
    // A majority, 2 or 3 of 3 DCs.
    let at_change = member["regions"][0]["unhealthy_dcs"].as_u64();
    assert!(matches!(at_change, Some(2 | 3)), "{member:#}");
}

fn an_endpoint_event_names_the_member_that_moved_it(w: &mut World) {
    let events = w.events_after_tcp_outage();
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
}

fn a_failing_must_be_healthy_member_fails_the_endpoint_though_the_others_pass(w: &mut World) {
    w.steady();
    let stopped = Stopped::new([&w.http_a]);
    let down = ("unhealthy", ["unhealthy", "healthy", "unhealthy"]);
    wait_verdicts(w.admin, "a", down, "must-be-healthy http down");
    wait_for("a out of DNS", Duration::from_secs(10), || {
        dig_a(w.dns, WWW) == ["127.0.0.2"]
    });
    drop(stopped);
    w.steady();
}

fn an_endpoint_whose_members_pass_stays_healthy_while_another_fails(w: &mut World) {
    w.steady();
    let stopped = Stopped::new([&w.http_a]);
    let down = ("unhealthy", ["unhealthy", "healthy", "unhealthy"]);
    wait_verdicts(w.admin, "a", down, "must-be-healthy http down");
    let (b, _) = verdicts(w.admin, "b").expect("b");
    assert_eq!(b, "healthy", "b never changed");
    drop(stopped);
    w.steady();
}

fn main() {
    let all = trials![WORLD =>
        a_monitoring_only_member_fails_without_deciding_the_verdict,
        status_shows_each_members_votes_with_the_reason,
        meshlb_status_shows_each_member_with_its_votes,
        endpoints_whose_group_is_healthy_are_answered_in_dns,
        each_member_has_a_state_gauge,
        a_failing_deciding_member_without_a_majority_fails_the_endpoint,
        a_member_event_carries_its_role_and_the_votes_at_the_change,
        an_endpoint_event_names_the_member_that_moved_it,
        a_failing_must_be_healthy_member_fails_the_endpoint_though_the_others_pass,
        an_endpoint_whose_members_pass_stays_healthy_while_another_fails,
    ];
    trials::run(all, Threads::One);
}
