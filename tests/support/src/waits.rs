//! Bounded waits for a condition: the tests never sleep a fixed time and assume.

use std::time::{Duration, Instant};

/// How long until `ok` held, checked every 50 ms; `None` if it did not within `within`.
pub fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if ok() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// `wait_until`, panicking with `what` when the condition did not hold within `within`.
pub fn wait_for(what: &str, within: Duration, ok: impl FnMut() -> bool) -> Duration {
    wait_until(within, ok)
        .unwrap_or_else(|| panic!("timed out after {within:?} waiting for {what}"))
}
