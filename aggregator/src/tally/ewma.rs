//! Exponentially weighted moving average of RTT, in the time domain.
//!
//! The tally reruns whenever gossip changes, often with the same samples, so a per-update EWMA
//! would weigh a sample by how often unrelated keys changed. Instead the weight of a new sample
//! depends on the time since the last update: `alpha = 1 - exp(-dt / tau)`. With the default
//! `tau` of 30 s, a step change in RTT is 63 % absorbed after 30 s and 95 % after 90 s, whatever
//! the recompute rate; reruns within the same instant change nothing.

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ewma {
    pub value: f64,
    pub updated: Instant,
}

impl Ewma {
    pub fn new(sample: f64, now: Instant) -> Self {
        Ewma {
            value: sample,
            updated: now,
        }
    }

    /// Folds `sample` in, weighted by the time since the last update.
    pub fn update(self, sample: f64, now: Instant, tau: Duration) -> Self {
        if !sample.is_finite() || sample < 0.0 {
            return self;
        }
        let dt = now.saturating_duration_since(self.updated).as_secs_f64();
        let alpha = if tau.is_zero() {
            1.0
        } else {
            1.0 - (-dt / tau.as_secs_f64()).exp()
        };
        Ewma {
            value: self.value + alpha * (sample - self.value),
            updated: now.max(self.updated),
        }
    }
}

/// Folds into an optional previous average.
pub fn fold(prev: Option<Ewma>, sample: Option<f64>, now: Instant, tau: Duration) -> Option<Ewma> {
    match (prev, sample) {
        (Some(p), Some(s)) => Some(p.update(s, now, tau)),
        (None, Some(s)) if s.is_finite() && s >= 0.0 => Some(Ewma::new(s, now)),
        (p, _) => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_follows_time_not_update_count() {
        let t0 = Instant::now();
        let tau = Duration::from_secs(30);
        let e = Ewma::new(100.0, t0);
        // Many reruns at the same instant change nothing.
        let same = (0..100).fold(e, |e, _| e.update(10.0, t0, tau));
        assert_eq!(same.value, 100.0);
        // One update after tau absorbs 63 %.
        let later = e.update(10.0, t0 + tau, tau);
        assert!(
            (later.value - (100.0 - 90.0 * 0.632)).abs() < 0.2,
            "{}",
            later.value
        );
        // Ten updates of tau/10 give the same as one of tau.
        let steps = (1..=10).fold(e, |e, i| e.update(10.0, t0 + tau * i / 10, tau));
        assert!((steps.value - later.value).abs() < 1e-6);
        assert_eq!(fold(None, Some(f64::NAN), t0, tau), None);
    }
}
