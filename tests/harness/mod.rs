//! A harness of named trials over expensive worlds (libtest-mimic): a world starts on the
//! first trial that needs it, the trials that use it take it one at a time (each puts it back
//! as it found it, or waits for the state it needs, so they may run in any order), and it is
//! dropped after the last of them, which kills the processes it spawned. A world dropped
//! because of a failed trial is dropped during a panic, so that `Procs` prints the end of each
//! node's log.
#![allow(dead_code)]

/// `trials![world, module::check, ...]`: a trial over `world` (a `Shared`) for each function,
/// named after it.
macro_rules! trials {
    ($world:expr, $($module:ident::$check:ident),+ $(,)?) => {
        vec![$($world.trial(stringify!($check), $module::$check)),+]
    };
}

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use libtest_mimic::{Arguments, Trial};

enum Slot<W> {
    NotStarted,
    Running(W),
    /// The start panicked, with this message: every trial of the world fails with it, rather
    /// than each starting the world again.
    Failed(String),
    Done,
}

/// A world started by the first trial that needs it, shared by the trials of one test binary
/// one at a time, and dropped (its processes killed) after the last of them.
pub struct Shared<W> {
    world: Mutex<Slot<W>>,
    start: fn() -> W,
    /// Trials made with `trial` that have not run yet.
    remaining: AtomicUsize,
}

impl<W: Send + 'static> Shared<W> {
    pub fn new(start: fn() -> W) -> Arc<Self> {
        Arc::new(Shared {
            world: Mutex::new(Slot::NotStarted),
            start,
            remaining: AtomicUsize::new(0),
        })
    }

    /// A trial named `name` running `check` on the world, alone (the world is locked for it).
    /// A trial that failed does not stop the next from taking the world.
    pub fn trial(self: &Arc<Self>, name: &str, check: fn(&mut W)) -> Trial {
        self.remaining.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(self);
        let name = name.to_string();
        Trial::test(name.clone(), move || {
            shared.run(&name, check);
            Ok(())
        })
    }

    fn run(&self, name: &str, check: fn(&mut W)) {
        let mut slot = self.world.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*slot, Slot::NotStarted) {
            let start = std::time::Instant::now();
            *slot = match std::panic::catch_unwind(self.start) {
                Ok(world) => Slot::Running(world),
                Err(panic) => Slot::Failed(panic_message(&*panic)),
            };
            report_time(&format!("the world of {name}"), start);
        }
        let world = match &mut *slot {
            Slot::Running(world) => world,
            Slot::Failed(why) => panic!("the world did not start: {why}"),
            _ => panic!("the world is gone: every trial that needed it ran"),
        };
        let start = std::time::Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check(world)));
        report_time(name, start);
        let last = self.remaining.fetch_sub(1, Ordering::SeqCst) == 1;
        // Taken out after the last trial; dropped at the end of this scope, during the
        // unwinding when the trial failed (`Procs` then prints the nodes' logs).
        let _world = last.then(|| std::mem::replace(&mut *slot, Slot::Done));
        drop(slot);
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A trial that needs no shared world.
pub fn alone(name: &str, check: fn()) -> Trial {
    let name = name.to_string();
    Trial::test(name.clone(), move || {
        let start = std::time::Instant::now();
        check();
        report_time(&name, start);
        Ok(())
    })
}

/// With `MESHLB_TRIAL_TIMES` set, how long each trial took (once it had its world).
fn report_time(name: &str, start: std::time::Instant) {
    if std::env::var_os("MESHLB_TRIAL_TIMES").is_some() {
        eprintln!("{name} took {:.1?}", start.elapsed());
    }
}

/// A shared world as `main` sees it: whether it is still up.
pub trait World: Send + Sync {
    fn is_running(&self) -> bool;
}

impl<W: Send + 'static> World for Shared<W> {
    fn is_running(&self) -> bool {
        matches!(
            *self.world.lock().unwrap_or_else(PoisonError::into_inner),
            Slot::Running(_)
        )
    }
}

/// Runs `trials` as the test binary's harness, drops `worlds` still up (trials filtered out
/// left them), then exits with the trials' outcome.
///
/// With `MESHLB_TRIALS_REVERSED` set, the trials run in the reverse order (they must pass in
/// any order).
pub fn run(mut trials: Vec<Trial>, worlds: Vec<Arc<dyn World>>) -> ! {
    if std::env::var_os("MESHLB_TRIALS_REVERSED").is_some() {
        trials.reverse();
    }
    let mut args = Arguments::from_args();
    // A thread per trial: each world's trials run one after another (each waits for the
    // world, taking no CPU meanwhile), the worlds side by side, and no world waits for a
    // thread that trials of another world hold.
    if args.test_threads.is_none() {
        args.test_threads = Some(trials.len().max(1));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if conclusion.has_failed() && worlds.iter().any(|w| w.is_running()) {
        // Dropped while panicking: `Procs` prints each node's last log lines.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(move || {
            let _worlds = worlds;
            panic!("a trial failed: the logs of the nodes still up follow");
        }));
    } else {
        drop(worlds);
    }
    conclusion.exit()
}

/// Stops origins for the length of a check and starts them again when dropped, even when the
/// check fails, so the next trial finds them serving.
pub struct Stopped<'a>(pub Vec<&'a test_support::Origin>);

impl<'a> Stopped<'a> {
    pub fn new(origins: impl IntoIterator<Item = &'a test_support::Origin>) -> Self {
        let origins: Vec<_> = origins.into_iter().collect();
        for o in &origins {
            o.stop();
        }
        Stopped(origins)
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        for o in &self.0 {
            o.start();
        }
    }
}
