//! `meshlb probe`: one round of real probes, printed as a table or JSON lines.

use std::process::Command;

#[test]
fn probe_prints_each_result_and_exits_by_outcome() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let open = listener.local_addr().expect("addr").port();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = tempfile::Builder::new()
        .prefix("meshlb-probe-cli-")
        .tempdir()
        .expect("dir");
    let path = dir.path().join("meshlb.toml");
    std::fs::write(
        &path,
        format!(
            "[[monitors]]\nname = \"tcp\"\ntype = \"tcp\"\ntimeout = 1\nretries = 1\n[[pools]]\nname = \"web\"\nmonitor = \"tcp\"\ncheck_regions = [\"WEU\"]\norigins = [{{ name = \"up\", address = \"127.0.0.1\", port = {open} }}, {{ name = \"down\", address = \"127.0.0.1\", port = {closed} }}]\n"
        ),
    )
    .expect("write");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .arg("probe")
            .arg("--config")
            .arg(&path)
            .args(extra)
            .output()
            .expect("run meshlb")
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(3), "a failed probe exits 3");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.contains("up") && l.contains("pass")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("down") && l.contains("FAIL") && l.contains("connection refused")),
        "{table}"
    );
    let out = run(&["--endpoint", "up", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(
        (
            v["pool"].as_str(),
            v["passed"].as_bool(),
            v["tries"].as_u64()
        ),
        (Some("web"), Some(true), Some(1))
    );
    // A prober in another region has nothing to probe here.
    let out = run(&["--region", "NEAS"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to probe"));
    let down = run(&["--endpoint", "down", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&down.stdout).expect("json");
    assert_eq!(v["tries"], 2, "one retry after the failure");
}

#[test]
fn probe_runs_every_member_of_a_group_and_prints_its_verdict() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let open = listener.local_addr().expect("addr").port();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let dir = tempfile::Builder::new()
        .prefix("meshlb-probe-group-")
        .tempdir()
        .expect("dir");
    let path = dir.path().join("meshlb.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[monitors]]
name = "open"
type = "tcp"
port = {open}
timeout = 1
retries = 0
[[monitors]]
name = "closed"
type = "tcp"
port = {closed}
timeout = 1
retries = 0
[[monitor_groups]]
name = "g"
members = [{{ monitor = "open" }}, {{ monitor = "closed", monitoring_only = true }}]
[[pools]]
name = "web"
monitor_group = "g"
origins = [{{ name = "a", address = "127.0.0.1" }}]
"#
        ),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["probe", "--json", "--config"])
        .arg(&path)
        .output()
        .expect("run meshlb");
    assert_eq!(out.status.code(), Some(3), "a member failed");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let member = |m: &str| {
        lines
            .iter()
            .find(|l| l["monitor"] == m)
            .unwrap_or_else(|| panic!("no {m} row in {lines:#?}"))
    };
    assert_eq!(
        (
            member("open")["passed"].as_bool(),
            member("open")["group"].as_str()
        ),
        (Some(true), Some("g"))
    );
    assert_eq!(
        (
            member("closed")["passed"].as_bool(),
            member("closed")["role"].as_str()
        ),
        (Some(false), Some("monitoring_only"))
    );
    let verdict = lines
        .iter()
        .find(|l| l.get("group_verdict").is_some())
        .expect("a group verdict line");
    assert_eq!(
        (
            verdict["endpoint"].as_str(),
            verdict["group_verdict"].as_str()
        ),
        (Some("a"), Some("healthy")),
        "the monitoring_only failure does not decide"
    );
    let table = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["probe", "--config"])
        .arg(&path)
        .output()
        .expect("run meshlb");
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("closed (monitoring_only)")
            && table.contains("group g on endpoint a of pool web: healthy"),
        "{table}"
    );
    drop(listener);
}
