//! Coarse deadlines for connects, without a timer each. A tokio timer armed earlier than every
//! other timer of the runtime wakes the runtime's driver through its eventfd, one `write`
//! system call per connection for the connect timeout alone (seen with strace in
//! bench/l4.sh's connection row). Instead, each worker thread keeps the connects in progress
//! in a table that one task sweeps every `TICK`: an expired connect is woken and sees its
//! deadline passed. A connect times out within `TICK` after its deadline. Meant for the
//! workers' single-threaded runtimes, where a task never changes threads; an entry carries a
//! token, so a future that did would only leave a stale entry behind, never touch another's.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// How often the table is swept.
pub const TICK: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Table {
    /// Token, deadline and waker of each connect in progress; `None`: a free slot.
    entries: Vec<Option<(u64, Instant, Waker)>>,
    free: Vec<usize>,
    sweeping: bool,
    next_token: u64,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// Wakes the expired entries every `TICK` while the table has any.
async fn sweep() {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        let idle = TABLE.with(|t| {
            let mut t = t.borrow_mut();
            for (_, deadline, waker) in t.entries.iter().flatten() {
                if *deadline <= now {
                    waker.wake_by_ref();
                }
            }
            let idle = t.entries.iter().all(Option::is_none);
            if idle {
                t.sweeping = false;
            }
            idle
        });
        if idle {
            return;
        }
    }
}

/// `work`, or `None` once `deadline` has passed (within `TICK`).
pub struct Within<F> {
    work: Pin<Box<F>>,
    deadline: Instant,
    /// The table slot and token of this future's entry.
    slot: Option<(usize, u64)>,
}

pub fn within<F: Future>(work: F, limit: Duration) -> Within<F> {
    Within {
        work: Box::pin(work),
        deadline: Instant::now() + limit,
        slot: None,
    }
}

impl<F: Future> Future for Within<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let me = self.get_mut();
        if let Poll::Ready(out) = me.work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        if Instant::now() >= me.deadline {
            return Poll::Ready(None);
        }
        let deadline = me.deadline;
        let slot = me.slot;
        let start_sweep = TABLE.with(|t| {
            let mut t = t.borrow_mut();
            let waker = cx.waker().clone();
            let ours = slot.filter(
                |&(i, token)| matches!(t.entries.get(i), Some(Some((tk, _, _))) if *tk == token),
            );
            match ours {
                Some((i, token)) => t.entries[i] = Some((token, deadline, waker)),
                None => {
                    let token = t.next_token;
                    t.next_token += 1;
                    let entry = Some((token, deadline, waker));
                    let i = match t.free.pop() {
                        Some(i) => {
                            t.entries[i] = entry;
                            i
                        }
                        None => {
                            t.entries.push(entry);
                            t.entries.len() - 1
                        }
                    };
                    me.slot = Some((i, token));
                }
            }
            !std::mem::replace(&mut t.sweeping, true)
        });
        if start_sweep {
            tokio::spawn(sweep());
        }
        Poll::Pending
    }
}

impl<F> Drop for Within<F> {
    fn drop(&mut self) {
        if let Some((i, token)) = self.slot {
            // A thread-local being torn down at thread exit is not a table to clean.
            let _ = TABLE.try_with(|t| {
                let mut t = t.borrow_mut();
                if matches!(t.entries.get(i), Some(Some((tk, _, _))) if *tk == token) {
                    t.entries[i] = None;
                    t.free.push(i);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_that_ends_in_time_is_returned_and_late_work_times_out() {
        assert_eq!(within(async { 7 }, Duration::from_secs(1)).await, Some(7));
        let never = within(std::future::pending::<()>(), Duration::from_millis(250));
        let start = Instant::now();
        assert_eq!(never.await, None);
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took <= Duration::from_millis(250) + TICK * 2
        );
        // The table is empty again, and its sweeper stops at its next tick.
        assert!(TABLE.with(|t| t.borrow().entries.iter().all(Option::is_none)));
        let stopped = tokio::time::timeout(TICK * 3, async {
            while TABLE.with(|t| t.borrow().sweeping) {
                tokio::time::sleep(TICK / 10).await;
            }
        })
        .await;
        assert!(
            stopped.is_ok(),
            "the sweeper kept running on an empty table"
        );
    }
}
