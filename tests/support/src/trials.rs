//! The harness of the integration tests that run named trials over expensive worlds
//! (`libtest-mimic`, `harness = false` in the root Cargo.toml): sets of real processes started
//! once per test binary rather than once per test.
//!
//! A world (`Shared`, a `static` of the test file) starts when the first of its trials runs;
//! its trials take it one at a time, locked, each putting back what it changed or waiting for
//! the state it needs; it is dropped (its processes killed) after the last of them, or by `run`
//! after every trial when filtered-out trials left it up. A world whose start failed fails
//! each of its trials with the reason, and is not started again. When a trial over a world
//! failed, the world is dropped as if panicking, so that `Procs` prints each node's last log
//! lines.
//!
//! ```text
//! static WORLD: Shared<World> = Shared::new(World::start);
//!
//! fn a_check(w: &mut World) { ... }
//! fn a_test_of_its_own() { ... }
//!
//! fn main() {
//!     let mut all = trials![WORLD => a_check, module::another_check];
//!     all.extend(trials![a_test_of_its_own]);
//!     trials::run(all, Threads::One);
//! }
//! ```
//!
//! `MESHLB_TRIAL_TIMES=1` prints how long each world took to start and each trial to run;
//! `MESHLB_TRIALS_REVERSED=1` runs the trials in the reverse order (they must pass in any).

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use libtest_mimic::{Arguments, Failed, Trial};

/// Trials named after the functions they run.
///
/// `trials![WORLD => check, module::check, ...]`: each takes `&mut` the world `WORLD` (a
/// `static` `Shared`), locked for it. `trials![test, module::test, ...]`: trials that need no
/// shared world.
#[macro_export]
macro_rules! trials {
    ($world:expr => $($check:path),+ $(,)?) => {
        vec![$($world.trial($crate::trials::name_of(stringify!($check)), $check)),+]
    };
    ($($test:path),+ $(,)?) => {
        vec![$($crate::trials::alone($crate::trials::name_of(stringify!($test)), $test)),+]
    };
}

/// The function's name of a path as `stringify!` writes it (`module :: check` -> `check`).
pub fn name_of(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path).trim()
}

enum Slot<W> {
    NotStarted,
    Running(W),
    /// The start panicked with this message: each trial of the world fails with it.
    Failed(String),
    /// Every trial of the world ran.
    Done,
}

/// A world started by the first trial that needs it, taken by its trials one at a time, and
/// dropped after the last of them.
pub struct Shared<W> {
    slot: Mutex<Slot<W>>,
    start: fn() -> W,
    /// Trials made with `trial` or `ending` that have not run yet.
    remaining: AtomicUsize,
    /// Whether a trial over the world failed (it is then dropped as if panicking).
    failed: AtomicBool,
    /// Whether `run` knows of the world (it drops it after the trials).
    registered: AtomicBool,
}

impl<W: Send + 'static> Shared<W> {
    pub const fn new(start: fn() -> W) -> Self {
        Shared {
            slot: Mutex::new(Slot::NotStarted),
            start,
            remaining: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            registered: AtomicBool::new(false),
        }
    }

    /// A trial named `name` running `check` on the world, locked for it. A trial that failed
    /// does not keep the next from taking the world.
    pub fn trial(&'static self, name: &str, check: fn(&mut W)) -> Trial {
        self.make_trial(name, check, false)
    }

    /// A trial that ends the world (`check` stops it): dropped after it, and started again by
    /// a trial that runs later.
    pub fn ending(&'static self, name: &str, check: fn(&mut W)) -> Trial {
        self.make_trial(name, check, true)
    }

    fn make_trial(&'static self, name: &str, check: fn(&mut W), ends: bool) -> Trial {
        self.remaining.fetch_add(1, Ordering::SeqCst);
        if !self.registered.swap(true, Ordering::SeqCst) {
            registry().push(self);
        }
        let name = name.to_string();
        Trial::test(name.clone(), move || {
            self.run_check(&name, check, ends).map_err(Failed::from)
        })
    }

    /// Runs `check` on the world (started first if no trial has started it), then drops the
    /// world if this was its last trial (or `ends` it): `Err` with the reason if it failed.
    pub fn run_check(&self, name: &str, check: fn(&mut W), ends: bool) -> Result<(), String> {
        let mut slot = self.lock_started(name);
        let outcome = match &mut *slot {
            Slot::Running(world) => {
                let start = Instant::now();
                let outcome = catch_unwind(AssertUnwindSafe(|| check(world)));
                report_time(name, start);
                outcome.map_err(|panic| panic_message(&*panic))
            }
            Slot::Failed(why) => Err(format!("the world did not start: {why}")),
            _ => Err("the world is gone: every trial that needed it ran".to_string()),
        };
        if outcome.is_err() {
            self.failed.store(true, Ordering::SeqCst);
        }
        let last = self.remaining.fetch_sub(1, Ordering::SeqCst) == 1;
        let after = if last {
            Slot::Done
        } else if ends {
            Slot::NotStarted
        } else {
            return outcome;
        };
        let world = std::mem::replace(&mut *slot, after);
        drop(slot);
        self.drop_world(world);
        outcome
    }

    /// The slot, locked, with the world started in it if no trial had started it.
    fn lock_started(&self, name: &str) -> MutexGuard<'_, Slot<W>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Slot::NotStarted) {
            let start = Instant::now();
            *slot = match catch_unwind(self.start) {
                Ok(world) => Slot::Running(world),
                Err(panic) => Slot::Failed(panic_message(&*panic)),
            };
            report_time(&format!("the world of {name}"), start);
        }
        slot
    }

    /// Drops `world` (a running one kills its processes), as if panicking when a trial over
    /// it failed, so that `Procs` prints the end of each node's log.
    fn drop_world(&self, world: Slot<W>) {
        if !matches!(world, Slot::Running(_)) {
            return;
        }
        if !self.failed.load(Ordering::SeqCst) {
            drop(world);
            return;
        }
        eprintln!(
            "a trial over {} failed: its nodes' last log lines follow",
            std::any::type_name::<W>()
        );
        // `resume_unwind` unwinds without calling the panic hook: nothing more is printed.
        let _ = catch_unwind(AssertUnwindSafe(move || {
            let _world = world;
            resume_unwind(Box::new(()));
        }));
    }
}

/// A world as `run` sees it after the trials.
trait Stop: Sync {
    /// Drops the world if it is still up.
    fn stop(&self);
}

impl<W: Send + 'static> Stop for Shared<W> {
    fn stop(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let world = std::mem::replace(&mut *slot, Slot::Done);
        drop(slot);
        self.drop_world(world);
    }
}

/// The worlds that have trials, for `run` to drop after them.
fn registry() -> MutexGuard<'static, Vec<&'static dyn Stop>> {
    static WORLDS: Mutex<Vec<&'static dyn Stop>> = Mutex::new(Vec::new());
    WORLDS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// A trial that needs no shared world.
pub fn alone(name: &str, test: fn()) -> Trial {
    let name = name.to_string();
    Trial::test(name.clone(), move || {
        let start = Instant::now();
        let outcome = catch_unwind(test);
        report_time(&name, start);
        outcome.map_err(|panic| Failed::from(panic_message(&*panic)))
    })
}

/// With `MESHLB_TRIAL_TIMES` set, how long `what` took since `start`.
fn report_time(what: &str, start: Instant) {
    if std::env::var_os("MESHLB_TRIAL_TIMES").is_some() {
        eprintln!("{what} took {:.1?}", start.elapsed());
    }
}

/// How many trials run at once, unless the command line says (`--test-threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// One after another, in the order given.
    One,
    /// As many at once as the machine has cores (libtest's default), in the order given.
    Cores,
    /// A thread per trial: each world's trials still take it one at a time (in any order),
    /// but the worlds and the trials of their own run side by side.
    PerTrial,
}

/// Runs `trials` as the test binary's harness, drops every world still up (trials filtered
/// out, or one that failed, left it), then exits with the trials' outcome.
pub fn run(mut trials: Vec<Trial>, threads: Threads) -> ! {
    if std::env::var_os("MESHLB_TRIALS_REVERSED").is_some() {
        trials.reverse();
    }
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = match threads {
            Threads::One => Some(1),
            Threads::Cores => None,
            Threads::PerTrial => Some(trials.len().max(1)),
        };
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let worlds = std::mem::take(&mut *registry());
    for world in worlds {
        world.stop();
    }
    conclusion.exit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static STARTS: AtomicU32 = AtomicU32::new(0);
    static DROPS: AtomicU32 = AtomicU32::new(0);
    static PANICKING_DROPS: AtomicU32 = AtomicU32::new(0);

    struct Counted(u32);

    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
            if std::thread::panicking() {
                PANICKING_DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn start_counted() -> Counted {
        Counted(STARTS.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn passes(_: &mut Counted) {}

    fn fails(_: &mut Counted) {
        panic!("the check failed");
    }

    fn first_start(w: &mut Counted) {
        assert_eq!(w.0, 1, "the first world");
    }

    /// Worlds are counted together: the checks run one at a time.
    #[test]
    fn a_world_starts_once_drops_after_its_last_trial_and_ending_starts_it_again() {
        static WORLD: Shared<Counted> = Shared::new(start_counted);
        WORLD.remaining.store(4, Ordering::SeqCst);
        assert_eq!(WORLD.run_check("a", first_start, false), Ok(()));
        assert_eq!(WORLD.run_check("b", first_start, false), Ok(()));
        assert_eq!(STARTS.load(Ordering::SeqCst), 1);
        assert_eq!(WORLD.run_check("c", passes, true), Ok(()));
        assert_eq!(DROPS.load(Ordering::SeqCst), 1, "an ending trial drops it");
        assert_eq!(
            WORLD.run_check("d", fails, false),
            Err("the check failed".to_string())
        );
        assert_eq!(STARTS.load(Ordering::SeqCst), 2, "started again after `c`");
        assert_eq!(
            DROPS.load(Ordering::SeqCst),
            2,
            "dropped after the last trial"
        );
        assert_eq!(PANICKING_DROPS.load(Ordering::SeqCst), 1, "as if panicking");
        assert!(matches!(*WORLD.slot.lock().unwrap(), Slot::Done));
    }

    fn no_start() -> u8 {
        panic!("no port");
    }

    #[test]
    fn a_world_that_did_not_start_fails_each_trial_with_the_reason() {
        static BROKEN: Shared<u8> = Shared::new(no_start);
        BROKEN.remaining.store(2, Ordering::SeqCst);
        let outcome = BROKEN.run_check("a", |_| {}, false);
        assert_eq!(outcome, Err("the world did not start: no port".to_string()));
        assert_eq!(BROKEN.run_check("b", |_| {}, false), outcome);
    }

    #[test]
    fn a_trial_is_named_after_its_function() {
        assert_eq!(name_of("module :: a_check"), "a_check");
        assert_eq!(name_of("a_check"), "a_check");
    }
}
