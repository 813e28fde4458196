//! What a connection has in flight: for the HTTP/2 idle timeout (no request in flight for
//! `--proxy-h2-idle-timeout-ms`) and for HTTP/2's send timeout.
//!
//! Over HTTP/1 a client that stops reading stalls the socket's writes, which `TimedWrite`
//! (lb-core/edge/src/timed_write.rs) times out. Over HTTP/2 a client stalls a stream by withholding its
//! WINDOW_UPDATE frames (or by announcing a zero initial window, RFC 9113 section 6.9.2):
//! hyper (1.x) still polls the answer's body for a frame, but then holds that frame until the
//! window opens and polls the body no more: nothing is written, and the stream would hold its
//! origin connection and that origin's outstanding count forever. So each HTTP/2 answer's
//! body is watched: when a frame has been handed over and hyper has not come back for the next
//! one within the send timeout, the cut is counted and then the body (with its origin
//! connection) is dropped, as nginx ends an HTTP/2 stream whose `send_timeout` expires. hyper
//! resets the stream when it next polls the body, once the window opens and the frame it
//! holds is sent; else the stream ends with its connection, which, with nothing else in
//! flight, goes at the idle timeout.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use crate::body::ProxyBody;

/// Requests in flight on a connection, when the last one ended, and (HTTP/2) the answers
/// being streamed.
pub(super) struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    idle_since: Mutex<Option<Instant>>,
    /// HTTP/2 answers still streaming; dead entries are pruned as it grows and at each check.
    streams: Mutex<Streams>,
}

struct Streams {
    watched: Vec<Weak<Stream>>,
    /// Prune dead entries when `watched` reaches this length (amortised: it doubles).
    prune_at: usize,
}

/// The fewest entries before `Streams` prunes.
const PRUNE_FLOOR: usize = 64;

impl Default for Activity {
    fn default() -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(None),
            streams: Mutex::new(Streams {
                watched: Vec::new(),
                prune_at: PRUNE_FLOOR,
            }),
        }
    }
}

impl Activity {
    /// Whether no request has been in flight for `idle`.
    pub(super) fn idle_for(&self, idle: Duration) -> bool {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return false;
        }
        let since = self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(self.started);
        since.elapsed() >= idle
    }

    /// Watches an HTTP/2 answer's body for the send timeout.
    pub(super) fn watch(self: &Arc<Self>, body: ProxyBody, busy: Busy) -> Answer {
        let stream = Arc::new(Stream {
            body: Mutex::new(Some((body, busy))),
            // The head is handed over; hyper polls the body for its first frame next, window
            // or not.
            handed_at: AtomicU64::new(self.now()),
            started: self.started,
        });
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if streams.watched.len() >= streams.prune_at {
            streams.watched.retain(|s| s.strong_count() > 0);
            streams.prune_at = (streams.watched.len() * 2).max(PRUNE_FLOOR);
        }
        streams.watched.push(Arc::downgrade(&stream));
        Answer::Watched(stream)
    }

    /// Drops every watched answer whose client has not taken a handed frame for `timeout`;
    /// returns how many. They are counted in the counter named `counter` before any is
    /// dropped, as every limit counts before it closes: whoever sees the origin's connection
    /// end then finds the cut counted.
    pub(super) fn cut_stalled(&self, timeout: Duration, counter: &'static str) -> usize {
        let cut = self.take_stalled(timeout);
        if !cut.is_empty() {
            metrics::counter!(counter).increment(cut.len() as u64);
        }
        for stream in &cut {
            // Dropped here, outside the list's lock: the origin connection and the request's
            // place in flight go with it.
            let taken = stream
                .body
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            drop(taken);
        }
        cut.len()
    }

    /// Takes off the watch the answers whose client has not taken a handed frame for
    /// `timeout`, and prunes the ended ones.
    fn take_stalled(&self, timeout: Duration) -> Vec<Arc<Stream>> {
        let now = self.now();
        let limit = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let mut cut = Vec::new();
        streams.watched.retain(|weak| {
            let Some(stream) = weak.upgrade() else {
                return false;
            };
            let handed = stream.handed_at.load(Ordering::Relaxed);
            if handed != 0 && now.saturating_sub(handed) >= limit {
                cut.push(stream);
                return false;
            }
            true
        });
        cut
    }

    /// Milliseconds since the connection started, plus one (0 means "not waiting").
    fn now(&self) -> u64 {
        since(self.started)
    }
}

fn since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

/// One request in flight, until its answer's body is dropped.
pub(super) struct Busy(Arc<Activity>);

impl Busy {
    pub(super) fn new(a: &Arc<Activity>) -> Busy {
        a.in_flight.fetch_add(1, Ordering::Relaxed);
        Busy(Arc::clone(a))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self
                .0
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
    }
}

/// An HTTP/2 answer's body, shared with its connection's watch.
pub(super) struct Stream {
    /// `None` once cut for the send timeout.
    body: Mutex<Option<(ProxyBody, Busy)>>,
    /// When a frame (or the head) was last handed to hyper and the next poll has not come, in
    /// `Activity::now` units; 0 while hyper waits on the body (that is, on the origin).
    handed_at: AtomicU64,
    started: Instant,
}

/// An answer's body, holding its request's place in `Activity` until it is done.
pub(super) enum Answer {
    /// HTTP/1: `TimedWrite` bounds a client that does not read.
    Whole { body: ProxyBody, _busy: Busy },
    /// HTTP/2: watched for the send timeout.
    Watched(Arc<Stream>),
}

impl Body for Answer {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        match self.get_mut() {
            Answer::Whole { body, .. } => Pin::new(body).poll_frame(cx),
            Answer::Watched(stream) => {
                let mut slot = stream.body.lock().unwrap_or_else(PoisonError::into_inner);
                let Some((body, _)) = slot.as_mut() else {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client did not take its answer in time",
                    ))));
                };
                let polled = Pin::new(body).poll_frame(cx);
                let handed = match &polled {
                    Poll::Ready(Some(Ok(_))) => since(stream.started),
                    _ => 0,
                };
                stream.handed_at.store(handed, Ordering::Relaxed);
                polled
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Whole { body, .. } => body.is_end_stream(),
            // A cut body is not at its end: hyper polls it and gets the error.
            Answer::Watched(stream) => stream
                .body
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .is_some_and(|(body, _)| body.is_end_stream()),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Whole { body, .. } => body.size_hint(),
            Answer::Watched(stream) => stream
                .body
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|(body, _)| body.size_hint())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter the cuts go to (no recorder is installed here).
    const COUNTER: &str = "meshlb_proxy_send_timeouts_total";

    async fn poll(answer: &mut Answer) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *answer).poll_frame(cx))).await
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_whose_client_takes_nothing_is_cut_at_the_timeout() {
        let activity = Arc::new(Activity::default());
        let mut answer = activity.watch(ProxyBody::bytes("x"), Busy::new(&activity));
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(activity.cut_stalled(Duration::from_millis(500), COUNTER), 0);
        assert!(!activity.idle_for(Duration::ZERO), "still in flight");
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(activity.cut_stalled(Duration::from_millis(500), COUNTER), 1);
        assert!(activity.idle_for(Duration::ZERO), "no longer in flight");
        assert!(
            !answer.is_end_stream(),
            "hyper must poll it to see the error"
        );
        // hyper, polling later, gets an error (and resets the stream).
        assert!(matches!(poll(&mut answer).await, Poll::Ready(Some(Err(_)))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_handed_frame_waits_only_until_the_next_poll() {
        let activity = Arc::new(Activity::default());
        let mut answer = activity.watch(ProxyBody::bytes("x"), Busy::new(&activity));
        assert!(matches!(poll(&mut answer).await, Poll::Ready(Some(Ok(_)))));
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(activity.cut_stalled(Duration::from_millis(500), COUNTER), 0);
        // The client took it: hyper came back (here, for the body's end).
        assert!(matches!(poll(&mut answer).await, Poll::Ready(None)));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(activity.cut_stalled(Duration::from_millis(500), COUNTER), 0);
        assert!(
            !activity.idle_for(Duration::ZERO),
            "in flight until dropped"
        );
        drop(answer);
        assert!(activity.idle_for(Duration::ZERO));
    }

    #[tokio::test]
    async fn finished_answers_are_pruned_from_the_watch() {
        let activity = Arc::new(Activity::default());
        for _ in 0..10_000 {
            drop(activity.watch(ProxyBody::bytes("x"), Busy::new(&activity)));
        }
        let len = activity
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .watched
            .len();
        assert!(len <= 2 * PRUNE_FLOOR, "{len} entries kept");
    }
}
