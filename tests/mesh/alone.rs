//! Aggregators alone, without the mesh world: readiness after the warm-up timeout, and the
//! regions table `/explain` steers with.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::readyz;
use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

/// An aggregator that hears no prober has no verdict for its monitored endpoints: `/readyz`
/// answers 503 (nothing should route clients to it: its pools are Unknown) until the warm-up
/// timeout, then 200 with the reason, and the readiness gauge follows.
pub fn an_aggregator_without_verdicts_is_ready_only_after_its_warm_up_timeout() {
    // Long enough that a first answer within half of it, with the 41-process mesh world of this
    // file starting at the same time, still comes before the warm-up ends.
    const WARMUP_S: u64 = 16;
    let (scratch, key) = scratch_dir_with_key("readyz");
    let dir = scratch.path();
    let config = dir.join("meshlb.toml");
    Config::new()
        .monitor(Monitor::http("http"))
        .pool(
            Pool::new("web")
                .monitor("http")
                .origin("a", ("127.0.0.1", 9))
                .origin("b", ("127.0.0.2", 9)),
        )
        .load_balancer(Lb::new("ready.example.test").pools(&["web"]))
        .write(&config);
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
pub fn explain_uses_the_regions_table_of_the_aggregator() {
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
    Config::new()
        .pool(Pool::new("fra").at(50.1, 8.7).origin("f", "192.0.2.1"))
        .pool(Pool::new("nyc").at(40.7, -74.0).origin("n", "192.0.2.2"))
        .load_balancer(
            Lb::new("near.example.test")
                .pools(&["nyc", "fra"])
                .steering("proximity"),
        )
        .write(&config);
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
