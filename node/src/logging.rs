//! How the process logs (`--log-format`): human text, or one JSON object per line for Loki
//! and Elasticsearch. The binary installs the subscriber; this records the choice for the
//! parts that write records of their own (`aggregator::events`' health changes go through the
//! log as fields in JSON, and stay JSON lines on stdout in text).

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// The process logs JSON lines.
pub fn set_json() {
    JSON.store(true, Ordering::Relaxed);
}

/// Whether the process logs JSON lines.
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}
