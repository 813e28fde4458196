//! A log's writer: one OS thread that takes records from the sink's queue, encodes and writes
//! them in batches, reopens on request, and restarts its loop after a panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::{Dropped, LogCounters};
use crate::output::{Destination, Framing, Output};
use crate::sink::{Record, Sink, SinkSettings};

/// Bumped by [`reopen_all`]; each writer reopens its file when it sees a new value.
static REOPEN: AtomicU64 = AtomicU64::new(0);

/// Asks every log to reopen its file (the binary calls it on SIGUSR1): after logrotate has
/// renamed the files, the next records go to new ones at the configured paths.
pub fn reopen_all() {
    REOPEN.fetch_add(1, Ordering::Relaxed);
}

/// How long an idle writer waits before looking at its output (reopen, rename, reconnect).
const IDLE_LOOK: Duration = Duration::from_millis(250);

/// Why a log could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{log} log: {error}")]
    Open {
        log: &'static str,
        error: std::io::Error,
    },
    #[error("{log} log: a socket takes Frame Streams records only")]
    LinesToSocket { log: &'static str },
}

/// Opens `destination` and starts the writer of log `log` (a metrics label: `access`, `l4`,
/// `dnstap`); records go in through the sink returned.
pub fn start<R: Record>(
    log: &'static str,
    destination: Destination,
    framing: Framing,
    settings: SinkSettings,
) -> Result<Arc<Sink<R>>, StartError> {
    if matches!(destination, Destination::Socket(_)) && framing == Framing::Lines {
        return Err(StartError::LinesToSocket { log });
    }
    let output = Output::open(destination, framing, settings.write_timeout)
        .map_err(|error| StartError::Open { log, error })?;
    let (tx, rx) = std::sync::mpsc::sync_channel(settings.queue.max(1));
    let sink = Arc::new(Sink::new(tx, settings.sampling, LogCounters::new(log)));
    let counters = LogCounters::new(log);
    std::thread::Builder::new()
        .name(format!("log-{log}"))
        .spawn(move || supervise(rx, output, counters, settings))
        .map_err(|error| StartError::Open { log, error })?;
    Ok(sink)
}

/// Runs the writer; a panic (a record that fails to encode) is logged and the loop goes on.
fn supervise<R: Record>(
    rx: Receiver<R>,
    mut output: Output,
    counters: LogCounters,
    settings: SinkSettings,
) {
    loop {
        let run = catch_unwind(AssertUnwindSafe(|| {
            write_loop(&rx, &mut output, &counters, settings)
        }));
        match run {
            Ok(()) => return,
            Err(_) => {
                counters.write_error();
                tracing::error!(log = counters.log, "log writer panicked; restarted");
            }
        }
    }
}

/// Until every sink is gone: wait for a record, let a batch gather for the flush interval,
/// write what is queued (at most a queue's worth per turn), flush.
fn write_loop<R: Record>(
    rx: &Receiver<R>,
    output: &mut Output,
    counters: &LogCounters,
    settings: SinkSettings,
) {
    let mut reopen_seen = REOPEN.load(Ordering::Relaxed);
    let mut encoded = Vec::with_capacity(1 << 10);
    // Records written and lost since the last count.
    let mut tally = (0u64, 0u64);
    let mut write = |output: &mut Output, record: R, (written, lost): &mut (u64, u64)| {
        let mut ok = true;
        for unit in 0..record.units() {
            encoded.clear();
            record.encode_unit(unit, &mut encoded);
            ok &= output.write(&encoded, counters);
        }
        if ok {
            *written += 1;
        } else {
            *lost += 1;
        }
    };
    loop {
        let first = match rx.recv_timeout(IDLE_LOOK) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let _ = output.flush(counters);
                output.finish();
                return;
            }
        };
        let now_seen = REOPEN.load(Ordering::Relaxed);
        output.maintain(now_seen != reopen_seen, counters);
        reopen_seen = now_seen;
        let Some(first) = first else {
            continue;
        };
        write(output, first, &mut tally);
        // Senders never wake a writer that is not waiting: while records keep coming, the
        // writer sleeps between batches instead of being woken for each one.
        std::thread::sleep(settings.flush_interval);
        for record in rx.try_iter().take(settings.queue.max(1)) {
            write(output, record, &mut tally);
        }
        // A record counts as written once it is out of the buffer: a batch whose flush fails
        // (a collector gone) is lost whole.
        let flushed = output.flush(counters);
        let (written, lost) = std::mem::take(&mut tally);
        let (written, lost) = if flushed {
            (written, lost)
        } else {
            (0, written + lost)
        };
        counters.written(written);
        if lost > 0 {
            counters.dropped(Dropped::Unwritten, lost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::Sampling;

    struct Line(String);
    impl Record for Line {
        fn is_error(&self) -> bool {
            false
        }
        fn encode(&self, out: &mut Vec<u8>) {
            if self.0 == "panic" {
                panic!("a record that cannot be encoded");
            }
            out.extend_from_slice(self.0.as_bytes());
        }
    }

    fn settings() -> SinkSettings {
        SinkSettings {
            queue: 16,
            sampling: Sampling::default(),
            flush_interval: Duration::from_millis(1),
            write_timeout: Duration::from_secs(1),
        }
    }

    /// Polls `ready` until it holds, for at most 5 s (the writer works on its own thread).
    fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !ready() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A logger and its file in a fresh directory.
    fn logging() -> (tempfile::TempDir, std::path::PathBuf, Arc<Sink<Line>>) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("a.log");
        let sink = start(
            "test",
            Destination::File(path.clone()),
            Framing::Lines,
            settings(),
        )
        .expect("start");
        (dir, path, sink)
    }

    fn lines_once(path: &std::path::Path, n: usize) -> Vec<String> {
        let read = || std::fs::read_to_string(path).unwrap_or_default();
        eventually("the lines", || read().lines().count() >= n);
        read().lines().map(str::to_string).collect()
    }

    #[test]
    fn records_are_written_as_lines_in_order() {
        let (_dir, path, sink) = logging();
        for i in 0..5 {
            sink.offer(Line(format!("r{i}")));
        }
        assert_eq!(lines_once(&path, 5), ["r0", "r1", "r2", "r3", "r4"]);
    }

    #[test]
    fn a_renamed_file_is_reopened_at_its_path() {
        let (dir, path, sink) = logging();
        sink.offer(Line("before".into()));
        lines_once(&path, 1);
        std::fs::rename(&path, dir.path().join("a.log.1")).expect("rename");
        // Records keep coming; within the rename check they land in a new file.
        eventually("a record in a new file at the path", || {
            sink.offer(Line("after".into()));
            std::fs::read_to_string(&path).is_ok_and(|t| t.contains("after"))
        });
        assert!(std::fs::read_to_string(&path)
            .expect("a new file")
            .starts_with("after"));
    }

    #[test]
    fn a_record_that_panics_is_lost_alone() {
        let (_dir, path, sink) = logging();
        sink.offer(Line("panic".into()));
        sink.offer(Line("next".into()));
        assert_eq!(lines_once(&path, 1), ["next"]);
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_an_error_naming_it() {
        let err = start::<Line>(
            "test",
            Destination::File("/nonexistent-dir/a.log".into()),
            Framing::Lines,
            settings(),
        )
        .expect_err("no such directory");
        assert!(err.to_string().contains("/nonexistent-dir/a.log"), "{err}");
    }
}
