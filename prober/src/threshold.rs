//! Anti-flap state machines: raw probe results in, a debounced state out. Pure: no clock, no
//! I/O, so they are tested exhaustively.
//!
//! Before the first result the state is Unknown; the first result decides at once (a prober
//! that has just started should not withhold its vote for `consecutive_up` intervals — the
//! aggregator's majority vote is what guards against one prober's noise).

use std::collections::VecDeque;

use lb_core::config::Threshold;
use serde::Serialize;

/// The debounced state a prober publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DebouncedState {
    Unknown,
    Healthy,
    Unhealthy,
}

/// One target's anti-flap state.
#[derive(Debug, Clone)]
pub struct Debouncer {
    rule: Threshold,
    state: DebouncedState,
    /// Consecutive: passes (while unhealthy) or failures (while healthy) in a row.
    /// Counter: failures counted while up, or passes in a row while down.
    run: u32,
    /// Counter: passes in a row while up (a run of `ok_thresh` forgives the failures).
    ok_run: u32,
    /// Window: the last `sample_size` results.
    window: VecDeque<bool>,
}

impl Debouncer {
    pub fn new(rule: Threshold) -> Self {
        Debouncer {
            rule,
            state: DebouncedState::Unknown,
            run: 0,
            ok_run: 0,
            window: VecDeque::new(),
        }
    }

    pub fn state(&self) -> DebouncedState {
        self.state
    }

    /// Feeds one probe result; returns the state after it.
    pub fn observe(&mut self, passed: bool) -> DebouncedState {
        use DebouncedState::*;
        if self.state == Unknown {
            self.state = if passed { Healthy } else { Unhealthy };
            if let Threshold::Window { sample_size, .. } = self.rule {
                // Samples before the first count as the first: no special case at start.
                self.window = std::iter::repeat_n(passed, sample_size as usize).collect();
            }
            return self.state;
        }
        match self.rule {
            Threshold::Consecutive { up, down } => {
                let (against, need, next) = match self.state {
                    Healthy => (!passed, down, Unhealthy),
                    _ => (passed, up, Healthy),
                };
                if against {
                    self.run += 1;
                    if self.run >= need.max(1) {
                        self.state = next;
                        self.run = 0;
                    }
                } else {
                    self.run = 0;
                }
            }
            Threshold::Window {
                sample_size,
                required,
            } => {
                self.window.push_back(passed);
                while self.window.len() > sample_size as usize {
                    self.window.pop_front();
                }
                let passes = self.window.iter().filter(|&&p| p).count() as u32;
                self.state = if passes >= required {
                    Healthy
                } else {
                    Unhealthy
                };
            }
            Threshold::Counter {
                down_thresh,
                ok_thresh,
                up_thresh,
            } => match self.state {
                Healthy => {
                    if passed {
                        self.ok_run += 1;
                        if self.ok_run >= ok_thresh {
                            self.run = 0;
                            self.ok_run = 0;
                        }
                    } else {
                        self.ok_run = 0;
                        self.run += 1;
                        if self.run >= down_thresh {
                            self.state = Unhealthy;
                            self.run = 0;
                        }
                    }
                }
                _ => {
                    if passed {
                        self.run += 1;
                        if self.run >= up_thresh {
                            self.state = Healthy;
                            self.run = 0;
                            self.ok_run = 0;
                        }
                    } else {
                        self.run = 0;
                    }
                }
            },
        }
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::DebouncedState::*;
    use super::*;
    use proptest::prelude::*;

    fn run(rule: Threshold, results: &[bool]) -> Vec<DebouncedState> {
        let mut d = Debouncer::new(rule);
        results.iter().map(|&r| d.observe(r)).collect()
    }

    #[test]
    fn first_result_decides() {
        let rule = Threshold::Consecutive { up: 3, down: 3 };
        assert_eq!(run(rule, &[true]), vec![Healthy]);
        assert_eq!(run(rule, &[false]), vec![Unhealthy]);
        assert_eq!(Debouncer::new(rule).state(), Unknown);
    }

    #[test]
    fn consecutive_counts_runs() {
        let rule = Threshold::Consecutive { up: 2, down: 3 };
        let r = run(
            rule,
            &[true, false, false, true, false, false, false, true, true],
        );
        assert_eq!(
            r,
            vec![
                Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Unhealthy, Unhealthy, Healthy
            ]
        );
    }

    #[test]
    fn window_is_azure_front_door_rule() {
        // 3 of the last 4.
        let rule = Threshold::Window {
            sample_size: 4,
            required: 3,
        };
        let r = run(rule, &[true, false, true, false, false, true, true, true]);
        // windows: TTTT, TTTF(3), TTFT(3), TFTF(2)->U, FTFF(1), TFFT(2), FFTT(2), FTTT(3)->H
        assert_eq!(
            r,
            vec![Healthy, Healthy, Healthy, Unhealthy, Unhealthy, Unhealthy, Unhealthy, Healthy]
        );
    }

    #[test]
    fn counter_is_gdnsd_rule() {
        let rule = Threshold::Counter {
            down_thresh: 3,
            ok_thresh: 2,
            up_thresh: 2,
        };
        // Two failures, then two passes forgive them, then two more failures: still up.
        let r = run(rule, &[true, false, false, true, true, false, false]);
        assert_eq!(*r.last().unwrap(), Healthy);
        // Failures need not be consecutive: one pass in between does not forgive.
        let r = run(rule, &[true, false, true, false, true, false]);
        assert_eq!(*r.last().unwrap(), Unhealthy);
        // Down: up_thresh passes in a row, a failure restarts the count.
        let r = run(rule, &[false, true, false, true, true]);
        assert_eq!(r, vec![Unhealthy, Unhealthy, Unhealthy, Unhealthy, Healthy]);
    }

    fn rules() -> impl Strategy<Value = Threshold> {
        prop_oneof![
            (1u32..6, 1u32..6).prop_map(|(up, down)| Threshold::Consecutive { up, down }),
            (1u32..8)
                .prop_flat_map(|n| (Just(n), 1..=n))
                .prop_map(|(sample_size, required)| Threshold::Window {
                    sample_size,
                    required
                }),
            (1u32..6, 1u32..6, 1u32..6).prop_map(|(down_thresh, ok_thresh, up_thresh)| {
                Threshold::Counter {
                    down_thresh,
                    ok_thresh,
                    up_thresh,
                }
            }),
        ]
    }

    proptest! {
        /// A state never changes without a result pointing that way, and consecutive mode
        /// flips exactly when the run reaches its threshold.
        #[test]
        fn changes_follow_results(rule in rules(), results in proptest::collection::vec(any::<bool>(), 1..200)) {
            let mut d = Debouncer::new(rule);
            let mut prev = Unknown;
            let mut run_len = 0u32;
            let mut last = None;
            for &r in &results {
                let s = d.observe(r);
                if prev != Unknown && s != prev {
                    prop_assert_eq!(s == Healthy, r, "flip against the result");
                }
                run_len = if last == Some(r) { run_len + 1 } else { 1 };
                last = Some(r);
                if let Threshold::Consecutive { up, down } = rule {
                    if prev == Healthy && !r && run_len >= down { prop_assert_eq!(s, Unhealthy); }
                    if prev == Unhealthy && r && run_len >= up { prop_assert_eq!(s, Healthy); }
                }
                prev = s;
            }
        }

        /// Window mode is exactly "passes among the last sample_size >= required".
        #[test]
        fn window_matches_its_definition(n in 1u32..10, req_frac in 0.0f64..1.0, results in proptest::collection::vec(any::<bool>(), 1..100)) {
            let required = 1 + ((n - 1) as f64 * req_frac) as u32;
            let mut d = Debouncer::new(Threshold::Window { sample_size: n, required });
            let mut padded: Vec<bool> = vec![results[0]; n as usize];
            padded.pop();
            for &r in &results {
                padded.push(r);
                let s = d.observe(r);
                let window = &padded[padded.len() - n as usize..];
                let passes = window.iter().filter(|&&p| p).count() as u32;
                prop_assert_eq!(s == Healthy, passes >= required);
            }
        }
    }
}
