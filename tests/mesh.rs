//! A real mesh on loopback: 39 `meshlb prober` processes (13 regions x 3 datacenters) and one
//! `meshlb aggregator`, sealed gossip, real HTTP origins. Killing a minority of probers in
//! every region changes nothing; stopping an origin marks it unhealthy within
//! interval x consecutive_down + 1 s (asserted with a margin; the exact figure is reported by
//! the propagation benchmark); a node with the wrong key never joins.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod support;
use support::*;

/// Every region x three datacenters = 39 probers, the production shape. (The prober crate is
/// built optimized even in test builds: unoptimized, the AEAD code monomorphized into it made
/// 40 processes saturate two cores.)
const REGIONS: [&str; 13] = [
    "WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS",
];

/// The `i`-th datacenter of `region` in the embedded regions table (`a`, `b`, `c` below):
/// aggregators count votes only from datacenters the table lists.
fn roster_dc(region: &str, letter: &str) -> String {
    let regions = lb_core::regions_table::RegionsTable::embedded().expect("regions");
    let r: lb_core::region::Region = region.parse().expect("region");
    let i = usize::from(letter.as_bytes()[0] - b'a');
    regions.region(r).datacenters[i].code.clone()
}

fn node_id(region: &str, dc: &str) -> String {
    format!("prober-{}-{dc}", region.to_lowercase())
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Kills `victims` and returns the endpoint health changes that follow. A false change could
/// only happen once the aggregator stops counting the victims' votes (dead, or stale), so we
/// wait for exactly that, and for one more tally after it, instead of guessing a duration.
fn kill_and_collect_changes(
    admin: SocketAddr,
    procs: &mut Procs,
    victims: &[(String, usize)],
) -> Vec<Value> {
    let since = now_ms();
    for (_, i) in victims {
        let _ = procs.0[*i].kill();
    }
    let names: Vec<&str> = victims.iter().map(|(n, _)| n.as_str()).collect();
    let excluded = |s: &Value| {
        s["pools"][0]["endpoints"].as_array().is_some_and(|eps| {
            eps.iter().all(|e| {
                e["regions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|r| r["datacenters"].as_array().into_iter().flatten())
                    .all(|d| {
                        !names.contains(&d["node"].as_str().unwrap_or(""))
                            || d["alive"] == false
                            || d["stale"] == true
                    })
            })
        })
    };
    wait_for(
        "the victims' votes no longer counted",
        Duration::from_secs(20),
        || get(admin, "/status").is_some_and(|s| excluded(&s)),
    );
    let version = get(admin, "/status")
        .and_then(|s| s["snapshot_version"].as_u64())
        .unwrap_or(0);
    wait_for("one more tally", Duration::from_secs(5), || {
        get(admin, "/status")
            .and_then(|s| s["snapshot_version"].as_u64())
            .is_some_and(|v| v > version)
    });
    let events = get(admin, &format!("/events?since={since}")).expect("events");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "endpoint")
        .cloned()
        .collect()
}

/// `GET /readyz` (no token): its status code and JSON body.
fn readyz(admin: SocketAddr) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(s, "GET /readyz HTTP/1.0\r\nHost: admin\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let json = serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()?;
    Some((code, json))
}

fn endpoint_verdict(status: &Value, endpoint: &str) -> Option<String> {
    status["pools"][0]["endpoints"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == endpoint)
        .map(|e| e["verdict"].as_str().unwrap_or("").to_string())
}

#[test]
fn mesh_of_real_processes_votes_and_fails_over() {
    let (scratch, key) = scratch_dir_with_key("mesh");
    let dir = scratch.path();
    let bad_key = dir.join("bad-key");
    std::fs::write(&bad_key, "some other cluster entirely, wrong key").expect("key");
    let (one, two) = (origin(), origin());
    let (p1, p2) = (one.port, two.port);
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
path = "/"
interval = 1
timeout = 1
retries = 0
consecutive_down = 2
[[pools]]
name = "web"
monitor = "http"
origins = [
  {{ name = "one", address = "127.0.0.1", port = {p1} }},
  {{ name = "two", address = "127.0.0.1", port = {p2} }},
]
[[load_balancers]]
name = "www.example.test"
default_pools = ["web"]
"#
        ),
    )
    .expect("config");
    let bin = env!("CARGO_BIN_EXE_meshlb");
    let token = dir.join("token");
    std::fs::write(&token, "secret-token").expect("token");
    let agg_gossip = free_udp();
    let admin = free_tcp();
    let mut procs = Procs(Vec::new());
    let mesh_args = |listen: SocketAddr, key: &std::path::Path| -> Vec<String> {
        vec![
            "--listen".into(),
            listen.to_string(),
            "--seed".into(),
            agg_gossip.to_string(),
            "--key-file".into(),
            key.display().to_string(),
            "--gossip-interval-ms".into(),
            "100".into(),
        ]
    };
    procs.0.push(
        Command::new(bin)
            .args([
                "aggregator",
                "--config",
                config.to_str().unwrap(),
                "--region",
                "WEU",
                "--admin",
                &admin.to_string(),
                "--admin-token-file",
                token.to_str().unwrap(),
            ])
            .args(mesh_args(agg_gossip, &key))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("aggregator"),
    );
    let mut probers = Vec::new();
    let prober_metrics = free_tcp();
    for region in REGIONS {
        for dc in ["a", "b", "c"] {
            let metrics_args: Vec<String> = if (region, dc) == ("WEU", "b") {
                vec!["--metrics".into(), prober_metrics.to_string()]
            } else {
                Vec::new()
            };
            let child = Command::new(bin)
                .args([
                    "prober",
                    "--config",
                    config.to_str().unwrap(),
                    "--region",
                    region,
                    "--dc",
                    &roster_dc(region, dc),
                    "--node-id",
                    &node_id(region, dc),
                ])
                .args(metrics_args)
                .args(mesh_args(free_udp(), &key))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("prober");
            probers.push((region, dc, procs.0.len()));
            procs.0.push(child);
        }
    }
    // An intruder with the wrong key.
    procs.0.push(
        Command::new(bin)
            .args([
                "prober",
                "--config",
                config.to_str().unwrap(),
                "--region",
                "SAS",
                "--dc",
                "bom",
                "--node-id",
                "intruder",
            ])
            .args(mesh_args(free_udp(), &bad_key))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("intruder"),
    );

    // 1. Everything healthy, by majority of every region.
    wait_for("both endpoints healthy", Duration::from_secs(30), || {
        get(admin, "/status").is_some_and(|s| {
            endpoint_verdict(&s, "one").as_deref() == Some("healthy")
                && endpoint_verdict(&s, "two").as_deref() == Some("healthy")
        })
    });
    // With a verdict for every endpoint, the aggregator is ready.
    let (code, ready) = readyz(admin).expect("/readyz");
    assert_eq!(code, 200, "{ready}");
    assert_eq!(ready["unknown_endpoints"], 0, "{ready}");
    // Every region has a healthy verdict from its datacenters (bounded wait: 40 processes share
    // two cores, so the last probers may still be joining).
    wait_for(
        "every region votes healthy",
        Duration::from_secs(30),
        || {
            get(admin, "/status").is_some_and(|s| {
                s["pools"][0]["endpoints"][0]["regions"]
                    .as_array()
                    .is_some_and(|r| {
                        r.len() == REGIONS.len() && r.iter().all(|r| r["verdict"] == true)
                    })
            })
        },
    );
    // A region votes with one datacenter's prober: wait for all of them to be members.
    let mut members = Value::Null;
    wait_for("every prober a member", Duration::from_secs(30), || {
        members = get(admin, "/members").unwrap_or(Value::Null);
        members.as_array().is_some_and(|m| {
            m.iter().filter(|m| m["role"] == "prober").count() == REGIONS.len() * 3
        })
    });
    assert!(
        !members
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["node_id"] == "intruder"),
        "the wrong key never joins: {members}"
    );

    // 2. Kill one prober per region: no health change.
    let victims: Vec<(String, usize)> = probers
        .iter()
        .filter(|(_, dc, _)| *dc == "a")
        .map(|(r, dc, i)| (node_id(r, dc), *i))
        .collect();
    let changes = kill_and_collect_changes(admin, &mut procs, &victims);
    assert!(
        changes.is_empty(),
        "a minority of probers in every region changed nothing: {changes:?}"
    );

    // 3. Stop origin one: unhealthy everywhere within interval x consecutive_down + 1 s
    // (2 s + 1 s), asserted with a generous margin for a loaded 2-core machine.
    one.stop();
    let took = wait_for("endpoint one unhealthy", Duration::from_secs(15), || {
        get(admin, "/status")
            .is_some_and(|s| endpoint_verdict(&s, "one").as_deref() == Some("unhealthy"))
    });
    eprintln!("failover detected in {took:?}");
    // 28 processes gossip on two cores here; the chaos suite allows the bound plus 7 s.
    assert!(took < Duration::from_secs(10), "detection took {took:?}");
    let status = get(admin, "/status").expect("status");
    assert_eq!(endpoint_verdict(&status, "two").as_deref(), Some("healthy"));
    let events = get(admin, "/events?pool=web&endpoint=one").expect("events");
    let down = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "unhealthy")
        .expect("an event");
    // The votes behind it: a strict majority of the regions with a verdict says down (at the
    // moment of change some regions may still be split or not have noticed yet).
    let regions = down["regions"].as_array().expect("regions");
    let says = |v: bool| regions.iter().filter(|r| r["verdict"] == v).count();
    assert!(says(false) > says(true), "{down}");
    // 4. Start it again: healthy again.
    one.start();
    wait_for(
        "endpoint one healthy again",
        Duration::from_secs(15),
        || {
            get(admin, "/status")
                .is_some_and(|s| endpoint_verdict(&s, "one").as_deref() == Some("healthy"))
        },
    );
    // `meshlb explain` and `meshlb status` read the admin API.
    let out = Command::new(bin)
        .args([
            "explain",
            "--admin",
            &admin.to_string(),
            "--token-file",
            token.to_str().unwrap(),
            "--lb",
            "www.example.test",
            "--pop",
            "ENAM",
        ])
        .output()
        .expect("explain");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("www.example.test from ENAM (dns): answer web/one, web/two"),
        "{text}"
    );
    let out = Command::new(bin)
        .args([
            "status",
            "--admin",
            &admin.to_string(),
            "--token-file",
            token.to_str().unwrap(),
        ])
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("www.example.test") && text.contains("healthy"),
        "{text}"
    );
    // One config in the whole mesh, run by the aggregator and its live probers, no drift.
    let configs: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("CONFIG"))
        .skip(1)
        .collect();
    assert!(
        configs.len() == 1 && configs[0].contains("(1 aggregator, ") && !text.contains("DRIFT"),
        "{text}"
    );

    // 5. Kill every prober of one region: no health change (the other two regions decide).
    let victims: Vec<(String, usize)> = probers
        .iter()
        .filter(|(r, dc, _)| *r == "NEAS" && *dc != "a")
        .map(|(r, dc, i)| (node_id(r, dc), *i))
        .collect();
    let changes = kill_and_collect_changes(admin, &mut procs, &victims);
    assert!(
        changes.is_empty(),
        "a whole region killed changed nothing: {changes:?}"
    );

    // Prometheus metrics on the admin API (no token), with the states as one-hot gauges. The
    // killed region's probers went stale above; the failure detector calls them dead a little
    // later, after a multiple of their mean heartbeat gap.
    let dead = "role=\"prober\",region=\"NEAS\",state=\"dead\"} 3";
    wait_for("the NEAS probers dead", Duration::from_secs(30), || {
        scrape(admin).contains(dead)
    });
    let metrics = scrape(admin);
    for needle in [
        "meshlb_endpoint_state{node_role=\"aggregator\",node_region=\"WEU\",pool=\"web\",endpoint=\"one\",state=\"healthy\"} 1",
        "load_balancer=\"www.example.test\",state=\"healthy\"} 1",
        "kind=\"endpoint\"",
        "meshlb_gossip_rejected_packets_total",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
    let rejected: f64 = metrics
        .lines()
        .find(|l| l.starts_with("meshlb_gossip_rejected_packets_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(rejected > 0.0, "the intruder's packets were counted");

    // A prober's own /metrics.
    let metrics = scrape(prober_metrics);
    assert!(metrics.contains("meshlb_probes_total{node_role=\"prober\",node_region=\"WEU\",node_dc=\"fra\",type=\"http\",result=\"pass\",reason=\"none\"}"), "{metrics}");
    assert!(
        metrics.contains("reason=\"refused\""),
        "the stopped origin's failures are classed: {metrics}"
    );
    assert!(
        metrics.contains("meshlb_probe_duration_seconds"),
        "{metrics}"
    );

    // The admin API wants its token.
    let mut s = TcpStream::connect(admin).expect("admin");
    write!(s, "GET /status HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(
        body.starts_with("HTTP/1.0 401") || body.starts_with("HTTP/1.1 401"),
        "{body}"
    );
}

/// An aggregator that hears no prober has no verdict for its monitored endpoints: `/readyz`
/// answers 503 (nothing should route clients to it: its pools are Unknown) until the warm-up
/// timeout, then 200 with the reason, and the readiness gauge follows.
#[test]
fn an_aggregator_without_verdicts_is_ready_only_after_its_warm_up_timeout() {
    // Long enough that a first answer within half of it, with the 41-process mesh test of this
    // file starting at the same time, still comes before the warm-up ends.
    const WARMUP_S: u64 = 16;
    let (scratch, key) = scratch_dir_with_key("readyz");
    let dir = scratch.path();
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        r#"
[[monitors]]
name = "http"
[[pools]]
name = "web"
monitor = "http"
origins = [{ name = "a", address = "127.0.0.1", port = 9 }, { name = "b", address = "127.0.0.2", port = 9 }]
[[load_balancers]]
name = "ready.example.test"
default_pools = ["web"]
"#,
    )
    .expect("config");
    let admin = free_tcp();
    let _aggregator = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &["--warmup-timeout".to_string(), WARMUP_S.to_string()],
    )]);
    let mut first = None;
    wait_for("the admin API", Duration::from_secs(WARMUP_S / 2), || {
        first = readyz(admin);
        first.is_some()
    });
    let (code, body) = first.expect("a first /readyz");
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["ready"], false, "{body}");
    assert_eq!(body["unknown_endpoints"], 2, "{body}");
    let mut last = None;
    let took = wait_for(
        "ready after the warm-up timeout",
        Duration::from_secs(WARMUP_S + 10),
        || {
            last = readyz(admin);
            last.as_ref().is_some_and(|(code, _)| *code == 200)
        },
    );
    let (_, body) = last.expect("the last /readyz");
    assert!(
        body["up_for_ms"]
            .as_u64()
            .is_some_and(|ms| ms >= WARMUP_S * 1000),
        "ready before the timeout: {body}"
    );
    assert!(
        body["reason"]
            .as_str()
            .is_some_and(|r| r.contains("warm-up timeout")),
        "{body}"
    );
    assert!(took > Duration::from_secs(1), "ready at once: {body}");
    wait_for("the readiness gauge", Duration::from_secs(5), || {
        scrape(admin)
            .lines()
            .any(|l| l.starts_with("meshlb_aggregator_ready{") && l.ends_with(" 1"))
    });
}

/// `/explain` steers with the regions table the aggregator runs with (`--regions FILE`), not
/// the embedded one: with Eastern North America moved next to Frankfurt, proximity steering
/// from ENAM picks the Frankfurt pool instead of the New York one.
#[test]
fn explain_uses_the_regions_table_of_the_aggregator() {
    let (dir, key) = scratch_dir_with_key("explain-regions");
    let embedded = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
        .expect("regions.toml");
    let moved = embedded.replacen(
        "code = \"ENAM\"\nname = \"Eastern North America\"\nlatitude = 38.5\nlongitude = -81.0",
        "code = \"ENAM\"\nname = \"Eastern North America\"\nlatitude = 50.0\nlongitude = 9.0",
        1,
    );
    assert_ne!(moved, embedded, "the ENAM entry of regions.toml moved");
    let regions = dir.path().join("regions.toml");
    std::fs::write(&regions, moved).expect("regions file");
    let config = dir.path().join("meshlb.toml");
    std::fs::write(
        &config,
        r#"
[[pools]]
name = "fra"
latitude = 50.1
longitude = 8.7
origins = [{ name = "f", address = "192.0.2.1" }]
[[pools]]
name = "nyc"
latitude = 40.7
longitude = -74.0
origins = [{ name = "n", address = "192.0.2.2" }]
[[load_balancers]]
name = "near.example.test"
default_pools = ["nyc", "fra"]
steering_policy = "proximity"
"#,
    )
    .expect("config");
    let admin = free_tcp();
    let _procs = Procs(vec![Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .arg("--regions")
        .arg(&regions)
        .args(["aggregator", "--config", config.to_str().unwrap()])
        .args(["--region", "WEU", "--admin", &admin.to_string()])
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", key.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aggregator")]);
    let explained = |pop: &str| {
        get(admin, &format!("/explain?lb=near.example.test&pop={pop}"))
            .and_then(|v| v["outcome"].as_str().map(str::to_string))
    };
    wait_for("a first tally", Duration::from_secs(20), || {
        explained("ENAM").is_some_and(|o| o.starts_with("answer"))
    });
    assert_eq!(explained("ENAM").as_deref(), Some("answer fra/f"));
    // Western North America is where the embedded table has it: New York is nearer.
    assert_eq!(explained("WNAM").as_deref(), Some("answer nyc/n"));
}
