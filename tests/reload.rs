//! Reloading a node's configuration: a prober follows its file through a Kubernetes-style
//! ConfigMap update (a new directory, the `..data` symlink swapped) and through SIGHUP, refuses
//! a broken file with its errors and keeps probing with the config it had, and says so in
//! metrics.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::*;

/// The value of an unlabelled-but-for-node-labels metric line `name{...} value`, matching
/// `needle` in its labels.
fn metric(text: &str, name: &str, needle: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(needle))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Publishes `text` as the ConfigMap's next version, the way the kubelet does: a new
/// timestamped directory, then the `..data` symlink replaced in one rename.
fn publish(dir: &Path, version: u32, text: &str) {
    let data = dir.join(format!("..2026_12_01_{version:02}"));
    std::fs::create_dir(&data).expect("version dir");
    std::fs::write(data.join("meshlb.toml"), text).expect("config");
    let tmp = dir.join("..data_tmp");
    symlink(data.file_name().expect("name"), &tmp).expect("symlink");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
}

fn config(endpoints: usize) -> String {
    let origins: Vec<String> = (0..endpoints)
        .map(|i| format!("{{ name = \"e{i}\", address = \"127.0.0.1\", port = 9 }}"))
        .collect();
    format!(
        "[[monitors]]\nname = \"tcp\"\ntype = \"tcp\"\ninterval = 5\ntimeout = 1\n\
         [[pools]]\nname = \"web\"\nmonitor = \"tcp\"\ncheck_regions = [\"WEU\"]\n\
         origins = [{}]\n",
        origins.join(", ")
    )
}

#[test]
fn a_prober_follows_its_config_map_and_refuses_a_broken_file() {
    let (dir, key) = scratch_dir_with_key("reload");
    let map = dir.path();
    publish(map, 1, &config(1));
    symlink("..data/meshlb.toml", map.join("meshlb.toml")).expect("file symlink");
    let log = map.join("prober.log");
    let metrics_addr = free_tcp();
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
}
