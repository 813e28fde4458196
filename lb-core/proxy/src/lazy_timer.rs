//! A deadline kept on one tokio timer that is moved only when it fires. Arming a timer for
//! every request (what `tokio::time::timeout` does) costs a timer-wheel insert and removal
//! and a lock each time; a connection's deadlines only move forward, so one timer left at
//! an earlier deadline fires at most once per limit, is then moved to the current deadline,
//! and costs nothing in between.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{Instant, Sleep};

/// Now plus `limit`, or about thirty years from now for a limit too large to add (as
/// `tokio::time::timeout` does) rather than a panic.
pub fn deadline_after(limit: std::time::Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + std::time::Duration::from_secs(86_400 * 365 * 30))
}

#[derive(Default)]
pub struct LazyTimer {
    sleep: Option<Pin<Box<Sleep>>>,
}

impl LazyTimer {
    /// Ready once `deadline` has passed; otherwise the task is woken no later than then.
    pub fn poll_passed(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        // A deadline earlier than the timer's (not the usual case) moves it now.
        if sleep.deadline() > deadline {
            sleep.as_mut().reset(deadline);
        }
        // Bounded: after a reset the deadline is in the future, so the timer is pending.
        for _ in 0..2 {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            sleep.as_mut().reset(deadline);
        }
        Poll::Pending
    }

    /// Polls `work`, bounded by `deadline`: `Some` with its output, `None` when the time
    /// ran out first.
    pub fn poll_within<F: Future>(
        &mut self,
        work: Pin<&mut F>,
        deadline: Instant,
        cx: &mut Context<'_>,
    ) -> Poll<Option<F::Output>> {
        if let Poll::Ready(done) = work.poll(cx) {
            return Poll::Ready(Some(done));
        }
        self.poll_passed(deadline, cx).map(|()| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    impl LazyTimer {
        async fn within<F: Future>(&mut self, deadline: Instant, work: F) -> Option<F::Output> {
            let mut work = std::pin::pin!(work);
            std::future::poll_fn(|cx| self.poll_within(work.as_mut(), deadline, cx)).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_deadline_holds_on_one_timer() {
        let mut timer = LazyTimer::default();
        let start = Instant::now();
        // Done in time.
        let done = timer
            .within(start + Duration::from_secs(10), async { 7 })
            .await;
        assert_eq!(done, Some(7));
        // A later deadline: the timer armed for 10 s fires, moves, and ends this at 20 s.
        let late = timer
            .within(
                start + Duration::from_secs(20),
                std::future::pending::<()>(),
            )
            .await;
        assert_eq!(late, None);
        assert_eq!(Instant::now() - start, Duration::from_secs(20));
        // An earlier deadline than the timer's moves it back.
        let now = Instant::now();
        if let Some(sleep) = timer.sleep.as_mut() {
            sleep.as_mut().reset(now + Duration::from_secs(60));
        }
        let early = timer
            .within(now + Duration::from_secs(5), std::future::pending::<()>())
            .await;
        assert_eq!(early, None);
        assert_eq!(Instant::now() - now, Duration::from_secs(5));
        // An answer that comes before its deadline (2 s into 3) is not cut short.
        let (answer, answered) = tokio::sync::oneshot::channel();
        let waiting = timer.within(Instant::now() + Duration::from_secs(3), answered);
        let (slow, ()) = tokio::join!(waiting, async {
            tokio::time::advance(Duration::from_secs(2)).await;
            let _ = answer.send("answer");
        });
        assert_eq!(slow, Some(Ok("answer")));
    }
}
