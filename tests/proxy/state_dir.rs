//! A lone aggregator with `--state-dir` keeps its drains across a restart (without it, a
//! restart would send traffic back to an endpoint taken out for maintenance), and refuses to
//! start from a damaged state file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use test_support::config::{Config, Lb, Pool};
use test_support::*;

fn drains_config() -> Config {
    Config::new()
        .pool(
            Pool::new("web")
                .origin("a", ("127.0.0.1", 9))
                .origin("b", ("127.0.0.2", 9)),
        )
        .load_balancer(Lb::new("state.example.test").pools(&["web"]))
}

/// A scratch directory with the config, a key and an admin token: (dir, config, key, the
/// arguments for `--state-dir dir/state` and the token).
fn setup(name: &str) -> (tempfile::TempDir, PathBuf, PathBuf, Vec<String>) {
    let (scratch, key) = scratch_dir_with_key(name);
    let dir = scratch.path();
    let config = dir.join("meshlb.toml");
    drains_config().write(&config);
    let state = dir.join("state");
    let extra = [
        &["--state-dir".to_string(), state.display().to_string()][..],
        &admin_token_args(dir),
    ]
    .concat();
    (scratch, config, key, extra)
}

/// POST or GET /drain for `a`; the drained endpoints' names (`None` while nothing answers).
fn drains(admin: std::net::SocketAddr, method: &str) -> Option<Vec<String>> {
    let out = Command::new("curl")
        .args(["-s", "-X", method])
        .args(["-H", "Authorization: Bearer secret-token"])
        .arg(format!("http://{admin}/drain?pool=web&endpoint=a"))
        .output()
        .ok()?;
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(
        list.as_array()?
            .iter()
            .map(|d| d["endpoint"].as_str().unwrap_or("").to_string())
            .collect(),
    )
}

pub fn drains_survive_a_restart_with_a_state_dir() {
    let (scratch, config, key, extra) = setup("drain-state");
    let admin = free_tcp();
    let start = || {
        Procs(vec![start_aggregator(
            &config,
            &key,
            "WEU",
            admin,
            free_udp(),
            &extra,
        )])
    };
    let mut first = start();
    wait_for("the admin API", Duration::from_secs(20), || {
        drains(admin, "GET").is_some()
    });
    assert_eq!(drains(admin, "POST"), Some(vec!["a".to_string()]));
    let file = scratch.path().join("state/drains.json");
    wait_for("the drain to be saved", Duration::from_secs(10), || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\"a\""))
    });
    for c in &mut first.0 {
        c.kill().expect("kill");
        c.wait().expect("reap");
    }
    let _second = start();
    wait_for(
        "the restarted aggregator to hold the drain",
        Duration::from_secs(20),
        || drains(admin, "GET") == Some(vec!["a".to_string()]),
    );
}

/// A damaged state file stops the start with an error naming it.
pub fn a_damaged_state_file_stops_the_start_naming_it() {
    let (scratch, config, key, extra) = setup("drain-state-damaged");
    let state: &Path = &scratch.path().join("state");
    std::fs::create_dir_all(state).expect("state dir");
    std::fs::write(state.join("drains.json"), "{ not json").expect("damage");
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["aggregator", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--admin", &free_tcp().to_string()])
        .args(&extra)
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", &key.display().to_string()])
        .output()
        .expect("aggregator");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("drains.json") && err.contains("line 1"),
        "{err}"
    );
}
