//! `meshlb check`: exit 0 with a summary for a valid file, exit 1 with every error otherwise.

use std::path::PathBuf;
use std::process::Command;

fn meshlb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_meshlb"))
}

/// Writes `text` to a fresh directory (tests run in parallel) as `name`; the directory goes
/// when the guard drops.
fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("meshlb-check-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write config");
    (dir, path)
}

const VALID: &str = r#"
[[pools]]
name = "p"
origins = [{ name = "e", address = "192.0.2.1" }]
[[pools]]
name = "q"
origins = [{ name = "f", address = "192.0.2.2" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
session_affinity = "cookie"
"#;

/// Runs `meshlb check` on `text` with one change; returns (exit code, stderr).
fn check(text: &str) -> (i32, String, String) {
    let (_dir, path) = write("meshlb.toml", text);
    let out = meshlb()
        .arg("check")
        .arg(&path)
        .output()
        .expect("run meshlb");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn valid_config_prints_a_summary() {
    let (code, stdout, _) = check(VALID);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("OK — 0 monitor(s), 2 pool(s) with 2 endpoint(s), 1 load balancer(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("load balancer lb.test (proxied): steering off"),
        "{stdout}"
    );
}

#[test]
fn each_mistake_is_rejected_with_file_field_and_reason() {
    let cases = [
        (VALID.replace("address = \"192.0.2.1\"", "address = \"192.0.2.1\", wieght = 1"), "pools[0].origins[0].wieght: unknown field"),
        (VALID.replace("name = \"p\"\n", "name = \"p\"\ncheck_regions = [\"EU\"]\n"), "pools[0].check_regions[0]: unknown region `EU`"),
        (VALID.replace("default_pools = [\"p\"]", "default_pools = [\"p\", \"nope\"]"), "load_balancers[0].default_pools[1]: no pool is named `nope`"),
        (VALID.replace("address = \"192.0.2.1\"", "address = \"192.0.2.1\", weight = 1.5"), "pools[0].origins[0].weight: must be between 0 and 1 (got 1.5)"),
        (VALID.replace("session_affinity = \"cookie\"", "session_affinity = \"cookie\"\nsession_affinity_ttl = 10"), "load_balancers[0].session_affinity_ttl: must be 1800..=604800 seconds for cookie affinity (got 10)"),
        (VALID.replace("name = \"q\"", "name = \"p\""), "pools[1].name: duplicate pool name `p`"),
        (format!("{VALID}\n[[load_balancers.rules]]\nname = \"r\"\ncondition = 'http.reqest.method == \"GET\"'\n"), "load_balancers[0].rules[0].condition: column 1: unknown field `http.reqest.method`"),
    ];
    for (text, expected) in cases {
        let (code, _, stderr) = check(&text);
        assert_eq!(code, 1, "{expected}\n{stderr}");
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in:\n{stderr}"
        );
        assert!(
            stderr.contains("meshlb.toml: "),
            "errors name the file:\n{stderr}"
        );
    }
}

#[test]
fn all_errors_are_reported_together() {
    let text = VALID
        .replace(
            "address = \"192.0.2.1\"",
            "address = \"192.0.2.1\", weight = 1.5, colour = \"red\"",
        )
        .replace("name = \"q\"", "name = \"p\"");
    let (code, _, stderr) = check(&text);
    assert_eq!(code, 1);
    assert!(stderr.contains("colour: unknown field"), "{stderr}");
    assert!(
        stderr.contains("weight: must be between 0 and 1"),
        "{stderr}"
    );
    assert!(stderr.contains("duplicate pool name"), "{stderr}");
    assert!(stderr.contains("3 errors found"), "{stderr}");
}

#[test]
fn example_configs_are_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/examples");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("deploy/examples") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = meshlb().arg("check").arg(&path).output().expect("run");
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 2);
}

#[test]
fn custom_regions_file_is_validated() {
    let (_dir, path) = write("regions.toml", "[[regions]]\ncode = \"XX\"\nname = \"x\"\nlatitude = 0.0\nlongitude = 0.0\ndatacenters = []\n[countries]\n");
    let out = meshlb()
        .arg("--regions")
        .arg(&path)
        .arg("regions")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("regions.toml: regions[0].code: unknown region `XX`"),
        "{stderr}"
    );
    let out = meshlb().arg("regions").output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("249 countries mapped"), "{stdout}");
    assert_eq!(stdout.lines().count(), 14);
}

#[test]
fn a_monitor_group_is_summarised_with_its_members_and_roles() {
    let (code, stdout, stderr) = check(
        r#"
[[monitors]]
name = "http"
[[monitors]]
name = "tcp"
type = "tcp"
[[monitors]]
name = "deep"
[[monitor_groups]]
name = "g"
members = [{ monitor = "http", must_be_healthy = true }, { monitor = "tcp" }, { monitor = "deep", monitoring_only = true }]
[[pools]]
name = "web"
monitor_group = "g"
origins = [{ name = "a", address = "192.0.2.1" }]
"#,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("monitor group g [http (must_be_healthy), tcp, deep (monitoring_only)]"),
        "{stdout}"
    );
}
