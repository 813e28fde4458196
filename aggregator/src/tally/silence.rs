//! Why a tally counted no vote: the evidence fail static stands on (docs/design.md#fail-static).
//!
//! Fail static keeps the last known health because the aggregator cannot hear its probers, not
//! because their targets are dead: a live prober whose results say "down" is a vote like any
//! other, and failing over on it is the point of the mesh. So the tally only goes static when
//! no ballot counts, and says which of the ways that happens this is: no prober in the mesh,
//! every prober dead to the failure detector, live probers whose progress stood still (they do
//! not report: a stalled process, or a link that carries heartbeats but not their state), or
//! live, fresh probers without a result for any monitored pool (another config, no check region
//! of theirs).

use std::time::Duration;

use serde::Serialize;

use super::ballot::Ballot;

/// The reason a tally counted no vote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum Silence {
    /// No prober on the roster is a member of the mesh this aggregator sees.
    NoProber,
    /// Every prober is dead to the failure detector.
    AllDead { probers: usize },
    /// Live probers, each of whose `progress` key stood still longer than any check's results
    /// may age: the freshest moved `freshest_age_ms` ago.
    AllStale { live: usize, freshest_age_ms: u64 },
    /// Live probers with fresh progress, none of which holds a result for a monitored pool.
    NoResults { live: usize },
}

impl Silence {
    /// Classifies a tally that counted no vote; `max_age` is the longest any check's results
    /// may age in this config.
    pub fn of(ballots: &[Ballot], max_age: Duration) -> Silence {
        let live: Vec<&Ballot> = ballots.iter().filter(|b| b.alive).collect();
        if ballots.is_empty() {
            return Silence::NoProber;
        }
        let Some(freshest) = live.iter().map(|b| b.age).min() else {
            return Silence::AllDead {
                probers: ballots.len(),
            };
        };
        if freshest > max_age {
            Silence::AllStale {
                live: live.len(),
                freshest_age_ms: u64::try_from(freshest.as_millis()).unwrap_or(u64::MAX),
            }
        } else {
            Silence::NoResults { live: live.len() }
        }
    }

    /// One sentence for logs and the console.
    pub fn describe(&self) -> String {
        match self {
            Silence::NoProber => "no prober of the roster is in the mesh".into(),
            Silence::AllDead { probers } => {
                format!("all {probers} probers are dead to the failure detector")
            }
            Silence::AllStale {
                live,
                freshest_age_ms,
            } => format!(
                "{live} probers are alive but none reports: the freshest progress moved \
                 {freshest_age_ms} ms ago"
            ),
            Silence::NoResults { live } => {
                format!("{live} live probers hold no result for any monitored pool")
            }
        }
    }
}
