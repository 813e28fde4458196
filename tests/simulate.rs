//! `meshlb simulate`: the JSON contract on the example configs.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/examples")
        .join(name)
}

fn simulate(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run meshlb");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Writes a health-state file; the directory goes when the guard drops.
fn state(name: &str, json: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("meshlb-sim-")
        .tempdir()
        .expect("dir");
    let p = dir.path().join(name);
    std::fs::write(&p, json).expect("write");
    let path = p.display().to_string();
    (dir, path)
}

#[test]
fn dns_failover_example() {
    let cfg = example("failover.toml");
    let cfg = cfg.to_str().unwrap();
    let v = simulate(&[
        "--config",
        cfg,
        "--lb",
        "www.example.test",
        "--requests",
        "500",
    ]);
    assert_eq!(v["lb"], "www.example.test");
    assert_eq!(v["requests"], 500);
    assert_eq!(v["pools"]["primary"], 500);
    assert_eq!(
        v["answers"]["192.0.2.10,192.0.2.11"], 500,
        "equal weights: both addresses"
    );
    assert_eq!(v["none"], 0);
    // Primary down: the secondary has unequal weights, so one address per answer, 1:2.
    let (_st_dir, st) = state(
        "primary-down.json",
        r#"{"endpoints":{"primary/fra-1":{"healthy":false},"primary/fra-2":{"healthy":false}}}"#,
    );
    let v = simulate(&[
        "--config",
        cfg,
        "--lb",
        "www.example.test",
        "--requests",
        "3000",
        "--state",
        &st,
    ]);
    assert_eq!(v["pools"]["secondary"], 3000);
    let ams1 = v["answers"]["198.51.100.10"].as_u64().unwrap();
    assert!((900..1100).contains(&ams1), "{v}");
    // Everything monitored down: the fallback (unmonitored) answers with a CNAME target.
    let (_st_dir, st) = state(
        "all-down.json",
        r#"{"endpoints":{"primary/fra-1":{"healthy":false},"primary/fra-2":{"healthy":false},"secondary/ams-1":{"healthy":false},"secondary/ams-2":{"healthy":false}}}"#,
    );
    let v = simulate(&[
        "--config",
        cfg,
        "--lb",
        "www.example.test",
        "--requests",
        "10",
        "--state",
        &st,
    ]);
    assert_eq!(v["answers"]["sorry.example.test"], 10);
}

#[test]
fn same_seed_same_output_and_clients_are_sticky() {
    let cfg = example("global.toml");
    let cfg = cfg.to_str().unwrap();
    let args = [
        "--config",
        cfg,
        "--lb",
        "weighted.example.test",
        "--requests",
        "2000",
        "--seed",
        "42",
    ];
    assert_eq!(simulate(&args), simulate(&args));
    // Pool weights 0.4 / 0.6 / 0.5 (default_weight).
    let v = simulate(&args);
    let us = v["pools"]["us-east"].as_u64().unwrap();
    assert!((480..660).contains(&us), "about 26.7 %: {v}");
    // ip_cookie on a DNS-only geo LB: every client keeps one answer. eu-west sheds 10 % of
    // its clients (by hash) to us-east, the next pool of WEU's mapping.
    let v = simulate(&[
        "--config",
        cfg,
        "--lb",
        "www.example.test",
        "--pop",
        "WEU",
        "--clients",
        "20",
        "--requests",
        "1000",
    ]);
    let answers = v["answers"].as_object().unwrap();
    assert!(
        answers.values().all(|n| n.as_u64().unwrap() % 50 == 0),
        "20 clients x 50 queries, each always the same answer: {v}"
    );
    assert!(v["pools"]["eu-west"].as_u64().unwrap() >= 700, "{v}");
}

#[test]
fn geo_by_pop_country_and_ecs() {
    let cfg = example("global.toml");
    let cfg = cfg.to_str().unwrap();
    let lb = [
        "--config",
        cfg,
        "--lb",
        "www.example.test",
        "--requests",
        "50",
    ];
    let by = |extra: &[&str]| {
        let mut a = lb.to_vec();
        a.extend_from_slice(extra);
        simulate(&a)
    };
    // eu-west sheds 10 % of new traffic to the next pool, so check the bulk.
    assert!(by(&["--pop", "lhr"])["pools"]["eu-west"].as_u64().unwrap() >= 40);
    assert_eq!(by(&["--pop", "NEAS"])["pools"]["ap-northeast"], 50);
    // prefer_ecs = always: a Japanese subnet seen in Europe goes to Japan.
    assert_eq!(
        by(&["--pop", "WEU", "--ecs", "203.0.113.0/24", "--country", "JP"])["pools"]
            ["ap-northeast"],
        50
    );
    // No mapping for SSAM, but Brazil is mapped by country (resolver_ip mode).
    assert_eq!(
        by(&[
            "--pop",
            "SSAM",
            "--client",
            "198.51.100.7",
            "--country",
            "BR"
        ])["pools"]["us-east"],
        50
    );
}

#[test]
fn proxy_mode_dynamic_latency_and_rules() {
    let cfg = example("global.toml");
    let cfg = cfg.to_str().unwrap();
    let (_st_dir, st) = state(
        "rtt.json",
        r#"{"pools":{"us-east":{"rtt_ms":{"ENAM":12.0,"WEU":95.0}},"eu-west":{"rtt_ms":{"ENAM":90.0,"WEU":9.5}}}}"#,
    );
    let run = |pop: &str| {
        simulate(&[
            "--config",
            cfg,
            "--lb",
            "api.example.test",
            "--state",
            &st,
            "--pop",
            pop,
            "--clients",
            "30",
            "--requests",
            "300",
        ])
    };
    let v = run("ENAM");
    assert_eq!(v["pools"]["us-east"], 300, "{v}");
    assert!(v.get("answers").is_none(), "proxy mode has no DNS answers");
    // eu-west sheds 10 % of its clients (hash) to the next pool.
    let v = run("WEU");
    assert!(v["pools"]["eu-west"].as_u64().unwrap() >= 240, "{v}");
    // The blocked office gets the rule's fixed response.
    let v = simulate(&[
        "--config",
        cfg,
        "--lb",
        "api.example.test",
        "--client",
        "192.0.2.50",
        "--requests",
        "5",
    ]);
    assert_eq!(v["fixed_responses"], 5);
}

/// Runs `meshlb simulate` expecting it to fail; its standard error.
fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run");
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_inputs_are_clear_errors() {
    let cfg = example("failover.toml");
    let cfg = cfg.to_str().unwrap();
    assert!(refused(&["--config", cfg, "--lb", "nope.test"])
        .contains("no load balancer is named `nope.test`"));
    let with_state = |json: &str| {
        let (_dir, st) = state("state.json", json);
        refused(&["--config", cfg, "--lb", "www.example.test", "--state", &st])
    };
    let err = with_state(r#"{"endpoints":{"primary/ghost":{"healthy":false}}}"#);
    assert!(
        err.contains("pool `primary` has no endpoint `ghost`"),
        "{err}"
    );
    // A state the mesh could never be in: the health of an endpoint no monitor checks.
    let err = with_state(r#"{"endpoints":{"maintenance/sorry":{"healthy":false}}}"#);
    assert!(
        err.contains(
            "endpoints.maintenance/sorry: pool `maintenance` has no monitor: its endpoints are always healthy"
        ),
        "{err}"
    );
}
