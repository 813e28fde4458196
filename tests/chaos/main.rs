//! The chaos suite: a small world in network namespaces (13 regions x 3 probers, origins in
//! three continents with emulated inter-region latency, two aggregators, a client), every
//! process the real `meshlb` binary, and the failures users inflict on their meshes: probers,
//! regions, links, origins, pools and aggregators killed, latency raised, the whole prober
//! fleet restarted, the whole mesh reloaded under load.
//!
//! A harness of named trials over one world (libtest-mimic; `harness = false`): each trial
//! (`scenarios::ALL`) checks one behaviour, asserts and records its figures. The world is built
//! when the first trial to run needs it; the trials run one at a time, in order (reversed with
//! `MESHLB_TRIALS_REVERSED=1`), each from every origin running and every endpoint healthy (the
//! harness starts any a trial left stopped) or a state it sets up itself; a failed
//! trial does not stop the others: the world is put back (origins, links, nodes, latency) and
//! the next trial runs, or, when the world cannot be put back, the rest fail saying why. After
//! the trials the world goes down (every process killed, every namespace deleted) and the run
//! writes `target/chaos/report.json` and `report.md`.
//!
//! Needs root (namespaces), iproute2, dig and curl.

mod build;
mod mesh;
mod origins;
mod report;
mod scenarios;
mod streams;
mod waits;
mod world;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use libtest_mimic::{Arguments, Failed, Trial};

use mesh::Mesh;
use report::Outcome;

const INTERVAL_S: u64 = 1;
const CONSECUTIVE: u32 = 2;
/// The product's promise: a change is seen within interval x consecutive + 1 s.
const BOUND: Duration = Duration::from_secs(INTERVAL_S * CONSECUTIVE as u64 + 1);
/// Allowance for noise and gossip backlog on a shared 2-core machine running 41 meshlb
/// processes: after bursts of changes the mesh has measured up to 7.5 s here. The report
/// gives the exact figure against the bound.
const MARGIN: Duration = Duration::from_secs(7);
/// Gossip interval, as in `meshlb demo`. At 100 ms the 41 meshlb processes of this world kept
/// both cores of a CI machine busy (10 % idle measured; 39 % at 200 ms), and a CPU-starved mesh
/// falls behind: heartbeats arrive late, failure detectors mark live probers dead, and after a
/// restart of the whole fleet an aggregator once counted no votes at all for over 60 s (CI) —
/// at 200 ms the same restart settles in 0.4-1.2 s. Production probers each have a host.
const GOSSIP_MS: u64 = 200;
/// Deadline for the mesh to take a loss into account (votes leave the tally, members die).
const SETTLE: Duration = Duration::from_secs(30);

/// The one world the trials share.
enum State {
    NotBuilt,
    Up(Box<Mesh>),
    /// Why no more trial can run.
    Unusable(String),
}

static STATE: Mutex<State> = Mutex::new(State::NotBuilt);
/// The report's rows, one per trial run.
static OUTCOMES: Mutex<Vec<Outcome>> = Mutex::new(Vec::new());

fn main() {
    let mut args = Arguments::from_args();
    // The trials share one world and change it: one at a time, in order.
    args.test_threads = Some(1);
    let mut trials: Vec<Trial> = scenarios::ALL
        .iter()
        .map(|&(name, run)| Trial::test(name, move || trial(name, run)))
        .collect();
    // Each trial establishes the state it starts from: they pass in any order.
    if std::env::var_os("MESHLB_TRIALS_REVERSED").is_some() {
        trials.reverse();
    }
    let conclusion = libtest_mimic::run(&args, trials);
    // Every process killed and every namespace deleted before the report (and the exit, which
    // runs no destructor).
    *lock(&STATE) = State::NotBuilt;
    let outcomes = lock(&OUTCOMES);
    if !outcomes.is_empty() {
        report::write(&outcomes);
        if conclusion.has_failed() {
            println!("see target/chaos/report.md");
        }
    }
    drop(outcomes);
    conclusion.exit();
}

/// A lock that a panicking trial did not make unusable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs trial `name` on the world (built first if no trial ran before) and records its row.
/// When it fails, the world is put back for the next trial.
fn trial(name: &str, run: fn(&mut Mesh) -> Outcome) -> Result<(), Failed> {
    let mut state = lock(&STATE);
    if matches!(*state, State::NotBuilt) {
        *state = start_world();
    }
    let m = match &mut *state {
        State::Up(m) => m,
        State::Unusable(why) => return Err(format!("not run: {why}").into()),
        State::NotBuilt => unreachable!("the world was just started"),
    };
    if let Err(why) = every_origin_running(m) {
        *state = State::Unusable(format!(
            "the world could not be put back before {name}: {why}"
        ));
        return Err(format!("not run: {why}").into());
    }
    let failure = match catch_unwind(AssertUnwindSafe(|| run(m))) {
        Ok(outcome) => {
            let failure = (!outcome.passed).then(|| {
                format!(
                    "expected: {}\nobserved: {}",
                    outcome.expected, outcome.observed
                )
            });
            lock(&OUTCOMES).push(outcome);
            failure
        }
        Err(panic) => {
            let why = panic_message(&*panic);
            let row = Outcome::new(
                name,
                "the trial runs to its end",
                format!("panicked: {why}"),
                false,
            );
            lock(&OUTCOMES).push(row);
            Some(why)
        }
    };
    let Some(failure) = failure else {
        return Ok(());
    };
    if let Err(why) = restore(m) {
        *state = State::Unusable(format!(
            "the world could not be put back after {name}: {why}"
        ));
    }
    Err(failure.into())
}

/// Builds the world and waits until every prober is live and every endpoint healthy.
fn start_world() -> State {
    let started = catch_unwind(|| {
        let mut m = build::build();
        let up = m.wait_all_live(Duration::from_secs(60));
        let healthy = m.wait_healthy(Duration::from_secs(60));
        println!("world up: 39 probers live in {up:?}, every endpoint healthy {healthy:?} later");
        m
    });
    match started {
        Ok(m) => State::Up(Box::new(m)),
        Err(panic) => State::Unusable(format!(
            "the world did not come up: {}",
            panic_message(&*panic)
        )),
    }
}

/// Before each trial: every origin running and every endpoint healthy on both aggregators, so
/// a trial starts from the same world whichever ran before it (the failover trials leave
/// origins stopped; an origin a trial started again may not be healthy yet).
fn every_origin_running(m: &mut Mesh) -> Result<(), String> {
    for o in m.origins.values().filter(|o| !o.is_running()) {
        o.start();
    }
    catch_unwind(AssertUnwindSafe(|| m.wait_healthy(Duration::from_secs(60))))
        .map(|_| ())
        .map_err(|panic| panic_message(&*panic))
}

/// After a failed trial: no extra latency, every link up, every origin and node running; then
/// waits until every prober is live and every endpoint healthy.
fn restore(m: &mut Mesh) -> Result<(), String> {
    for extra in &m.latency.extra_ms {
        extra.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    let sites: Vec<String> = m.world.sites.keys().cloned().collect();
    for site in &sites {
        m.world.link(site, true);
    }
    for o in m.origins.values() {
        o.start();
    }
    for n in &mut m.world.nodes {
        n.start();
    }
    catch_unwind(AssertUnwindSafe(|| {
        m.wait_all_live(Duration::from_secs(60));
        m.wait_healthy(Duration::from_secs(60));
    }))
    .map_err(|panic| panic_message(&*panic))
}

/// What a panic said.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".to_string())
}
