//! The wall clock that the shells read and hand to the pure code (the steering engine takes
//! `now` as an argument, so tests and `simulate` pick their own). Unix time, saturating at 0
//! on a clock set before 1970.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix seconds now.
pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Unix milliseconds now: the timestamps of gossiped results, health events and drains.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
