//! Load harness for `bench/probe.sh`: schedules N endpoints (all pointing at one loopback
//! origin) with the real scheduler and monitors, and reports probes per second, CPU time per
//! probe and the heap held per scheduled endpoint as one JSON line.
//!
//! `probe_load --type http|tcp --endpoints N --interval S --duration S --target HOST:PORT`

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prober::{ProbeReport, ResultSink, Scheduler, SchedulerSettings};

/// The allocator of the `meshlb` binary (src/main.rs), so the figures are the shipped ones,
/// counting the bytes held: an allocator keeps freed memory mapped, so RSS before and after
/// scheduling says little about what the endpoints hold.
#[global_allocator]
static ALLOCATOR: Counted = Counted(tikv_jemallocator::Jemalloc);

static HELD: AtomicUsize = AtomicUsize::new(0);

struct Counted(tikv_jemallocator::Jemalloc);

// SAFETY: every call is passed to jemalloc unchanged; only a counter is kept beside it.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { self.0.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(new_size, Ordering::Relaxed);
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Counts reports without keeping them.
#[derive(Default)]
struct Counting {
    done: AtomicU64,
    failed: AtomicU64,
}

struct Sink(Arc<Counting>);

impl ResultSink for Sink {
    fn publish(&self, r: ProbeReport) {
        self.0.done.fetch_add(1, Ordering::Relaxed);
        if !r.probe.result.attempt.passed {
            self.0.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

/// (user + system) CPU seconds of this process, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields after the command: state is 0, utime 11, stime 12; 100 ticks per second.
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_kib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    let kind = arg("--type", "http");
    let endpoints: usize = arg("--endpoints", "10000").parse().unwrap_or(10_000);
    let interval: u64 = arg("--interval", "2").parse().unwrap_or(2);
    let duration: u64 = arg("--duration", "20").parse().unwrap_or(20);
    let target = arg("--target", "127.0.0.1:18080");
    let concurrency: usize = arg("--concurrency", "512").parse().unwrap_or(512);
    let Some((host, port)) = target.rsplit_once(':') else {
        eprintln!("--target must be HOST:PORT");
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // What the endpoints hold: the heap once they are scheduled and probed for an interval,
    // less the heap before their config was even written (the config is gone by then).
    let held_before = HELD.load(Ordering::Relaxed);
    let mut toml = format!(
        "[[monitors]]\nname = \"m\"\ntype = \"{kind}\"\ninterval = {interval}\ntimeout = 1\nretries = 0\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\norigins = [\n"
    );
    for i in 0..endpoints {
        toml.push_str(&format!(
            "{{ name = \"e{i}\", address = \"{host}\", port = {port} }},\n"
        ));
    }
    toml.push_str("]\n");
    let regions = lb_core::RegionsTable::embedded().expect("regions");
    let config =
        lb_core::config::Config::parse("bench.toml", &toml, &regions).expect("bench config");
    drop(toml);
    let counting = Arc::new(Counting::default());
    runtime.block_on(async {
        let targets = prober::targets(&config, None);
        drop(config);
        let settings = SchedulerSettings { concurrency, ..SchedulerSettings::default() };
        let scheduler = Scheduler::start(targets, settings, Arc::new(Sink(Arc::clone(&counting))));
        // Warm up one interval (the start-up round), then measure.
        tokio::time::sleep(Duration::from_secs(interval + 1)).await;
        let rss_after = rss_kib();
        let held_after = HELD.load(Ordering::Relaxed);
        let stats = scheduler.stats();
        let (cpu0, done0, late0, started0) = (
            cpu_seconds(),
            counting.done.load(Ordering::Relaxed),
            stats.lateness_us.load(Ordering::Relaxed),
            stats.probes_started.load(Ordering::Relaxed),
        );
        let failed0 = counting.failed.load(Ordering::Relaxed);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs(duration)).await;
        let secs = t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        let probes = counting.done.load(Ordering::Relaxed) - done0;
        let failed = counting.failed.load(Ordering::Relaxed) - failed0;
        let started = stats.probes_started.load(Ordering::Relaxed) - started0;
        let lateness_ms = (stats.lateness_us.load(Ordering::Relaxed) - late0) as f64 / started.max(1) as f64 / 1000.0;
        let overruns = stats.overruns.load(Ordering::Relaxed);
        println!(
            "{{\"tool\":\"meshlb\",\"type\":\"{kind}\",\"endpoints\":{endpoints},\"interval_s\":{interval},\"scheduled_rate\":{:.0},\"probes\":{probes},\"failed\":{failed},\"probes_per_s\":{:.0},\"cpu_s\":{cpu:.2},\"cpu_us_per_probe\":{:.1},\"probes_per_cpu_s\":{:.0},\"mean_lateness_ms\":{lateness_ms:.2},\"overruns\":{overruns},\"rss_mib\":{:.1},\"heap_bytes_per_endpoint\":{:.0}}}",
            endpoints as f64 / interval as f64,
            probes as f64 / secs,
            cpu * 1e6 / probes.max(1) as f64,
            probes as f64 / cpu.max(1e-9),
            rss_after / 1024.0,
            held_after.saturating_sub(held_before) as f64 / endpoints as f64,
        );
        scheduler.shutdown().await;
    });
}
