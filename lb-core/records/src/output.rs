//! Where a log's writer puts its records, kept open across rotation: a file reopened on
//! request (SIGUSR1) or when its path comes to name another file, stdout, or a Frame Streams
//! collector's Unix socket reconnected with backoff.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::framestream::{self, ControlFrame, Frame, FrameReader};
use crate::metrics::LogCounters;

/// Where a log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    /// A file, appended to (lines) or started afresh (Frame Streams, as fstrm's file writer).
    File(PathBuf),
    /// A Frame Streams collector listening on a Unix socket (fstrm_capture, vector's dnstap
    /// source, dnstap's Go tool), with the bidirectional handshake.
    Socket(PathBuf),
}

impl Destination {
    /// `-` is stdout, anything else a file.
    pub fn file_or_stdout(path: &Path) -> Destination {
        if path == Path::new("-") {
            Destination::Stdout
        } else {
            Destination::File(path.to_path_buf())
        }
    }
}

/// How records are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One record per line.
    Lines,
    /// Frame Streams data frames of this content type (`protobuf:dnstap.Dnstap`).
    FrameStream { content_type: &'static str },
}

/// How often a file's path is checked for a rename.
const RENAME_CHECK: Duration = Duration::from_secs(1);
/// A lost collector is tried again after this, doubling up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Write buffer of a log's output.
const BUFFER: usize = 64 << 10;

enum State {
    Stdout(BufWriter<io::Stdout>),
    File {
        out: BufWriter<File>,
        /// Device and inode opened, to tell when the path names another file.
        id: (u64, u64),
    },
    Socket(BufWriter<UnixStream>),
    /// Not open (a failed open, a lost collector): tried again at `retry_at`.
    Closed {
        retry_at: Instant,
        backoff: Duration,
    },
}

pub(crate) struct Output {
    destination: Destination,
    framing: Framing,
    write_timeout: Duration,
    state: State,
    last_check: Instant,
    frame: Vec<u8>,
}

fn file_id(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl Output {
    /// Opens the destination. A file that cannot be opened is an error (the node does not
    /// start); a collector is connected by the writer (`maintain`), and tried again with
    /// backoff while it is not there.
    pub(crate) fn open(
        destination: Destination,
        framing: Framing,
        write_timeout: Duration,
    ) -> io::Result<Output> {
        let mut out = Output {
            destination,
            framing,
            write_timeout,
            state: State::Closed {
                retry_at: Instant::now(),
                backoff: FIRST_BACKOFF,
            },
            last_check: Instant::now(),
            frame: Vec::with_capacity(64),
        };
        // A collector is connected by the writer's thread (its handshake may wait), at once.
        if !matches!(out.destination, Destination::Socket(_)) {
            out.state = out.open_now()?;
        }
        Ok(out)
    }

    fn open_now(&self) -> io::Result<State> {
        let start = |w: &mut dyn Write| -> io::Result<()> {
            if let Framing::FrameStream { content_type } = self.framing {
                let mut f = Vec::new();
                framestream::control(ControlFrame::Start, Some(content_type), &mut f);
                w.write_all(&f)?;
            }
            Ok(())
        };
        match &self.destination {
            Destination::Stdout => {
                let mut w = BufWriter::with_capacity(BUFFER, io::stdout());
                start(&mut w)?;
                Ok(State::Stdout(w))
            }
            Destination::File(path) => {
                let mut options = OpenOptions::new();
                options.create(true).mode(0o640);
                match self.framing {
                    Framing::Lines => options.append(true),
                    Framing::FrameStream { .. } => options.write(true).truncate(true),
                };
                let file = options
                    .open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let id = file_id(&file.metadata()?);
                let mut w = BufWriter::with_capacity(BUFFER, file);
                start(&mut w)?;
                Ok(State::File { out: w, id })
            }
            Destination::Socket(_) => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    /// Connects to the collector and shakes hands; on failure, closed until the backoff
    /// has passed.
    fn connect(&self, backoff: Duration) -> State {
        let Destination::Socket(path) = &self.destination else {
            return self.closed(backoff);
        };
        let Framing::FrameStream { content_type } = self.framing else {
            return self.closed(backoff);
        };
        match handshake(path, content_type, self.write_timeout) {
            Ok(stream) => State::Socket(BufWriter::with_capacity(BUFFER, stream)),
            Err(e) => {
                tracing::debug!(collector = %path.display(), error = %e, "Frame Streams collector not reachable");
                self.closed(backoff)
            }
        }
    }

    fn closed(&self, backoff: Duration) -> State {
        State::Closed {
            retry_at: Instant::now() + backoff,
            backoff: (backoff * 2).min(MAX_BACKOFF),
        }
    }

    /// Writes one encoded record; `false` when it could not be (nothing open, or the write
    /// failed and the output closed).
    pub(crate) fn write(&mut self, record: &[u8], counters: &LogCounters) -> bool {
        self.frame.clear();
        let bytes: &[u8] = match self.framing {
            Framing::Lines => record,
            Framing::FrameStream { .. } => {
                framestream::data(record, &mut self.frame);
                &self.frame
            }
        };
        let newline = self.framing == Framing::Lines;
        let written = match &mut self.state {
            State::Stdout(w) => put(w, bytes, newline),
            State::File { out, .. } => put(out, bytes, newline),
            State::Socket(w) => put(w, bytes, newline),
            State::Closed { .. } => return false,
        };
        if let Err(e) = written {
            self.failed(&e, counters);
            return false;
        }
        true
    }

    /// Writes out what is buffered; `false` when that failed (the output is then closed, and
    /// what was buffered is lost) or nothing is open.
    pub(crate) fn flush(&mut self, counters: &LogCounters) -> bool {
        let flushed = match &mut self.state {
            State::Stdout(w) => w.flush(),
            State::File { out, .. } => out.flush(),
            State::Socket(w) => w.flush(),
            State::Closed { .. } => return false,
        };
        match flushed {
            Ok(()) => true,
            Err(e) => {
                self.failed(&e, counters);
                false
            }
        }
    }

    fn failed(&mut self, e: &io::Error, counters: &LogCounters) {
        counters.write_error();
        tracing::warn!(log = counters.log, destination = ?self.destination, error = %e, "log write failed; reopening");
        self.state = self.closed(FIRST_BACKOFF);
    }

    /// Reopens a file when `reopen` (a SIGUSR1 arrived) or its path names another file now;
    /// retries a closed output whose backoff has passed.
    pub(crate) fn maintain(&mut self, reopen: bool, counters: &LogCounters) {
        let now = Instant::now();
        let renamed = match (&self.state, &self.destination) {
            (State::File { id, .. }, Destination::File(path))
                if now.duration_since(self.last_check) >= RENAME_CHECK =>
            {
                self.last_check = now;
                std::fs::metadata(path).map_or(true, |m| file_id(&m) != *id)
            }
            _ => false,
        };
        let retry = match &self.state {
            State::Closed { retry_at, backoff } if now >= *retry_at => Some(*backoff),
            _ => None,
        };
        if (reopen || renamed) && matches!(self.state, State::File { .. }) {
            let _ = self.flush(counters);
            self.reopen(FIRST_BACKOFF, counters);
        } else if let Some(backoff) = retry {
            self.reopen(backoff, counters);
        }
    }

    fn reopen(&mut self, backoff: Duration, counters: &LogCounters) {
        self.finish();
        self.state = match self.destination {
            Destination::Socket(_) => self.connect(backoff),
            _ => match self.open_now() {
                Ok(s) => s,
                Err(e) => {
                    counters.write_error();
                    tracing::warn!(log = counters.log, error = %e, "log could not be reopened");
                    self.closed(backoff)
                }
            },
        };
        if !matches!(self.state, State::Closed { .. }) {
            counters.reopened();
        }
    }

    /// Ends the stream properly: Frame Streams' STOP (and, from a collector, FINISH).
    pub(crate) fn finish(&mut self) {
        let Framing::FrameStream { .. } = self.framing else {
            return;
        };
        let mut stop = Vec::new();
        framestream::control(ControlFrame::Stop, None, &mut stop);
        match &mut self.state {
            State::Stdout(w) => {
                let _ = w.write_all(&stop).and_then(|()| w.flush());
            }
            State::File { out, .. } => {
                let _ = out.write_all(&stop).and_then(|()| out.flush());
            }
            State::Socket(w) => {
                if w.write_all(&stop).and_then(|()| w.flush()).is_ok() {
                    // The collector's FINISH, within the write timeout; nothing depends on it.
                    let _ = FrameReader::new(w.get_ref(), 0).next_frame();
                }
            }
            State::Closed { .. } => {}
        }
    }
}

fn put(w: &mut impl Write, bytes: &[u8], newline: bool) -> io::Result<()> {
    w.write_all(bytes)?;
    if newline {
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// READY, ACCEPT, START with `content_type`, each way within `timeout`.
fn handshake(path: &Path, content_type: &str, timeout: Duration) -> io::Result<UnixStream> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    let mut out = Vec::new();
    framestream::control(ControlFrame::Ready, Some(content_type), &mut out);
    stream.write_all(&out)?;
    match FrameReader::new(&stream, 0).next_frame() {
        Ok(Some(Frame::Control {
            kind: ControlFrame::Accept,
            content_type: accepted,
        })) if accepted.as_deref().is_none_or(|t| t == content_type) => {}
        Ok(other) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the collector answered READY with {other:?}, not ACCEPT"),
            ))
        }
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
    }
    out.clear();
    framestream::control(ControlFrame::Start, Some(content_type), &mut out);
    stream.write_all(&out)?;
    Ok(stream)
}
