//! The frontends' side of a log: sampling, and a bounded queue that never waits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;

use crate::metrics::{Dropped, LogCounters};

/// One record, encoded by the writer thread, off the request's path.
pub trait Record: Send + 'static {
    /// Whether this record tells of a failure (a 5xx, a refused connection, SERVFAIL):
    /// with [`Sampling::errors_always`], kept whatever the sampling.
    fn is_error(&self) -> bool;
    /// Appends the record's bytes (one line without its newline, or one frame's payload).
    fn encode(&self, out: &mut Vec<u8>);
    /// How many lines or frames the record is written as (dnstap: a query and a response).
    fn units(&self) -> usize {
        1
    }
    /// Appends unit `unit` (of `units()`); unit 0 is `encode`'s.
    fn encode_unit(&self, unit: usize, out: &mut Vec<u8>) {
        if unit == 0 {
            self.encode(out);
        }
    }
}

/// A boxed record is a record: a queue of boxes holds 8 bytes per slot, so a queue of tens
/// of thousands stays in cache where one of the records themselves would stream through memory
/// (the proxy's access records are about 400 bytes).
impl<R: Record> Record for Box<R> {
    fn is_error(&self) -> bool {
        (**self).is_error()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        (**self).encode(out);
    }
    fn units(&self) -> usize {
        (**self).units()
    }
    fn encode_unit(&self, unit: usize, out: &mut Vec<u8>) {
        (**self).encode_unit(unit, out);
    }
}

/// Which records a busy node keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// Keep one record in this many (1: every record).
    pub one_in: u64,
    /// Keep every error record whatever `one_in` says.
    pub errors_always: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            one_in: 1,
            errors_always: true,
        }
    }
}

/// A log's bounds and behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkSettings {
    /// Records waiting for the writer; more are dropped and counted.
    pub queue: usize,
    pub sampling: Sampling,
    /// How long the writer lets records gather between writes when busy (nginx's
    /// `access_log ... flush=`): one wake-up and one write per batch instead of per record.
    pub flush_interval: Duration,
    /// The longest a write to a collector's socket may block before the connection is
    /// dropped and retried.
    pub write_timeout: Duration,
}

impl Default for SinkSettings {
    fn default() -> Self {
        SinkSettings {
            queue: 65_536,
            sampling: Sampling::default(),
            flush_interval: Duration::from_millis(20),
            write_timeout: Duration::from_secs(5),
        }
    }
}

/// Where a frontend hands its records.
pub struct Sink<R> {
    pub(crate) tx: SyncSender<R>,
    sampling: Sampling,
    seen: AtomicU64,
    pub(crate) counters: LogCounters,
}

impl<R> std::fmt::Debug for Sink<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("log", &self.counters.log)
            .field("sampling", &self.sampling)
            .finish_non_exhaustive()
    }
}

impl<R: Record> Sink<R> {
    pub(crate) fn new(tx: SyncSender<R>, sampling: Sampling, counters: LogCounters) -> Self {
        Sink {
            tx,
            sampling: Sampling {
                one_in: sampling.one_in.max(1),
                ..sampling
            },
            seen: AtomicU64::new(0),
            counters,
        }
    }

    /// Whether the sampling keeps a record of this kind: ask before building a costly one.
    pub fn keeps(&self, is_error: bool) -> bool {
        if self.sampling.one_in == 1 || (is_error && self.sampling.errors_always) {
            return true;
        }
        self.seen.fetch_add(1, Ordering::Relaxed) % self.sampling.one_in == 0
    }

    /// Queues a record the sampling kept; never waits. A full queue drops it (counted).
    pub fn push(&self, record: R) {
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.counters.dropped(Dropped::QueueFull, 1),
            Err(TrySendError::Disconnected(_)) => self.counters.dropped(Dropped::Stopped, 1),
        }
    }

    /// `keeps` and `push` in one, for a record already built.
    pub fn offer(&self, record: R) {
        if self.keeps(record.is_error()) {
            self.push(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Line(bool);
    impl Record for Line {
        fn is_error(&self) -> bool {
            self.0
        }
        fn encode(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(b"x");
        }
    }

    fn sink(queue: usize, one_in: u64) -> (Sink<Line>, std::sync::mpsc::Receiver<Line>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(queue);
        let sampling = Sampling {
            one_in,
            errors_always: true,
        };
        (Sink::new(tx, sampling, LogCounters::new("test")), rx)
    }

    #[test]
    fn one_in_n_keeps_every_nth_record_and_every_error() {
        let (s, rx) = sink(1000, 10);
        for _ in 0..100 {
            s.offer(Line(false));
        }
        for _ in 0..5 {
            s.offer(Line(true));
        }
        let got: Vec<bool> = rx.try_iter().map(|l| l.0).collect();
        assert_eq!(got.iter().filter(|e| !**e).count(), 10);
        assert_eq!(got.iter().filter(|e| **e).count(), 5);
    }

    #[test]
    fn a_full_queue_drops_without_waiting() {
        let (s, rx) = sink(2, 1);
        for _ in 0..10 {
            s.offer(Line(false));
        }
        assert_eq!(rx.try_iter().count(), 2);
    }
}
