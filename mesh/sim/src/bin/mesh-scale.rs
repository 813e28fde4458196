//! `mesh-scale`: a fleet on the simulated network, measured (`bench/mesh_scale.sh` runs it).
//! Settings from the environment: `NODES` (100), `RTT_MS` (every pair; unset: the 13-region
//! matrix), `LOSS` (per IP fragment, 0), `TRIALS` (100), `TRIAL_EVERY_MS` (200: one trial
//! starts this often, overlapping the ones still spreading), `PROBERS` (0: how many nodes
//! advance a `progress` key every second, as probers do), `GOSSIP_MS` (100), `DROP_FRAGMENTS`
//! (1: paths filter IP fragments), `HOURS` (simulated hours watched for false deaths, 0.05),
//! `DEATH` / `ROLLING` (1: also kill a core node / restart every node), `MAX_DATAGRAM` (bounded
//! gossip's largest datagram, 1400; 0: every digest lists every member), `CORE` (NODES: how
//! many nodes are core members, the rest edges, `vendor/chitchat/src/tier.rs`), `SEED`. Progress goes to
//! stderr; the last line of stdout is one JSON object.

use std::time::Duration;

use anyhow::Context;
use mesh_sim::fleet::Fleet;
use mesh_sim::measure::{self, quantile};
use mesh_sim::net::{NetSettings, Rtt, SimNet};
use serde_json::{json, Value};

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

/// The run's settings, from the environment (the module's comment lists them).
struct Settings {
    nodes: usize,
    /// Nodes `0..core` are core members, the rest edges.
    core: usize,
    /// Every pair's RTT; `None`: the 13-region matrix.
    rtt_ms: Option<f64>,
    loss: f64,
    trials: usize,
    gossip_ms: u64,
    trial_every_ms: u64,
    probers: usize,
    hours: f64,
    drop_fragments: bool,
    death: bool,
    rolling: bool,
    seed: u64,
    /// Bounded gossip's largest datagram; `None`: every digest lists every member.
    max_datagram: Option<usize>,
}

impl Settings {
    /// Reads the settings, each with its default; an unparsable one is an error naming it.
    fn from_env() -> anyhow::Result<Settings> {
        let nodes: usize = env("NODES", 100)?;
        let core: usize = env("CORE", nodes)?;
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
        anyhow::ensure!(
            (1..=nodes).contains(&core),
            "CORE must be between 1 and NODES"
        );
        anyhow::ensure!(
            core == nodes || max_datagram.is_some(),
            "edges (CORE < NODES) need bounded gossip (MAX_DATAGRAM above 0)"
        );
        Ok(Settings {
            nodes,
            core,
            rtt_ms,
            loss,
            trials,
            gossip_ms,
            trial_every_ms,
            probers,
            hours,
            drop_fragments,
            death,
            rolling,
            seed,
            max_datagram,
        })
    }

    /// The simulated network these settings describe.
    fn net(&self) -> SimNet {
        SimNet::new(NetSettings {
            rtt: self.rtt_ms.map_or(Rtt::Matrix, |r| {
                Rtt::Uniform(Duration::from_secs_f64(r / 1000.0))
            }),
            loss: self.loss,
            drops_fragments: self.drop_fragments,
            seed: self.seed,
            ..NetSettings::default()
        })
    }
}

/// When the run started, by the three clocks it is measured on.
struct Started {
    simulated: tokio::time::Instant,
    real: std::time::Instant,
    cpu: Duration,
}

/// What the watch (the trials, then the rest of `HOURS` looking for false deaths) measured.
struct Watched {
    /// Each trial's spread to 99 % of the other nodes, and to all of them.
    p99s: Vec<Option<Duration>>,
    alls: Vec<Option<Duration>>,
    false_deaths: u64,
    node_seconds: f64,
    cpu_per_node_s: f64,
    real_factor: f64,
    largest: u64,
    bits: f64,
    /// Per core member: in a tiered fleet, what the core pays for the edges.
    core_bits: f64,
}

/// Everything a run measured, for its report.
struct Measured {
    converged: Option<Duration>,
    watched: Watched,
    death_ms: Value,
    rolling_ms: Value,
    /// The mean number of edges in a node's view once converged.
    mean_view: f64,
    /// Member states held per node once converged.
    held: f64,
}

fn main() -> anyhow::Result<()> {
    let s = Settings::from_env()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    let real = std::time::Instant::now();
    let cpu = measure::cpu_time();
    runtime.block_on(async move {
        let net = s.net();
        let started = Started {
            simulated: tokio::time::Instant::now(),
            real,
            cpu,
        };
        let gossip = Duration::from_millis(s.gossip_ms);
        let mut fleet = Fleet::start_tiered(net, s.nodes, s.core, gossip, s.max_datagram).await?;
        let converged = fleet.wait_converged(Duration::from_secs(600)).await;
        eprintln!(
            "{} nodes ({} core) converged in {converged:?} (simulated)",
            s.nodes, s.core
        );
        let (mean_view, _) = fleet.views().await;
        let held = fleet.held_states().await as f64 / s.nodes as f64;
        let progress = fleet.start_progress(s.probers, Duration::from_secs(1));
        let watched = watch(&fleet, &s).await;
        progress.abort();
        let death_ms = if s.death {
            let t = measure::death(&mut fleet, s.core / 2, Duration::from_secs(120)).await;
            eprintln!("a killed node was dead to every other in {t:?}");
            ms(t)
        } else {
            serde_json::Value::Null
        };
        let rolling_ms = if s.rolling {
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
        let measured = Measured {
            converged,
            watched,
            death_ms,
            rolling_ms,
            mean_view,
            held,
        };
        println!("{}", report(&s, &measured, &fleet, &started));
        anyhow::Ok(())
    })
}

/// Runs the trials, then watches for false deaths until `HOURS` of simulated time have
/// passed since the trials began; measures the spreads, the cost per node and the traffic.
async fn watch(fleet: &Fleet, s: &Settings) -> Watched {
    let (bytes0, _, _) = fleet.sent();
    let (core0, _, _) = fleet.sent_by(0..s.core);
    let watch_start = tokio::time::Instant::now();
    let cpu_watch = measure::cpu_time();
    let real_watch = std::time::Instant::now();
    let every = Duration::from_millis(s.trial_every_ms);
    let spreads = measure::propagation(fleet, s.trials, every, s.seed).await;
    let watched = Duration::from_secs_f64(s.hours * 3600.0).saturating_sub(watch_start.elapsed());
    let false_deaths = measure::false_deaths(fleet, watched).await;
    let window = watch_start.elapsed();
    let node_seconds = window.as_secs_f64() * s.nodes as f64;
    let cpu_per_node_s = (measure::cpu_time() - cpu_watch).as_secs_f64() * 1000.0 / node_seconds;
    let real_factor = real_watch.elapsed().as_secs_f64() / window.as_secs_f64();
    let (bytes1, _, largest) = fleet.sent();
    let bits = (bytes1 - bytes0) as f64 * 8.0 / window.as_secs_f64() / s.nodes as f64;
    let (core1, _, _) = fleet.sent_by(0..s.core);
    let core_bits = (core1 - core0) as f64 * 8.0 / window.as_secs_f64() / s.core as f64;
    eprintln!(
        "{} trials and {:.0} s watched (simulated)",
        s.trials,
        window.as_secs_f64()
    );
    Watched {
        p99s: spreads.iter().map(|t| t.p99).collect(),
        alls: spreads.iter().map(|t| t.all).collect(),
        false_deaths,
        node_seconds,
        cpu_per_node_s,
        real_factor,
        largest,
        bits,
        core_bits,
    }
}

/// The run's JSON report: the settings, what was measured (convergence, the watch, a death
/// and a rolling restart when asked for, the states and views held), the clocks, and the
/// network's datagram counters.
fn report(s: &Settings, m: &Measured, fleet: &Fleet, started: &Started) -> Value {
    let w = &m.watched;
    let counters = fleet.net.counters();
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    json!({
        "nodes": s.nodes,
        "core": s.core,
        "edges": s.nodes - s.core,
        "rtt_ms": s.rtt_ms.map_or(json!("matrix"), |r| json!(r)),
        "loss": s.loss,
        "drop_fragments": s.drop_fragments,
        "gossip_ms": s.gossip_ms,
        "max_datagram": s.max_datagram,
        "trials": s.trials,
        "trial_every_ms": s.trial_every_ms,
        "probers": s.probers,
        "converged_ms": ms(m.converged),
        "p50_ms": ms(quantile(&w.p99s, 0.5)),
        "p99_ms": ms(quantile(&w.p99s, 0.99)),
        "p100_ms": ms(quantile(&w.alls, 0.99)),
        "incomplete_trials": w.alls.iter().filter(|a| a.is_none()).count(),
        "max_datagram_bytes": w.largest,
        "bits_per_s_per_node": w.bits.round(),
        "bits_per_s_per_core_node": w.core_bits.round(),
        "false_deaths": w.false_deaths,
        "false_deaths_per_node_hour": w.false_deaths as f64 / (w.node_seconds / 3600.0),
        "states_held_per_node": (m.held * 10.0).round() / 10.0,
        "mean_view": (m.mean_view * 10.0).round() / 10.0,
        "death_ms": m.death_ms,
        "rolling_restart_ms": m.rolling_ms,
        "cpu_ms_per_node_second": (w.cpu_per_node_s * 1000.0).round() / 1000.0,
        "real_s_per_simulated_s": (w.real_factor * 100.0).round() / 100.0,
        "simulated_s": started.simulated.elapsed().as_secs_f64().round(),
        "real_s": started.real.elapsed().as_secs_f64().round(),
        "cpu_s": (measure::cpu_time() - started.cpu).as_secs_f64().round(),
        "datagrams": {
            "sent": count(&counters.sent),
            "delivered": count(&counters.delivered),
            "lost": count(&counters.lost),
            "fragments_filtered": count(&counters.fragments_filtered),
            "inbox_dropped": count(&counters.inbox_dropped),
            "unreachable": count(&counters.unreachable),
        },
    })
}
