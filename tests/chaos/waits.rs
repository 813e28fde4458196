//! Bounded waits on the world: for votes to leave or return, members to live, verdicts and
//! events; a timeout says what was missing.

use std::time::{Duration, Instant};

use crate::mesh::Mesh;
use crate::SETTLE;

impl Mesh {
    /// Waits until neither aggregator counts a vote from `nodes` any more (every one of their
    /// votes behind eu-1 is from a dead member or stale): from then on, a verdict that the
    /// loss could change has been recomputed without them. Node ids start with the names.
    pub fn wait_votes_gone(&self, nodes: &[String]) -> Duration {
        test_support::wait_for("the lost probers' votes to leave the tally", SETTLE, || {
            (0..2).all(|a| {
                self.status(a).is_some_and(|s| {
                    let votes: Vec<serde_json::Value> = s["pools"][0]["endpoints"][0]["regions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|r| r["datacenters"].as_array().cloned().unwrap_or_default())
                        .collect();
                    votes.iter().all(|d| {
                        let lost = d["node"]
                            .as_str()
                            .is_some_and(|id| nodes.iter().any(|n| id.starts_with(n.as_str())));
                        !lost || d["alive"] == false || d["stale"] == true
                    })
                })
            })
        })
    }

    /// Waits until both tallies count a vote from every prober on every endpoint again.
    pub fn wait_all_voting(&self) -> Duration {
        // Longer than the other waits, and a timeout names the missing votes: this is where a
        // CPU-starved mesh showed (see GOSSIP_MS).
        let within = 2 * SETTLE;
        let full = u64::try_from(39 * self.addr.len()).ok();
        let mut last = Vec::new();
        let waited = test_support::wait_until(within, || {
            last = (0..2).map(|a| self.status(a)).collect::<Vec<_>>();
            last.iter().all(|s| {
                s.as_ref()
                    .is_some_and(|s| s["votes_counted"].as_u64() == full)
            })
        });
        if let Some(waited) = waited {
            return waited;
        }
        // Say which votes are missing, so that a failure can be understood from the log: a
        // summary per aggregator first, then the missing votes of live members only (the dead
        // generations of the killed probers stay listed until chitchat forgets them).
        let mut summary = Vec::new();
        let mut missing = Vec::new();
        for (a, s) in last.iter().enumerate() {
            let Some(s) = s else {
                summary.push(format!("aggregator {a}: no /status"));
                continue;
            };
            let mut lacking = Vec::new();
            for p in s["pools"].as_array().into_iter().flatten() {
                for e in p["endpoints"].as_array().into_iter().flatten() {
                    for r in e["regions"].as_array().into_iter().flatten() {
                        for d in r["datacenters"].as_array().into_iter().flatten() {
                            if d["alive"] == true && (d["stale"] == true || d["healthy"].is_null())
                            {
                                lacking.push(format!(
                                    "  agg {a}: {}/{} {}/{} node {} stale {} healthy {}",
                                    p["name"],
                                    e["name"],
                                    r["region"],
                                    d["datacenter"],
                                    d["node"],
                                    d["stale"],
                                    d["healthy"]
                                ));
                            }
                        }
                    }
                }
            }
            summary.push(format!(
                "aggregator {a}: {} votes counted of {full:?}; {} live probers; {} votes of live \
                 probers missing or stale; gossip {}",
                s["votes_counted"],
                self.live_probers(a),
                lacking.len(),
                self.gossip_counters(a)
            ));
            lacking.truncate(25);
            missing.extend(lacking);
        }
        summary.extend(missing);
        let missing = summary;
        panic!(
            "timed out after {within:?} waiting for every prober voting on every endpoint:\n{}",
            missing.join("\n")
        );
    }

    /// Waits until both aggregators count all 39 probers live.
    pub fn wait_all_live(&mut self, within: Duration) -> Duration {
        test_support::wait_for("all 39 probers live on both aggregators", within, || {
            self.live_probers(0) == 39 && self.live_probers(1) == 39
        })
    }

    /// Waits until both aggregators call every endpoint healthy (at least the world's seven:
    /// a trial may have added a pool).
    pub fn wait_healthy(&self, within: Duration) -> Duration {
        // One /status per aggregator per check (it carries every vote: not small).
        test_support::wait_for("every endpoint healthy on both aggregators", within, || {
            (0..2).all(|a| {
                self.status(a).is_some_and(|s| {
                    let verdicts: Vec<&serde_json::Value> = s["pools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|p| p["endpoints"].as_array().into_iter().flatten())
                        .map(|e| &e["verdict"])
                        .collect();
                    verdicts.len() >= self.addr.len() && verdicts.iter().all(|v| *v == "healthy")
                })
            })
        })
    }

    /// Waits until both aggregators have logged a change of `endpoint` to `to` at or after
    /// `since_ms` (unix ms); returns the later one's delay after `since_ms` — the aggregators'
    /// own timestamps, so the figure does not include polling. Polls `/events` filtered by
    /// endpoint every 100 ms: tiny answers that do not load the aggregators being measured.
    pub fn wait_event(
        &self,
        endpoint: &str,
        to: &str,
        since_ms: u64,
        within: Duration,
    ) -> Option<Duration> {
        let start = Instant::now();
        let path = format!("/events?endpoint={endpoint}&since={since_ms}");
        let mut at = [None, None];
        while start.elapsed() < within {
            for (a, slot) in at.iter_mut().enumerate() {
                if slot.is_none() {
                    *slot = self
                        .world
                        .json("client", self.admin(a), &path)
                        .and_then(|e| e.as_array().cloned())
                        .and_then(|list| {
                            list.iter()
                                .find(|e| e["to"] == to)
                                .and_then(|e| e["at_ms"].as_u64())
                        });
                }
            }
            if let [Some(x), Some(y)] = at {
                return Some(Duration::from_millis(x.max(y).saturating_sub(since_ms)));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        println!("{endpoint} not {to} on both aggregators within {within:?} (seen at: {at:?})");
        let _ = self.wait_verdict(endpoint, to, Duration::ZERO);
        None
    }

    /// Waits until both aggregators give `endpoint` the verdict `want`; the slower one's time,
    /// or `None` (with what the probers say printed) when it does not come within `within`.
    pub fn wait_verdict(&self, endpoint: &str, want: &str, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        let mut seen = [None, None];
        while start.elapsed() < within {
            for (a, s) in seen.iter_mut().enumerate() {
                if s.is_none() && self.verdict(a, endpoint).as_deref() == Some(want) {
                    *s = Some(start.elapsed());
                }
            }
            if let [Some(x), Some(y)] = seen {
                return Some(x.max(y));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // What the probers say, to tell a stuck origin from a stuck mesh.
        let votes: Vec<String> = self
            .status(0)
            .and_then(|s| {
                s["pools"].as_array()?.iter().find_map(|p| {
                    p["endpoints"]
                        .as_array()?
                        .iter()
                        .find(|e| e["name"] == endpoint)
                        .map(|e| {
                            e["regions"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .flat_map(|r| {
                                    r["datacenters"].as_array().cloned().unwrap_or_default()
                                })
                                .map(|d| format!("{} {} {}", d["node"], d["healthy"], d["reason"]))
                                .collect()
                        })
                })
            })
            .unwrap_or_default();
        println!(
            "{endpoint} not {want} on both aggregators within {within:?} (seen: {seen:?}); votes: {votes:#?}"
        );
        None
    }
}
