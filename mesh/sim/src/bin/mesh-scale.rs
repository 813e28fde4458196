//! `mesh-scale`: a fleet on the simulated network, measured (`bench/mesh_scale.sh` runs it).
//! Settings from the environment: `NODES` (100), `RTT_MS` (every pair; unset: the 13-region
//! matrix), `LOSS` (per IP fragment, 0), `TRIALS` (100), `TRIAL_EVERY_MS` (200: one trial
//! starts this often, overlapping the ones still spreading), `PROBERS` (0: how many nodes
//! advance a `progress` key every second, as probers do), `GOSSIP_MS` (100), `DROP_FRAGMENTS`
//! (1: paths filter IP fragments), `HOURS` (simulated hours watched for false deaths, 0.05),
//! `DEATH` / `ROLLING` (1: also kill a node / restart every node), `MAX_DATAGRAM` (bounded
//! gossip's largest datagram, 1400; 0: every digest lists every member), `SEED`. Progress goes to
//! stderr; the last line of stdout is one JSON object.

use std::time::Duration;

use anyhow::Context;
use mesh_sim::fleet::Fleet;
use mesh_sim::measure::{self, quantile};
use mesh_sim::net::{NetSettings, Rtt, SimNet};
use serde_json::json;

fn env<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v}: not a valid value")),
        Err(_) => Ok(default),
    }
}

fn ms(d: Option<Duration>) -> serde_json::Value {
    d.map_or(serde_json::Value::Null, |d| {
        json!((d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0)
    })
}

fn main() -> anyhow::Result<()> {
    let nodes: usize = env("NODES", 100)?;
    let rtt_ms: Option<f64> = std::env::var("RTT_MS")
        .ok()
        .map(|v| v.parse())
        .transpose()
        .context("RTT_MS")?;
    let loss: f64 = env("LOSS", 0.0)?;
    let trials: usize = env("TRIALS", 100)?;
    let gossip_ms: u64 = env("GOSSIP_MS", 100)?;
    let trial_every_ms: u64 = env("TRIAL_EVERY_MS", 200)?;
    let probers: usize = env("PROBERS", 0)?;
    let hours: f64 = env("HOURS", 0.05)?;
    let drop_fragments = env("DROP_FRAGMENTS", 0u8)? == 1;
    let death = env("DEATH", 0u8)? == 1;
    let rolling = env("ROLLING", 0u8)? == 1;
    let seed: u64 = env("SEED", 1)?;
    let max_datagram: usize = env("MAX_DATAGRAM", mesh::DEFAULT_MAX_DATAGRAM)?;
    let max_datagram = (max_datagram > 0).then_some(max_datagram);
    anyhow::ensure!(nodes >= 2, "NODES must be at least 2");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let real = std::time::Instant::now();
    let cpu = measure::cpu_time();
    runtime.block_on(async move {
        let net = SimNet::new(NetSettings {
            rtt: rtt_ms.map_or(Rtt::Matrix, |r| {
                Rtt::Uniform(Duration::from_secs_f64(r / 1000.0))
            }),
            loss,
            drops_fragments: drop_fragments,
            seed,
            ..NetSettings::default()
        });
        let sim_start = tokio::time::Instant::now();
        let mut fleet =
            Fleet::start(net, nodes, Duration::from_millis(gossip_ms), max_datagram).await?;
        let converged = fleet.wait_converged(Duration::from_secs(600)).await;
        eprintln!("{nodes} nodes converged in {converged:?} (simulated)");
        let progress = fleet.start_progress(probers, Duration::from_secs(1));
        let (bytes0, _, _) = fleet.sent();
        let watch_start = tokio::time::Instant::now();
        let cpu_watch = measure::cpu_time();
        let real_watch = std::time::Instant::now();
        let spreads =
            measure::propagation(&fleet, trials, Duration::from_millis(trial_every_ms), seed).await;
        let watched = Duration::from_secs_f64(hours * 3600.0).saturating_sub(watch_start.elapsed());
        let false_deaths = measure::false_deaths(&fleet, watched).await;
        let window = watch_start.elapsed();
        let node_seconds = window.as_secs_f64() * nodes as f64;
        let cpu_per_node_s =
            (measure::cpu_time() - cpu_watch).as_secs_f64() * 1000.0 / node_seconds;
        let real_factor = real_watch.elapsed().as_secs_f64() / window.as_secs_f64();
        let (bytes1, _, largest) = fleet.sent();
        let bits = (bytes1 - bytes0) as f64 * 8.0 / window.as_secs_f64() / nodes as f64;
        eprintln!(
            "{trials} trials and {:.0} s watched (simulated)",
            window.as_secs_f64()
        );
        let p99s: Vec<_> = spreads.iter().map(|s| s.p99).collect();
        let alls: Vec<_> = spreads.iter().map(|s| s.all).collect();
        progress.abort();
        let death_ms = if death {
            let t = measure::death(&mut fleet, nodes / 2, Duration::from_secs(120)).await;
            eprintln!("a killed node was dead to every other in {t:?}");
            ms(t)
        } else {
            serde_json::Value::Null
        };
        let rolling_ms = if rolling {
            let t = measure::rolling_restart(
                &mut fleet,
                Duration::from_millis(100),
                Duration::from_secs(600),
            )
            .await?;
            eprintln!("after restarting every node, converged in {t:?}");
            ms(t)
        } else {
            serde_json::Value::Null
        };
        let counters = fleet.net.counters();
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let report = json!({
            "nodes": nodes,
            "rtt_ms": rtt_ms.map_or(json!("matrix"), |r| json!(r)),
            "loss": loss,
            "drop_fragments": drop_fragments,
            "gossip_ms": gossip_ms,
            "max_datagram": max_datagram,
            "trials": trials,
            "trial_every_ms": trial_every_ms,
            "probers": probers,
            "converged_ms": ms(converged),
            "p50_ms": ms(quantile(&p99s, 0.5)),
            "p99_ms": ms(quantile(&p99s, 0.99)),
            "p100_ms": ms(quantile(&alls, 0.99)),
            "incomplete_trials": alls.iter().filter(|a| a.is_none()).count(),
            "max_datagram_bytes": largest,
            "bits_per_s_per_node": bits.round(),
            "false_deaths": false_deaths,
            "false_deaths_per_node_hour": false_deaths as f64 / (node_seconds / 3600.0),
            "death_ms": death_ms,
            "rolling_restart_ms": rolling_ms,
            "cpu_ms_per_node_second": (cpu_per_node_s * 1000.0).round() / 1000.0,
            "real_s_per_simulated_s": (real_factor * 100.0).round() / 100.0,
            "simulated_s": sim_start.elapsed().as_secs_f64().round(),
            "real_s": real.elapsed().as_secs_f64().round(),
            "cpu_s": (measure::cpu_time() - cpu).as_secs_f64().round(),
            "datagrams": {
                "sent": count(&counters.sent),
                "delivered": count(&counters.delivered),
                "lost": count(&counters.lost),
                "fragments_filtered": count(&counters.fragments_filtered),
                "inbox_dropped": count(&counters.inbox_dropped),
                "unreachable": count(&counters.unreachable),
            },
        });
        println!("{report}");
        anyhow::Ok(())
    })
}
