//! Each pool's EWMA RTT per region over the last hour, for the console's pool page: sampled
//! by the tally loop every [`SAMPLE_EVERY`], [`SAMPLES`] kept, for at most [`MAX_POOLS`] pools
//! (in config order; a pool beyond has no chart). Kept by pool name, so a reload that keeps a
//! pool keeps its history. At the bounds: 1,024 pools x 60 samples x 13 regions x 4 bytes,
//! about 3 MiB.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use lb_core::config::{Config, PoolId};
use lb_core::health::HealthSnapshot;
use lb_core::Region;

/// How often a sample is taken (unix seconds).
pub const SAMPLE_EVERY: u64 = 60;
/// Samples kept: one hour.
pub const SAMPLES: usize = 60;
/// Pools whose history is kept.
pub const MAX_POOLS: usize = 1024;

/// One sample: when, and each region's RTT in milliseconds (`NaN`: none).
type Sample = (u64, [f32; 13]);

#[derive(Default)]
struct Samples {
    last: u64,
    pools: HashMap<String, VecDeque<Sample>>,
}

/// The history, shared between the tally loop (which samples) and the admin API (which reads).
#[derive(Default)]
pub struct RttHistory(Mutex<Samples>);

impl RttHistory {
    /// Takes a sample of `snapshot` when one is due at `now` (unix seconds).
    pub fn sample(&self, config: &Config, snapshot: &HealthSnapshot, now: u64) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let due = now >= s.last + SAMPLE_EVERY;
        let kept: std::collections::HashSet<&str> = config
            .pools
            .iter()
            .take(MAX_POOLS)
            .map(|p| p.name.as_str())
            .collect();
        s.pools.retain(|name, _| kept.contains(name.as_str()));
        let mut taken = false;
        for (i, pool) in config.pools.iter().take(MAX_POOLS).enumerate() {
            let rtt = &snapshot.pool(PoolId(i)).rtt_ms;
            let mut values = [f32::NAN; 13];
            for r in Region::ALL {
                if let Some(v) = rtt.get(r) {
                    values[r.index()] = v as f32;
                }
            }
            // A pool with nothing measured yet (a start, before its first votes) gets no
            // point; its first comes as soon as there is one, between the regular samples.
            if values.iter().all(|v| v.is_nan()) {
                continue;
            }
            let series = s.pools.entry(pool.name.clone()).or_default();
            if !due && !series.is_empty() {
                continue;
            }
            if series.len() == SAMPLES {
                series.pop_front();
            }
            series.push_back((now, values));
            taken = true;
        }
        if due && taken {
            s.last = now;
        }
    }

    /// `pool`'s history: per region with any value, its (unix seconds, ms) points.
    pub fn of(&self, pool: &str) -> Vec<(Region, Vec<(u64, f32)>)> {
        let s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(series) = s.pools.get(pool) else {
            return Vec::new();
        };
        Region::ALL
            .iter()
            .filter_map(|r| {
                let points: Vec<(u64, f32)> = series
                    .iter()
                    .filter(|(_, v)| !v[r.index()].is_nan())
                    .map(|(t, v)| (*t, v[r.index()]))
                    .collect();
                (!points.is_empty()).then_some((*r, points))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pools: usize) -> Config {
        let mut text = String::from("[[monitors]]\nname = \"m\"\n");
        for i in 0..pools {
            text.push_str(&format!(
                "[[pools]]\nname = \"p{i}\"\nmonitor = \"m\"\norigins = [{{ name = \"e\", address = \"192.0.2.1\" }}]\n"
            ));
        }
        let regions = lb_core::RegionsTable::embedded().expect("regions");
        Config::parse("history", &text, &regions).expect("config")
    }

    fn snapshot(config: &Config, rtt: f64) -> HealthSnapshot {
        let mut s = HealthSnapshot::uniform(config, lb_core::health::Verdict::Healthy);
        for p in 0..config.pools.len() {
            s.pools[p].rtt_ms.set(Region::Weu, Some(rtt));
        }
        s
    }

    #[test]
    fn a_sample_is_taken_once_a_minute_and_an_hour_is_kept() {
        let c = config(1);
        let h = RttHistory::default();
        for minute in 0..90u64 {
            h.sample(&c, &snapshot(&c, minute as f64), 1_000_000 + minute * 60);
            h.sample(&c, &snapshot(&c, -1.0), 1_000_000 + minute * 60 + 30);
        }
        let weu = &h.of("p0")[0];
        assert_eq!(weu.0, Region::Weu);
        assert_eq!(weu.1.len(), SAMPLES);
        assert_eq!(weu.1.last().map(|p| p.1), Some(89.0));
    }

    #[test]
    fn no_sample_is_taken_before_anything_is_measured() {
        let c = config(1);
        let h = RttHistory::default();
        h.sample(
            &c,
            &HealthSnapshot::uniform(&c, lb_core::health::Verdict::Healthy),
            1_000_000,
        );
        h.sample(&c, &snapshot(&c, 7.0), 1_000_001);
        assert_eq!(h.of("p0")[0].1, vec![(1_000_001, 7.0)]);
    }

    #[test]
    fn only_the_first_pools_are_kept() {
        let c = config(MAX_POOLS + 3);
        let h = RttHistory::default();
        h.sample(&c, &snapshot(&c, 5.0), 1_000_000);
        assert!(!h.of("p0").is_empty());
        assert!(h.of(&format!("p{}", MAX_POOLS + 1)).is_empty());
    }
}
