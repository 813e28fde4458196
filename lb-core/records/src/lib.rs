//! Records of what meshlb's frontends served — the proxy's access log, the layer-4 log, dnstap
//! — written without slowing them: a frontend hands each record to a [`Sink`], a bounded queue
//! read by one writer thread per log. When the queue is full the record is dropped and counted
//! and the request goes on; nothing on a request's path waits for a disk or a collector.
//!
//! The writer encodes records (the frontend's [`Record::encode`]) and writes them as lines to
//! a file or stdout, or as Frame Streams data frames (`framestream.rs`) to a file or to a
//! collector's Unix socket. Files reopen on [`reopen_all`] (the binary calls it on SIGUSR1,
//! logrotate's convention as nginx's) and when their path comes to name another file (a
//! rename); a collector that goes away is reconnected with backoff.

mod framestream;
mod json_line;
mod metrics;
mod output;
mod sink;
pub mod time;
mod writer;

pub use framestream::{ControlFrame, Frame, FrameReader, FrameStreamError};
pub use json_line::JsonLine;
pub use metrics::{describe_metrics, METRICS};
pub use output::{Destination, Framing};
pub use sink::{Record, Sampling, Sink, SinkSettings};
pub use writer::{reopen_all, start, StartError};
