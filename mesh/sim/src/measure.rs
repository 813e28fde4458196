//! What `bench/mesh_scale.sh` reports, measured on a [`Fleet`] in simulated time.

use std::collections::BTreeSet;
use std::time::Duration;

use chitchat::ChitchatId;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::fleet::Fleet;

/// How long a trial waits for every node before it counts as incomplete.
pub const TRIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// One health change's spread: when 99 % of the other nodes held it, and when all did.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub p99: Option<Duration>,
    pub all: Option<Duration>,
}

/// Publishes `trials` changes, one every `every`, each from a random running core member (a
/// prober's, in a tiered fleet; any node's otherwise), and
/// measures each one's spread. Trials overlap when one takes longer than `every`, as health
/// changes from many probers do in a fleet; each is measured from its own publish.
pub async fn propagation(fleet: &Fleet, trials: usize, every: Duration, seed: u64) -> Vec<Spread> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let running: Vec<usize> = (0..fleet.len())
        .filter(|&i| fleet.handle(i).is_some())
        .collect();
    let publishers: Vec<usize> = running
        .iter()
        .copied()
        .filter(|&i| i < fleet.core())
        .collect();
    let others = running.len().saturating_sub(1);
    let want99 = ((others as f64) * 0.99).ceil() as usize;
    let arrived = |value: &str| {
        fleet
            .arrivals
            .lock()
            .map(|a| a.get(value).map_or(0, Vec::len))
            .unwrap_or(0)
    };
    let mut published: Vec<(String, Instant)> = Vec::with_capacity(trials);
    for t in 0..trials {
        let Some(&from) = publishers.get(rng.random_range(0..publishers.len().max(1))) else {
            break;
        };
        let value = format!("{seed}-{t}");
        fleet
            .publish(from, &format!("health-{}", t % 64), &value)
            .await;
        published.push((value, Instant::now()));
        tokio::time::sleep(every).await;
    }
    loop {
        let pending = published
            .iter()
            .any(|(value, at)| arrived(value) < others && at.elapsed() <= TRIAL_TIMEOUT);
        if !pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut out = Vec::with_capacity(trials);
    for (value, start) in published {
        let mut at: Vec<Duration> = fleet
            .arrivals
            .lock()
            .map(|mut a| a.remove(&value).unwrap_or_default())
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.duration_since(start))
            .filter(|d| *d <= TRIAL_TIMEOUT)
            .collect();
        at.sort();
        out.push(Spread {
            p99: (want99 > 0).then(|| at.get(want99 - 1).copied()).flatten(),
            all: (at.len() >= others).then(|| at.last().copied()).flatten(),
        });
    }
    out
}

/// Marks of a member dead by another while both run, over `duration`, sampled every second:
/// in a fleet where no node is stopped, every one is false.
pub async fn false_deaths(fleet: &Fleet, duration: Duration) -> u64 {
    let start = Instant::now();
    let mut before: Vec<(usize, BTreeSet<ChitchatId>)> = fleet.dead_sets().await;
    let mut deaths = 0u64;
    while start.elapsed() < duration {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = fleet.dead_sets().await;
        for ((_, was), (_, is)) in before.iter().zip(&now) {
            deaths += is.difference(was).count() as u64;
        }
        before = now;
    }
    deaths
}

/// Kills node `victim` and measures how long until every other running node holds it dead
/// (`None`: not within `within`).
pub async fn death(fleet: &mut Fleet, victim: usize, within: Duration) -> Option<Duration> {
    let id = fleet.kill(victim).await?;
    let start = Instant::now();
    while start.elapsed() < within {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let dead = fleet.dead_sets().await;
        if dead.iter().all(|(_, d)| d.contains(&id)) {
            return Some(start.elapsed());
        }
    }
    None
}

/// Restarts every node, one every `gap`, then waits until every node holds every other live:
/// how long the whole restart took to settle after the last node came back.
pub async fn rolling_restart(
    fleet: &mut Fleet,
    gap: Duration,
    within: Duration,
) -> anyhow::Result<Option<Duration>> {
    for i in 0..fleet.len() {
        fleet.restart(i).await?;
        tokio::time::sleep(gap).await;
    }
    Ok(fleet.wait_converged(within).await)
}

/// The `q` quantile (0..=1) of `values`, a missing value counting as larger than any.
pub fn quantile(values: &[Option<Duration>], q: f64) -> Option<Duration> {
    let mut v: Vec<Option<Duration>> = values.to_vec();
    v.sort_by(|a, b| match (a, b) {
        (Some(a), Some(b)) => a.cmp(b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    if v.is_empty() {
        return None;
    }
    let idx = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[idx]
}

/// CPU time this process used so far (user + system), from /proc/self/stat.
pub fn cpu_time() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_value_is_the_largest() {
        let ms = |m| Some(Duration::from_millis(m));
        let v = [ms(30), None, ms(10), ms(20)];
        assert_eq!(quantile(&v, 0.5), ms(20));
        assert_eq!(quantile(&v, 0.75), ms(30));
        assert_eq!(quantile(&v, 1.0), None);
        assert_eq!(quantile(&[], 0.5), None);
    }
}
