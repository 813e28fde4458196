//! Where probe reports go. The gossip publisher (mesh issue) is one sink; here a channel for
//! in-process consumers and a JSON-lines writer for operators and tests.

use std::io::Write;
use std::sync::Mutex;

use serde::Serialize;
use tokio::sync::mpsc;

use crate::probed::Probed;
use crate::threshold::DebouncedState;

/// One scheduled probe of one target, with the debounced state after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    #[serde(flatten)]
    pub probe: Probed,
    pub state: DebouncedState,
    /// The debounced state changed with this probe.
    pub changed: bool,
    /// Probes of this target so far (1 for the first).
    pub seq: u64,
    /// Unix milliseconds when the probe finished.
    pub at_ms: u64,
}

/// Receives every report. Must not block: the scheduler calls it from its own task.
pub trait ResultSink: Send + Sync + 'static {
    fn publish(&self, report: ProbeReport);
}

/// Sends reports down an unbounded channel (nothing is dropped; the consumer keeps up or the
/// memory shows it).
pub struct ChannelSink(pub mpsc::UnboundedSender<ProbeReport>);

impl ResultSink for ChannelSink {
    fn publish(&self, report: ProbeReport) {
        let _ = self.0.send(report);
    }
}

/// Writes one JSON object per line.
pub struct JsonLinesSink<W: Write + Send + 'static>(pub Mutex<W>);

impl<W: Write + Send + 'static> ResultSink for JsonLinesSink<W> {
    fn publish(&self, report: ProbeReport) {
        if let (Ok(mut w), Ok(line)) = (self.0.lock(), serde_json::to_string(&report)) {
            let _ = writeln!(w, "{line}").and_then(|_| w.flush());
        }
    }
}
