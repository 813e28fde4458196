//! One expensive world shared by the named trials of a test binary run by `libtest-mimic`
//! (`harness = false`): started by the first trial that needs it, locked by each trial in turn
//! (a trial that changes it puts it back or establishes the state it needs), and dropped by
//! `main` after the trials, which kills the processes it holds.
#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

/// A world of type `W`, started once by `start` on first use.
pub struct Shared<W> {
    slot: Mutex<Option<Result<W, String>>>,
    start: fn() -> W,
}

/// The locked, running world.
pub struct Guard<'a, W>(MutexGuard<'a, Option<Result<W, String>>>);

impl<W> Shared<W> {
    pub const fn new(start: fn() -> W) -> Self {
        Shared {
            slot: Mutex::new(None),
            start,
        }
    }

    /// The world, started now if no trial has started it; a world that failed to start fails
    /// every trial that asks for it with the reason (it is not started again).
    pub fn lock(&self) -> Guard<'_, W> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(self.start));
            *slot = Some(started.map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .unwrap_or_default()
            }));
        }
        if let Some(Err(why)) = slot.as_ref() {
            panic!("the shared world did not start: {why}");
        }
        Guard(slot)
    }

    /// Starts the world again at the next `lock` (after a trial that had to end it).
    pub fn restart_next(guard: Guard<'_, W>) {
        let mut slot = guard.0;
        drop(slot.take());
    }

    /// Drops the world, killing its processes. When a trial failed, they are dropped while a
    /// thread panics, so `Procs` prints the end of each node's standard error.
    pub fn shut_down(&self, a_trial_failed: bool) {
        let world = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if a_trial_failed {
            // Said once, without the panic's backtrace.
            let hook = std::panic::take_hook();
            std::panic::set_hook(Box::new(|_| {
                eprintln!("a trial failed: the shared world's nodes said, last:");
            }));
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _world = world;
                panic!("dropping the world while panicking prints its nodes' logs");
            }));
            std::panic::set_hook(hook);
        } else {
            drop(world);
        }
    }
}

impl<W> Deref for Guard<'_, W> {
    type Target = W;
    fn deref(&self) -> &W {
        match self.0.as_ref() {
            Some(Ok(w)) => w,
            _ => unreachable!("a guard holds a running world"),
        }
    }
}

impl<W> DerefMut for Guard<'_, W> {
    fn deref_mut(&mut self) -> &mut W {
        match self.0.as_mut() {
            Some(Ok(w)) => w,
            _ => unreachable!("a guard holds a running world"),
        }
    }
}

/// Trials named after the functions they run: `trials![a_refused_origin_answers_521, ...]`.
#[macro_export]
macro_rules! trials {
    ($($test:ident),* $(,)?) => {
        vec![$($crate::shared_world::trial(stringify!($test), $test)),*]
    };
}

/// A trial named `name` running `test` (a panic fails it).
pub fn trial(name: &str, test: fn()) -> libtest_mimic::Trial {
    libtest_mimic::Trial::test(name, move || {
        test();
        Ok(())
    })
}

/// Runs `trials` with the command line's arguments (one at a time unless `parallel`; most
/// files' trials share one world and would wait for its lock anyway), then shuts down each
/// of `worlds` and exits with the trials' result.
pub fn run(trials: Vec<libtest_mimic::Trial>, parallel: bool, worlds: &[&dyn ShutDown]) -> ! {
    let mut args = libtest_mimic::Arguments::from_args();
    if !parallel {
        args.test_threads = Some(1);
    }
    let conclusion = libtest_mimic::run(&args, trials);
    for w in worlds {
        w.shut_down(conclusion.has_failed());
    }
    conclusion.exit()
}

/// A world `run` shuts down after the trials.
pub trait ShutDown: Sync {
    fn shut_down(&self, a_trial_failed: bool);
}

impl<W: Send> ShutDown for Shared<W> {
    fn shut_down(&self, a_trial_failed: bool) {
        Shared::shut_down(self, a_trial_failed);
    }
}
