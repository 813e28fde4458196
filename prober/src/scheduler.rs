//! The probe scheduler: every target probed every `interval`, on time, without bursts.
//!
//! - The first probe of every target runs at start (spread over `startup_spread`), then each
//!   target keeps a phase spread evenly over its interval, so 10,000 targets at 60 s make a
//!   steady ~167 probes/s rather than one burst a minute.
//! - Due times are computed from a fixed anchor (`anchor + phase + k * interval` plus a small
//!   jitter that does not accumulate), never from when the last probe finished: no drift.
//! - Each probe runs in its own task, behind a global concurrency limit; the dispatcher never
//!   waits for a probe, so a hanging endpoint delays nobody. A target whose previous probe is
//!   still running skips that round (counted as an overrun) rather than piling up.
//! - `replace_targets` applies a config reload: unchanged targets keep their schedule and
//!   debounce state, new ones are scheduled, removed ones stop. A target whose monitor's TLS
//!   files changed bytes counts as new: its check is built again from them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use rand::Rng;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

use lb_core::clock::unix_ms;

use crate::failure::Failure;
use crate::monitors::{check_for, probe, Check, Dialer, IcmpClients};
use crate::outcome::{Attempt, ProbeResult};
use crate::probed::Probed;
use crate::sink::{ProbeReport, ResultSink};
use crate::target::{ProbeTarget, TargetKey};
use crate::threshold::Debouncer;

/// Scheduler knobs.
#[derive(Debug, Clone)]
pub struct SchedulerSettings {
    /// Probes in flight at once, over all targets.
    pub concurrency: usize,
    /// First probes are spread over this long (bounded by each target's interval).
    pub startup_spread: Duration,
    /// Per-round jitter, as a fraction of the interval (capped at 250 ms).
    pub jitter: f64,
    /// How monitors reach their targets (private endpoints through tunnels).
    pub dialer: Dialer,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            concurrency: 512,
            startup_spread: Duration::from_secs(1),
            jitter: 0.02,
            dialer: Dialer::direct(),
        }
    }
}

/// Counters for benchmarks and metrics.
#[derive(Debug, Default)]
pub struct SchedulerStats {
    pub probes_started: AtomicU64,
    pub probes_done: AtomicU64,
    /// Rounds skipped because the previous probe of the target was still running.
    pub overruns: AtomicU64,
    /// Sum over probes of how late they started after their due time, microseconds.
    pub lateness_us: AtomicU64,
}

enum Command {
    Replace(Vec<ProbeTarget>),
    Shutdown,
}

/// A running scheduler; dropping it stops the probing.
pub struct Scheduler {
    commands: mpsc::UnboundedSender<Command>,
    task: Option<JoinHandle<()>>,
    stats: Arc<SchedulerStats>,
}

impl Scheduler {
    /// Starts probing `targets` at once. Must be called inside a tokio runtime.
    pub fn start(
        targets: Vec<ProbeTarget>,
        settings: SchedulerSettings,
        sink: Arc<dyn ResultSink>,
    ) -> Scheduler {
        // Counters of rare events exist from the start (at 0), so dashboards and alerts see a
        // series rather than nothing.
        metrics::counter!("meshlb_probe_overruns_total").absolute(0);
        let mut kinds: Vec<&'static str> =
            targets.iter().map(|t| t.monitor.kind.type_name()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for kind in kinds {
            metrics::counter!("meshlb_probe_retries_total", "type" => kind).absolute(0);
        }
        let (commands, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(SchedulerStats::default());
        let mut core = Core::new(settings, sink, Arc::clone(&stats));
        core.replace(targets, true);
        let task = tokio::spawn(core.run(rx));
        Scheduler {
            commands,
            task: Some(task),
            stats,
        }
    }

    /// Applies a config reload without restarting.
    pub fn replace_targets(&self, targets: Vec<ProbeTarget>) {
        let _ = self.commands.send(Command::Replace(targets));
    }

    pub fn stats(&self) -> Arc<SchedulerStats> {
        Arc::clone(&self.stats)
    }

    /// Resolves if the dispatcher task ends on its own (it panicked): how it ended. For the
    /// node's supervision; never resolves while it runs.
    pub async fn ended(&mut self) -> String {
        match self.task.as_mut() {
            Some(task) => match task.await {
                Ok(()) => "returned".into(),
                Err(e) if e.is_panic() => "panicked".into(),
                Err(_) => "was cancelled".into(),
            },
            None => std::future::pending().await,
        }
    }

    /// Stops scheduling and waits for the dispatcher to end (probes in flight are dropped).
    pub async fn shutdown(mut self) {
        let _ = self.commands.send(Command::Shutdown);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

struct Entry {
    target: Arc<ProbeTarget>,
    check: Arc<dyn Check>,
    debouncer: Debouncer,
    /// Due time of round 1 minus one interval: round k is due at `anchor + k * interval`.
    anchor: Instant,
    round: u64,
    generation: u64,
    in_flight: bool,
    seq: u64,
}

struct Done {
    key: TargetKey,
    generation: u64,
    result: ProbeResult,
}

struct Core {
    settings: SchedulerSettings,
    sink: Arc<dyn ResultSink>,
    stats: Arc<SchedulerStats>,
    icmp: IcmpClients,
    entries: HashMap<TargetKey, Entry>,
    heap: BinaryHeap<Reverse<(Instant, u64, TargetKey)>>,
    permits: Arc<Semaphore>,
    next_generation: u64,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: Option<mpsc::UnboundedReceiver<Done>>,
}

impl Core {
    fn new(
        settings: SchedulerSettings,
        sink: Arc<dyn ResultSink>,
        stats: Arc<SchedulerStats>,
    ) -> Core {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Core {
            permits: Arc::new(Semaphore::new(settings.concurrency.max(1))),
            settings,
            sink,
            stats,
            icmp: IcmpClients::new(),
            entries: HashMap::new(),
            heap: BinaryHeap::new(),
            next_generation: 0,
            done_tx,
            done_rx: Some(done_rx),
        }
    }

    fn replace(&mut self, mut targets: Vec<ProbeTarget>, at_start: bool) {
        targets.sort_by(|a, b| a.key.cmp(&b.key));
        let now = Instant::now();
        let n = targets.len().max(1) as f64;
        let mut checks: HashMap<*const lb_core::config::Monitor, Arc<dyn Check>> = HashMap::new();
        let mut keep: HashMap<TargetKey, Entry> = HashMap::new();
        for (i, target) in targets.into_iter().enumerate() {
            if let Some(mut old) = self.entries.remove(&target.key) {
                if *old.target.monitor == *target.monitor
                    && old.target.tls_files == target.tls_files
                    && old.target.address == target.address
                    && old.target.port == target.port
                    && old.target.host == target.host
                {
                    // Unchanged: keep schedule and debounce state.
                    old.target = Arc::new(target);
                    keep.insert(old.target.key.clone(), old);
                    continue;
                }
            }
            let check = checks
                .entry(Arc::as_ptr(&target.monitor))
                .or_insert_with(|| {
                    match check_for(&target.monitor, &self.icmp, &self.settings.dialer) {
                        Ok(c) => c,
                        Err(e) => Arc::new(Broken(Failure::Setup(e.to_string()))),
                    }
                })
                .clone();
            let interval = target.monitor.interval;
            let frac = i as f64 / n;
            // At start: every target now-ish; later additions: a random point of the interval.
            let first = if at_start {
                now + self.settings.startup_spread.min(interval).mul_f64(frac)
            } else {
                now + interval
                    .mul_f64(rand::rng().random::<f64>())
                    .min(self.settings.startup_spread)
            };
            let phase = interval.mul_f64(frac);
            let anchor = if phase > first.saturating_duration_since(now) {
                now + phase
            } else {
                now + phase + interval
            } - interval;
            let generation = self.next_generation;
            self.next_generation += 1;
            let key = target.key.clone();
            self.heap.push(Reverse((first, generation, key.clone())));
            keep.insert(
                key,
                Entry {
                    debouncer: Debouncer::new(target.monitor.threshold),
                    target: Arc::new(target),
                    check,
                    anchor,
                    round: 0,
                    generation,
                    in_flight: false,
                    seq: 0,
                },
            );
        }
        // Whatever is left in `entries` was removed from the config; its heap items are
        // ignored when they come due (generation mismatch).
        self.entries = keep;
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let Some(mut done_rx) = self.done_rx.take() else {
            return;
        };
        loop {
            let next_due = self.heap.peek().map(|Reverse((t, _, _))| *t);
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Replace(targets)) => self.replace(targets, false),
                    Some(Command::Shutdown) | None => return,
                },
                Some(done) = done_rx.recv() => self.finish(done),
                _ = sleep_until(next_due) => self.dispatch_due(),
            }
        }
    }

    fn dispatch_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((due, _, _))) = self.heap.peek() {
            if *due > now {
                break;
            }
            let Some(Reverse((due, generation, key))) = self.heap.pop() else {
                break;
            };
            let Some(entry) = self.entries.get_mut(&key) else {
                continue;
            };
            if entry.generation != generation {
                continue;
            }
            // Schedule the next round from the anchor: no drift.
            entry.round += 1;
            let interval = entry.target.monitor.interval;
            let jitter_cap = interval
                .mul_f64(self.settings.jitter)
                .min(Duration::from_millis(250));
            let jitter = jitter_cap.mul_f64(rand::rng().random::<f64>());
            let mut next =
                entry.anchor + interval * u32::try_from(entry.round).unwrap_or(u32::MAX) + jitter;
            if next <= now {
                // Fell behind (the process was stopped, or the runtime starved): skip ahead
                // to the next future slot instead of firing a backlog.
                let behind = now.saturating_duration_since(entry.anchor);
                let rounds = behind.as_nanos() / interval.as_nanos().max(1) + 1;
                entry.round = u64::try_from(rounds).unwrap_or(u64::MAX);
                next = entry.anchor + interval * u32::try_from(rounds).unwrap_or(u32::MAX) + jitter;
            }
            self.heap.push(Reverse((next, generation, key.clone())));
            if entry.in_flight {
                self.stats.overruns.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("meshlb_probe_overruns_total").increment(1);
                continue;
            }
            entry.in_flight = true;
            self.stats.probes_started.fetch_add(1, Ordering::Relaxed);
            let lateness = now.saturating_duration_since(due).as_micros();
            self.stats.lateness_us.fetch_add(
                u64::try_from(lateness).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            let target = Arc::clone(&entry.target);
            let check = Arc::clone(&entry.check);
            let permits = Arc::clone(&self.permits);
            let done = self.done_tx.clone();
            tokio::spawn(async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                let result = probe(check.as_ref(), &target).await;
                let _ = done.send(Done {
                    key: target.key.clone(),
                    generation,
                    result,
                });
            });
        }
    }

    fn finish(&mut self, done: Done) {
        self.stats.probes_done.fetch_add(1, Ordering::Relaxed);
        let Some(entry) = self.entries.get_mut(&done.key) else {
            return;
        };
        if entry.generation != done.generation {
            return;
        }
        entry.in_flight = false;
        entry.seq += 1;
        let before = entry.debouncer.state();
        let state = entry.debouncer.observe(done.result.attempt.passed);
        let t = &entry.target;
        record_probe(t.monitor.kind.type_name(), &done.result);
        self.sink.publish(ProbeReport {
            probe: Probed::new(t, None, done.result),
            state,
            changed: state != before,
            seq: entry.seq,
            at_ms: unix_ms(),
        });
    }
}

/// Probe metrics. Labels stay bounded: the monitor type, pass/fail, and a reason class rather
/// than the free-text reason. (No recorder installed: these are no-ops.)
fn record_probe(kind: &'static str, result: &ProbeResult) {
    let a = &result.attempt;
    let result_label = if a.passed { "pass" } else { "fail" };
    metrics::counter!("meshlb_probes_total", "type" => kind, "result" => result_label, "reason" => a.reason.as_ref().map_or("none", Failure::class)).increment(1);
    metrics::histogram!("meshlb_probe_duration_seconds", "type" => kind)
        .record(a.rtt.as_secs_f64());
    if result.tries > 1 {
        metrics::counter!("meshlb_probe_retries_total", "type" => kind)
            .increment(u64::from(result.tries - 1));
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

/// A monitor whose check could not be built (say, an unreadable CA file): every probe fails
/// with the reason, so the problem shows in results instead of a silent gap.
struct Broken(Failure);

impl Check for Broken {
    fn attempt<'a>(&'a self, _: &'a ProbeTarget, _: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move { Attempt::fail(Duration::ZERO, None, self.0.clone()) })
    }
}
