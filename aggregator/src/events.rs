//! Health-change events: one JSON object each, with the votes behind it, kept in a bounded
//! ring for the admin API and written as a JSON line to the log.

use std::collections::VecDeque;

use serde::Serialize;

/// Events kept for the admin API.
pub const KEEP: usize = 10_000;

/// One region's count behind an endpoint change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RegionVotes {
    pub region: String,
    pub verdict: Option<bool>,
    pub healthy_dcs: u8,
    pub unhealthy_dcs: u8,
    pub silent_dcs: u8,
    pub datacenters: Vec<DatacenterVote>,
}

/// One prober node's vote.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DatacenterVote {
    pub datacenter: String,
    pub node: String,
    pub alive: bool,
    /// `None`: no result for this endpoint.
    pub healthy: Option<bool>,
    pub stale: bool,
    pub rtt_ms: Option<f64>,
    pub code: Option<u32>,
    pub reason: Option<String>,
}

/// A health change (Cloudflare's load-balancing event shape, plus the votes).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HealthEvent {
    pub at_ms: u64,
    /// `endpoint`, `pool` or `load_balancer`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub from: String,
    pub to: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionVotes>,
    /// A first verdict rather than news: the endpoint was never voted on, or the pool's state
    /// before still counted endpoints without a verdict (after a start). Not notified.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub initial: bool,
}

/// The ring of recent events.
#[derive(Debug, Default)]
pub struct EventLog {
    events: VecDeque<HealthEvent>,
}

/// Filters of `GET /events`.
#[derive(Debug, Default, Clone)]
pub struct EventFilter {
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    pub pool: Option<String>,
    pub endpoint: Option<String>,
}

impl EventLog {
    pub fn push(&mut self, event: HealthEvent) {
        if let Ok(line) = serde_json::to_string(&event) {
            println!("{line}");
        }
        if self.events.len() == KEEP {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    pub fn query(&self, f: &EventFilter) -> Vec<HealthEvent> {
        self.events
            .iter()
            .filter(|e| f.since_ms.is_none_or(|s| e.at_ms >= s))
            .filter(|e| f.until_ms.is_none_or(|u| e.at_ms <= u))
            .filter(|e| f.pool.as_ref().is_none_or(|p| e.pool.as_ref() == Some(p)))
            .filter(|e| {
                f.endpoint
                    .as_ref()
                    .is_none_or(|p| e.endpoint.as_ref() == Some(p))
            })
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}
