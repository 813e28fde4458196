//! A prober follows its file through a Kubernetes-style ConfigMap update (a new directory, the
//! `..data` symlink swapped) and through SIGHUP and `POST /-/reload`, refuses a broken file
//! with its errors and keeps probing with the config it had, and says so in metrics.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::config::{Config, Monitor, Pool};
use test_support::*;

use crate::{metric, post_reload, TOKEN};

/// Publishes `text` as the ConfigMap's next version, the way the kubelet does: a new
/// timestamped directory, then the `..data` symlink replaced in one rename.
pub fn publish(dir: &Path, version: u32, text: &str) {
    let data = dir.join(format!("..2026_12_01_{version:02}"));
    std::fs::create_dir(&data).expect("version dir");
    std::fs::write(data.join("meshlb.toml"), text).expect("config");
    let tmp = dir.join("..data_tmp");
    symlink(data.file_name().expect("name"), &tmp).expect("symlink");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
}

pub fn config(endpoints: usize) -> String {
    let pool = (0..endpoints).fold(Pool::new("web").monitor("tcp").regions(&["WEU"]), |p, i| {
        p.origin(&format!("e{i}"), ("127.0.0.1", 9))
    });
    Config::new()
        .monitor(Monitor::tcp("tcp").interval(5).timeout(1))
        .pool(pool)
        .render()
}

pub fn a_prober_follows_its_config_map_and_refuses_a_broken_file() {
    let (dir, key) = scratch_dir_with_key("reload");
    let map = dir.path();
    publish(map, 1, &config(1));
    symlink("..data/meshlb.toml", map.join("meshlb.toml")).expect("file symlink");
    let log = map.join("prober.log");
    let metrics_addr = free_tcp();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args([
            "prober",
            "--config",
            map.join("meshlb.toml").to_str().unwrap(),
        ])
        .args(["--region", "WEU", "--dc", "ams"])
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", key.to_str().unwrap()])
        .args(["--metrics", &metrics_addr.to_string()])
        .args(["--watch-config", "--watch-interval-ms", "100"])
        .args(["--admin-token-file", token.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("prober");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let mut procs = Procs(vec![child]);
    let scrape_metric = |name: &str, needle: &str| metric(&scrape(metrics_addr), name, needle);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // The start counts as a successful load.
    wait_for("the first load reported", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_last_reload_successful", "") == Some(1.0)
    });
    let started_at = scrape_metric("meshlb_config_last_reload_success_timestamp_seconds", "")
        .expect("a load time");
    assert!(started_at > 1.7e9, "{started_at}");

    // A ConfigMap update: a new endpoint, seen through the swapped symlink.
    publish(map, 2, &config(2));
    wait_for("the update applied", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(1.0)
    });
    assert!(
        log_text().contains("config reloaded (the file changed): 2 targets"),
        "{}",
        log_text()
    );

    // A broken update: refused with the file, the field and the reason; the old config stays.
    publish(map, 3, &(config(2) + "surprise = true\n"));
    wait_for("the broken file refused", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"failure\"") == Some(1.0)
    });
    assert_eq!(
        scrape_metric("meshlb_config_last_reload_successful", ""),
        Some(0.0)
    );
    let text = log_text();
    assert!(
        text.contains("refused, keeping the running config") && text.contains("surprise"),
        "{text}"
    );
    assert!(
        procs.0[0].try_wait().expect("status").is_none(),
        "the prober runs on"
    );

    // SIGHUP reloads even when the content is the same; a fixed file is taken again.
    publish(map, 4, &config(3));
    wait_for("the fixed file applied", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(2.0)
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the SIGHUP reload", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(3.0)
    });
    assert!(log_text().contains("config reloaded (SIGHUP): 3 targets"));
    assert_eq!(
        scrape_metric("meshlb_config_last_reload_successful", ""),
        Some(1.0)
    );

    // `POST /-/reload` on the metrics listener, with the token only.
    assert_eq!(post_reload(metrics_addr, None).0, 401);
    let (status, answer) = post_reload(metrics_addr, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["reloaded"], true, "{answer}");
    assert_eq!(
        answer["generation"], 5,
        "the start and four reloads: {answer}"
    );
    publish(map, 5, &(config(3) + "surprise = true\n"));
    let (status, answer) = post_reload(metrics_addr, Some(TOKEN));
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("surprise")),
        "{answer}"
    );
}
