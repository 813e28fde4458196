//! The scheduler: on time, spread, isolated from slow endpoints, reloadable, debounced.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prober::{
    ChannelSink, DebouncedState, JsonLinesSink, ProbeReport, Scheduler, SchedulerSettings,
};
use tokio::sync::mpsc;

/// `n` TCP pools with one endpoint each on `port`, probed every second.
fn tcp_config(names: &[&str], port: u16, extra: &str) -> String {
    let mut t = format!("[[monitors]]\nname = \"m\"\ntype = \"tcp\"\ninterval = 1\ntimeout = 1\nretries = 0\n{extra}\n");
    for n in names {
        t.push_str(&format!("[[pools]]\nname = \"{n}\"\nmonitor = \"m\"\norigins = [{{ name = \"e\", address = \"127.0.0.1\", port = {port} }}]\n"));
    }
    t
}

/// Collects reports until `done` says so or the deadline passes.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<ProbeReport>,
    within: Duration,
    mut done: impl FnMut(&[(Instant, ProbeReport)]) -> bool,
) -> Vec<(Instant, ProbeReport)> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while !done(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Some(r)) => got.push((Instant::now(), r)),
            _ => break,
        }
    }
    got
}

fn per_pool(got: &[(Instant, ProbeReport)]) -> HashMap<String, Vec<Instant>> {
    let mut m: HashMap<String, Vec<Instant>> = HashMap::new();
    for (t, r) in got {
        m.entry(r.probe.pool.clone()).or_default().push(*t);
    }
    m
}

#[tokio::test]
async fn first_probe_at_start_then_every_interval_without_drift() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let names: Vec<String> = (0..20).map(|i| format!("p{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let s = Scheduler::start(
        support::targets(&tcp_config(&refs, port, "")),
        SchedulerSettings::default(),
        Arc::new(ChannelSink(tx)),
    );
    // Every target: first probe within the 1 s startup spread.
    let got = collect(&mut rx, Duration::from_secs(5), |g| per_pool(g).len() == 20).await;
    assert_eq!(per_pool(&got).len(), 20, "every target probed at start");
    assert!(
        got.iter()
            .all(|(t, _)| t.duration_since(start) < Duration::from_millis(1500)),
        "first probes at start"
    );
    // Then five more rounds each: 20 x 6 reports.
    let mut all = got;
    all.extend(collect(&mut rx, Duration::from_secs(10), |g| g.len() >= 100).await);
    // Timed by each report's own finish time (`at_ms`), not by when this task received it:
    // a loaded machine delays the receiver, not what the scheduler did.
    let mut by: HashMap<String, Vec<u64>> = HashMap::new();
    for (_, r) in &all {
        by.entry(r.probe.pool.clone()).or_default().push(r.at_ms);
    }
    for (pool, times) in &by {
        assert!(times.len() >= 5, "{pool}: {} probes", times.len());
        // Rounds 2.. are one interval apart, give or take jitter and noise (no accumulation).
        let gaps: Vec<f64> = times
            .windows(2)
            .skip(1)
            .map(|w| w[1].saturating_sub(w[0]) as f64 / 1000.0)
            .collect();
        for g in &gaps {
            assert!((0.5..1.5).contains(g), "{pool}: gap {g:.3}s in {gaps:?}");
        }
        let span = times.last().unwrap().saturating_sub(times[1]) as f64 / 1000.0;
        let rounds = (times.len() - 2) as f64;
        assert!(
            (span - rounds).abs() < 0.5,
            "{pool}: {rounds} rounds took {span:.3}s (drift)"
        );
    }
    // Phases spread: the second probes of the 20 targets fall across the interval, not in a
    // burst (no 100 ms slot holds more than 8 of them; a burst puts all 20 in one).
    let seconds: Vec<u64> = by.values().map(|t| t[1]).collect();
    let first = *seconds.iter().min().unwrap();
    let mut slots = [0usize; 12];
    for t in &seconds {
        let slot = ((t - first) / 100) as usize;
        slots[slot.min(11)] += 1;
    }
    assert!(slots.iter().all(|&n| n <= 8), "burst: {slots:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_hanging_endpoint_delays_nobody() {
    let origin = support::origin::spawn(None).await.port();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let mut toml = tcp_config(&["fast1", "fast2", "fast3"], port, "");
    toml.push_str(&format!("[[monitors]]\nname = \"slow\"\npath = \"/slow\"\ninterval = 1\ntimeout = 1\nretries = 2\n[[pools]]\nname = \"hang\"\nmonitor = \"slow\"\norigins = [{{ name = \"e\", address = \"127.0.0.1\", port = {origin} }}]\n"));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let settings = SchedulerSettings {
        concurrency: 2,
        ..SchedulerSettings::default()
    };
    let s = Scheduler::start(support::targets(&toml), settings, Arc::new(ChannelSink(tx)));
    let got = collect(&mut rx, Duration::from_secs(6), |g| {
        g.iter().filter(|(_, r)| r.probe.pool == "fast1").count() >= 4
    })
    .await;
    let by = per_pool(&got);
    for p in ["fast1", "fast2", "fast3"] {
        assert!(
            by.get(p).map_or(0, Vec::len) >= 3,
            "{p} kept its schedule: {:?}",
            by.keys()
        );
    }
    assert!(
        s.stats()
            .overruns
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1,
        "the hanging target skipped rounds"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn reload_adds_and_removes_targets_and_keeps_state() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let s = Scheduler::start(
        support::targets(&tcp_config(&["a", "b"], port, "")),
        SchedulerSettings::default(),
        Arc::new(ChannelSink(tx)),
    );
    collect(&mut rx, Duration::from_secs(5), |g| {
        g.iter().filter(|(_, r)| r.probe.pool == "a").count() >= 2
    })
    .await;
    s.replace_targets(support::targets(&tcp_config(&["a", "c"], port, "")));
    // After the reload: c appears, b stops, a continues its sequence.
    let got = collect(&mut rx, Duration::from_secs(5), |g| {
        g.iter().filter(|(_, r)| r.probe.pool == "a").count() >= 2
            && g.iter().any(|(_, r)| r.probe.pool == "c")
    })
    .await;
    let a_seqs: Vec<u64> = got
        .iter()
        .filter(|(_, r)| r.probe.pool == "a")
        .map(|(_, r)| r.seq)
        .collect();
    assert!(
        a_seqs.iter().all(|&s| s >= 3),
        "a kept its state: {a_seqs:?}"
    );
    assert!(got.iter().any(|(_, r)| r.probe.pool == "c" && r.seq == 1));
    let late_b = got
        .iter()
        .filter(|(t, r)| r.probe.pool == "b" && t.elapsed() < Duration::from_secs(3))
        .count();
    assert_eq!(late_b, 0, "b was removed");
    s.shutdown().await;
}

#[tokio::test]
async fn debounced_state_follows_consecutive_down() {
    // A port nobody listens on: fails every time; consecutive_down = 2 from a healthy start is
    // not reachable, so start on an open port, then close it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let s = Scheduler::start(
        support::targets(&tcp_config(&["a"], port, "consecutive_down = 2")),
        SchedulerSettings::default(),
        Arc::new(ChannelSink(tx)),
    );
    let got = collect(&mut rx, Duration::from_secs(5), |g| !g.is_empty()).await;
    assert_eq!(got[0].1.state, DebouncedState::Healthy);
    drop(listener);
    let got = collect(&mut rx, Duration::from_secs(6), |g| {
        g.iter().any(|(_, r)| r.state == DebouncedState::Unhealthy)
    })
    .await;
    let states: Vec<(bool, DebouncedState, bool)> = got
        .iter()
        .map(|(_, r)| (r.probe.result.attempt.passed, r.state, r.changed))
        .collect();
    let first_fail = states.iter().position(|s| !s.0).expect("a failure");
    assert_eq!(
        states[first_fail].1,
        DebouncedState::Healthy,
        "one failure is not enough: {states:?}"
    );
    assert_eq!(
        states[first_fail + 1],
        (false, DebouncedState::Unhealthy, true),
        "{states:?}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn json_lines_sink_writes_one_object_per_probe() {
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let buf = Shared::default();
    let s = Scheduler::start(
        support::targets(&tcp_config(&["a", "b"], port, "")),
        SchedulerSettings::default(),
        Arc::new(JsonLinesSink(Mutex::new(buf.clone()))),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        if lines.lines().count() >= 4 || Instant::now() > deadline {
            for line in lines.lines() {
                let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
                assert_eq!(v["type"], "tcp");
                assert_eq!(v["passed"], true);
                assert!(
                    v["rtt"].as_f64().is_some() && v["seq"].as_u64().is_some(),
                    "{v}"
                );
            }
            assert!(lines.lines().count() >= 4);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.shutdown().await;
}

#[tokio::test]
async fn a_reload_after_the_ca_file_changed_probes_with_the_new_ca() {
    let ours = support::temp_dir("ca-ours");
    let theirs = support::temp_dir("ca-theirs");
    let (pki, other) = (
        support::pki::Pki::new(ours.path()),
        support::pki::Pki::new(theirs.path()),
    );
    let origin = support::origin::spawn(Some(pki.valid.server_config()))
        .await
        .port();
    // The monitor's CA file starts as another CA's: the origin's certificate does not verify.
    let ca_file = ours.path().join("monitor-ca.pem");
    std::fs::copy(&other.ca_file, &ca_file).expect("copy");
    let config = format!(
        "[[monitors]]\nname = \"m\"\ntype = \"https\"\npath = \"/ok\"\ninterval = 1\ntimeout = 1\nretries = 0\nca_file = \"{}\"\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\norigins = [{{ name = \"e\", address = \"127.0.0.1\", port = {origin} }}]\n",
        ca_file.display()
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let s = Scheduler::start(
        support::targets(&config),
        SchedulerSettings::default(),
        Arc::new(ChannelSink(tx)),
    );
    let got = collect(&mut rx, Duration::from_secs(5), |g| !g.is_empty()).await;
    assert!(
        got.iter().all(|(_, r)| !r.probe.result.attempt.passed),
        "another CA: the probe fails"
    );
    // The CA renewed in place (the same path, the same config text), then a reload.
    std::fs::copy(&pki.ca_file, &ca_file).expect("copy");
    s.replace_targets(support::targets(&config));
    let got = collect(&mut rx, Duration::from_secs(5), |g| {
        g.iter().any(|(_, r)| r.probe.result.attempt.passed)
    })
    .await;
    assert!(
        got.iter().any(|(_, r)| r.probe.result.attempt.passed),
        "the reload built the check from the new CA: {:?}",
        got.last().map(|(_, r)| &r.probe.result.attempt.reason)
    );
    s.shutdown().await;
}
