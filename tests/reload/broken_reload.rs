//! An aggregator refuses a reload without the token, and a broken file (an unknown field, a
//! reference to no pool) by `POST /-/reload` and by SIGHUP with every error, keeps serving the
//! config it had, and takes the fixed file.

use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::*;

use super::world::{aggregator, aggregator_config};
use crate::{metric, post_reload, TOKEN};

pub fn an_aggregator_refuses_a_broken_reload_and_keeps_serving() {
    let origin = named_origin("127.0.0.1", "a", Duration::ZERO);
    let ports = [origin.port, origin.port, origin.port, origin.port];
    let (dir, key) = scratch_dir_with_key("live-config-broken");
    let agg = dir.path().join("aggregator.toml");
    let good = aggregator_config(false, &ports);
    std::fs::write(&agg, &good).expect("config");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let log = dir.path().join("aggregator.log");
    let child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["aggregator", "--config", agg.to_str().unwrap()])
        .args(["--region", "WEU", "--admin", &admin.to_string()])
        .args(["--admin-token-file", token.to_str().unwrap()])
        .args(["--proxy", &proxy.to_string(), "--proxy-workers", "1"])
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", key.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("aggregator");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let mut procs = Procs(vec![child]);
    wait_for("the admin API", Duration::from_secs(20), || {
        get(admin, "/status").is_some()
    });
    let hash = get(admin, "/status").expect("status")["config_hash"].clone();

    // Without the token, or with none configured, no reload.
    assert_eq!(post_reload(admin, None).0, 401);
    assert_eq!(post_reload(admin, Some("wrong")).0, 401);
    // The same file: nothing to do.
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(
        (status, &answer["unchanged"]),
        (200, &serde_json::json!(true)),
        "{answer}"
    );

    // An unknown field and a pool reference to nothing: both reported, nothing changed.
    let broken = aggregator(false, &ports, true).render();
    std::fs::write(&agg, &broken).expect("broken");
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["reloaded"], false);
    let errors: Vec<String> = answer["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(errors.iter().any(|e| e.contains("surprise")), "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("default_pools") && e.contains("nowhere")),
        "{errors:?}"
    );
    assert!(
        errors.iter().all(|e| e.contains("aggregator.toml")),
        "each names the file: {errors:?}"
    );
    let status = get(admin, "/status").expect("status");
    assert_eq!(status["config_generation"], 1);
    assert_eq!(status["config_hash"], hash);
    let metrics = scrape(admin);
    assert_eq!(
        metric(&metrics, "meshlb_config_last_reload_successful", ""),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "meshlb_config_reloads_total",
            "result=\"failure\""
        ),
        Some(1.0)
    );

    // SIGHUP: refused again, logged; the aggregator lives on and serves the old config.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the SIGHUP refusal", Duration::from_secs(20), || {
        metric(
            &scrape(admin),
            "meshlb_config_reloads_total",
            "result=\"failure\"",
        ) == Some(2.0)
    });
    // The refusal is counted before it is logged.
    let mut text = String::new();
    wait_for("the refusal logged", Duration::from_secs(10), || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("config reload (SIGHUP) refused, keeping generation 1")
    });
    assert!(text.contains("surprise"), "{text}");
    assert!(procs.0[0].try_wait().expect("status").is_none(), "alive");

    // Fixed: taken, by SIGHUP as by the API.
    std::fs::write(&agg, aggregator_config(true, &ports)).expect("fixed");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the fixed file taken", Duration::from_secs(20), || {
        get(admin, "/status").is_some_and(|s| s["config_generation"] == 2)
    });
    // The new generation shows in /status before the frontends are swapped and it is counted.
    wait_for("the reload counted", Duration::from_secs(10), || {
        metric(&scrape(admin), "meshlb_config_last_reload_successful", "") == Some(1.0)
    });
    drop(procs);
}
