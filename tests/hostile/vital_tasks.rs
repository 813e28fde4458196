//! A node whose vital task ends (here a prober's metrics listener, which cannot bind) exits
//! non-zero naming it instead of running on without it.

use std::process::Command;
use std::time::Duration;

use test_support::*;

use super::world::closed_port_config;

pub fn a_node_whose_vital_task_ends_exits_non_zero_naming_it() {
    let (scratch, key) = scratch_dir_with_key("hostile-vital");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    // The prober's metrics listener cannot bind: the node must not run on without it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["prober", "--config", &config.display().to_string()])
        .args([
            "--region",
            "WEU",
            "--dc",
            "ams",
            "--metrics",
            &addr.to_string(),
        ])
        .args(["--listen", &free_udp().to_string(), "--key-file"])
        .arg(&key)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prober");
    let status = wait_until(Duration::from_secs(20), || {
        child.try_wait().ok().flatten().is_some()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        status.is_some(),
        "the prober kept running without its metrics listener"
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the metrics listener failed: cannot listen on"),
        "{stderr}"
    );
    drop(taken);
}
