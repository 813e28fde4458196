//! The wait after a failed `accept` (out of file descriptors, say): 5 ms, doubling to 1 s, and
//! back to 5 ms after a success, so a listener that cannot accept neither spins nor stalls for
//! long once it can. Every listener of meshlb uses it: the admin and metrics listeners, DNS over
//! TCP, layer 4.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptBackoff {
    next: Duration,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    pub fn new() -> Self {
        AcceptBackoff { next: Self::FIRST }
    }

    /// How long to wait after this failure.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        wait
    }

    pub fn succeeded(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_a_second_and_start_again_after_a_success() {
        let mut b = AcceptBackoff::new();
        let waits: Vec<u128> = (0..10).map(|_| b.failed().as_millis()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        b.succeeded();
        assert_eq!(b.failed(), Duration::from_millis(5));
    }
}
