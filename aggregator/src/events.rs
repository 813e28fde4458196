//! Health-change events: one JSON object each, with the votes behind it, kept in a bounded
//! ring for the admin API and written as a JSON line to the log. [`from_changes`] turns a
//! tally's changes into events, without I/O.

use std::collections::VecDeque;

use lb_core::config::{Config, EndpointId, LbId, MemberRole, PoolId};
use lb_core::health::{HealthSnapshot, PoolState, Verdict};
use serde::Serialize;

use crate::tally::{HealthChange, LbState};

/// Events kept for the admin API.
pub const KEEP: usize = 10_000;

/// One region's count behind an endpoint change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RegionVotes {
    pub region: String,
    pub verdict: Option<bool>,
    pub healthy_dcs: u32,
    pub unhealthy_dcs: u32,
    pub silent_dcs: u32,
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
    /// How old the prober's results are, in seconds (the time since its progress last moved).
    pub age_s: f64,
    pub rtt_ms: Option<f64>,
    pub code: Option<u32>,
    pub reason: Option<String>,
}

/// What changed, and from which state to which; shown as `"kind": "endpoint" | "pool" |
/// "load_balancer"` with the names of what changed beside it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    Endpoint {
        pool: String,
        endpoint: String,
        from: Verdict,
        to: Verdict,
    },
    Pool {
        pool: String,
        from: PoolState,
        to: PoolState,
    },
    LoadBalancer {
        load_balancer: String,
        /// `None`: the load balancer had no state yet (shown as `unknown`).
        #[serde(serialize_with = "lb_state_or_unknown")]
        from: Option<LbState>,
        to: LbState,
    },
    /// A member of the pool's monitor group changed its own verdict on the endpoint (whether
    /// that changed the endpoint's is the endpoint's own event, in the same tally).
    Member {
        pool: String,
        endpoint: String,
        monitor: String,
        #[serde(serialize_with = "role_name")]
        role: MemberRole,
        from: Verdict,
        to: Verdict,
    },
    /// A reload took the endpoint out of the config (or changed what it is: its address,
    /// port, Host or monitor, so its votes no longer apply). `from` is its last verdict.
    EndpointRemoved {
        pool: String,
        endpoint: String,
        from: Verdict,
    },
}

fn role_name<S: serde::Serializer>(role: &MemberRole, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(role.name())
}

/// One member's verdict on an endpoint, shown with a group endpoint's change.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MemberVerdict {
    pub monitor: String,
    #[serde(serialize_with = "role_name")]
    pub role: MemberRole,
    pub verdict: Verdict,
    /// This member's change (in the same tally) is what moved the endpoint's verdict.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub changed: bool,
}

fn lb_state_or_unknown<S: serde::Serializer>(
    state: &Option<LbState>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(state.map_or("unknown", LbState::name))
}

impl Change {
    /// The pool of an endpoint or pool change.
    pub fn pool(&self) -> Option<&str> {
        match self {
            Change::Endpoint { pool, .. }
            | Change::Pool { pool, .. }
            | Change::Member { pool, .. }
            | Change::EndpointRemoved { pool, .. } => Some(pool),
            Change::LoadBalancer { .. } => None,
        }
    }

    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Change::Endpoint { endpoint, .. }
            | Change::Member { endpoint, .. }
            | Change::EndpointRemoved { endpoint, .. } => Some(endpoint),
            _ => None,
        }
    }

    /// The states before and after, by name.
    pub fn states(&self) -> (&'static str, &'static str) {
        match *self {
            Change::Endpoint { from, to, .. } | Change::Member { from, to, .. } => {
                (from.name(), to.name())
            }
            Change::Pool { from, to, .. } => (from.name(), to.name()),
            Change::LoadBalancer { from, to, .. } => {
                (from.map_or("unknown", LbState::name), to.name())
            }
            Change::EndpointRemoved { from, .. } => (from.name(), "removed"),
        }
    }

    /// Whether the subject had no state before: never voted on, or not yet tallied.
    pub fn from_unknown(&self) -> bool {
        match *self {
            Change::Endpoint { from, .. } | Change::Member { from, .. } => from == Verdict::Unknown,
            Change::Pool { from, .. } => from == PoolState::Unknown,
            Change::LoadBalancer { from, .. } => from.is_none(),
            Change::EndpointRemoved { .. } => false,
        }
    }

    /// Whether the change leaves its subject out of service: an endpoint or load balancer no
    /// longer healthy, a pool critical.
    pub fn is_down(&self) -> bool {
        match *self {
            Change::Endpoint { to, .. } | Change::Member { to, .. } => to != Verdict::Healthy,
            Change::Pool { to, .. } => to == PoolState::Critical,
            Change::LoadBalancer { to, .. } => to != LbState::Healthy,
            // Gone by the operator's hand, not out of service.
            Change::EndpointRemoved { .. } => false,
        }
    }
}

/// A health change (Cloudflare's load-balancing event shape, plus the votes).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HealthEvent {
    pub at_ms: u64,
    #[serde(flatten)]
    pub change: Change,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionVotes>,
    /// A monitor group endpoint's change: every enabled member's verdict, the ones whose
    /// change moved it marked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberVerdict>,
    /// A first verdict rather than news: the endpoint was never voted on, or the pool's state
    /// before still counted endpoints without a verdict (after a start). Not notified.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub initial: bool,
}

/// The events of one tally's changes, at `at_ms`. `before` is the snapshot the changes are
/// from; `votes` gives the votes behind one check's verdict on an endpoint (`check` indexes
/// `Pool::checks`).
pub fn from_changes(
    config: &Config,
    changes: &[HealthChange],
    before: &HealthSnapshot,
    at_ms: u64,
    votes: impl Fn(PoolId, usize, EndpointId) -> Vec<RegionVotes>,
) -> Vec<HealthEvent> {
    let events = Events {
        config,
        before,
        at_ms,
        votes,
    };
    changes
        .iter()
        .map(|change| match *change {
            HealthChange::Endpoint {
                pool,
                endpoint,
                from,
                to,
                ref members,
                ..
            } => events.endpoint(pool, endpoint, (from, to), members),
            HealthChange::Check {
                pool,
                endpoint,
                check,
                from,
                to,
                ..
            } => events.check(pool, endpoint, check, (from, to)),
            HealthChange::Pool { pool, from, to } => events.pool(pool, from, to),
            HealthChange::LoadBalancer { lb, from, to } => events.load_balancer(lb, from, to),
        })
        .collect()
}

/// What the events of one tally are made from: the config naming what changed, the snapshot
/// before the tally (for first verdicts), the time, and where the votes come from.
struct Events<'a, V> {
    config: &'a Config,
    before: &'a HealthSnapshot,
    at_ms: u64,
    votes: V,
}

impl<V: Fn(PoolId, usize, EndpointId) -> Vec<RegionVotes>> Events<'_, V> {
    /// An endpoint's verdict changed: with the votes behind it for a pool with one monitor,
    /// with each member's verdict for a monitor group's.
    fn endpoint(
        &self,
        pool: PoolId,
        endpoint: EndpointId,
        (from, to): (Verdict, Verdict),
        members: &[(Verdict, bool)],
    ) -> HealthEvent {
        HealthEvent {
            at_ms: self.at_ms,
            change: Change::Endpoint {
                pool: self.config.pool(pool).name.clone(),
                endpoint: self.endpoint_name(pool, endpoint),
                from,
                to,
            },
            regions: if members.is_empty() {
                (self.votes)(pool, 0, endpoint)
            } else {
                Vec::new()
            },
            members: members
                .iter()
                .enumerate()
                .map(|(ci, &(verdict, changed))| {
                    let (monitor, role) = self.member(pool, ci);
                    MemberVerdict {
                        monitor,
                        role,
                        verdict,
                        changed,
                    }
                })
                .collect(),
            initial: from == Verdict::Unknown,
        }
    }

    /// A monitor group member's own verdict on an endpoint changed, with the votes behind it.
    fn check(
        &self,
        pool: PoolId,
        endpoint: EndpointId,
        check: usize,
        (from, to): (Verdict, Verdict),
    ) -> HealthEvent {
        let (monitor, role) = self.member(pool, check);
        HealthEvent {
            at_ms: self.at_ms,
            change: Change::Member {
                pool: self.config.pool(pool).name.clone(),
                endpoint: self.endpoint_name(pool, endpoint),
                monitor,
                role,
                from,
                to,
            },
            regions: (self.votes)(pool, check, endpoint),
            members: Vec::new(),
            initial: from == Verdict::Unknown,
        }
    }

    /// A pool's state changed: a first verdict while its state still counted endpoints
    /// without one.
    fn pool(&self, pool: PoolId, from: PoolState, to: PoolState) -> HealthEvent {
        HealthEvent {
            at_ms: self.at_ms,
            change: Change::Pool {
                pool: self.config.pool(pool).name.clone(),
                from,
                to,
            },
            regions: Vec::new(),
            members: Vec::new(),
            initial: self.had_unknown(pool),
        }
    }

    /// A load balancer's state changed: a first verdict when it had none, or while a pool it
    /// uses still counted endpoints without one.
    fn load_balancer(&self, lb: LbId, from: Option<LbState>, to: LbState) -> HealthEvent {
        let config = self.config;
        HealthEvent {
            at_ms: self.at_ms,
            change: Change::LoadBalancer {
                load_balancer: config.lb(lb).name.clone(),
                from,
                to,
            },
            regions: Vec::new(),
            members: Vec::new(),
            initial: from.is_none()
                || (0..config.pools.len()).any(|p| {
                    config.lb(lb).settings.uses_pool(PoolId(p)) && self.had_unknown(PoolId(p))
                }),
        }
    }

    /// An endpoint's name in the config.
    fn endpoint_name(&self, pool: PoolId, endpoint: EndpointId) -> String {
        self.config.pool(pool).endpoints[endpoint.0].name.clone()
    }

    /// The monitor and role of a pool's check (`Pool::checks`).
    fn member(&self, pool: PoolId, check: usize) -> (String, MemberRole) {
        let p = self.config.pool(pool);
        let c = &p.checks[check];
        (self.config.check_monitor(c).name.clone(), c.role)
    }

    /// Whether a pool's state so far still counted endpoints without a verdict: its next
    /// change is a first verdict, not news.
    fn had_unknown(&self, pool: PoolId) -> bool {
        let p = self.config.pool(pool);
        p.is_monitored()
            && p.endpoints.iter().enumerate().any(|(i, e)| {
                e.enabled && self.before.endpoint(pool, EndpointId(i)).verdict == Verdict::Unknown
            })
    }
}

/// One event per endpoint a reload from `old` to `new` removed (`removed`: their old
/// positions), with its last verdict in `before`.
pub fn removed(
    old: &Config,
    removed: &[(PoolId, EndpointId)],
    before: &HealthSnapshot,
    at_ms: u64,
) -> Vec<HealthEvent> {
    removed
        .iter()
        .filter_map(|&(pool, endpoint)| {
            let p = old.pools.get(pool.0)?;
            Some(HealthEvent {
                at_ms,
                change: Change::EndpointRemoved {
                    pool: p.name.clone(),
                    endpoint: p.endpoints.get(endpoint.0)?.name.clone(),
                    from: before.endpoint(pool, endpoint).verdict,
                },
                regions: Vec::new(),
                members: Vec::new(),
                initial: false,
            })
        })
        .collect()
}

impl HealthEvent {
    /// The event as a log record with its fields (`--log-format json`): what changed, from
    /// and to, and the votes behind it as JSON.
    fn log(&self) {
        let change = serde_json::to_value(&self.change).unwrap_or_default();
        let field = |name: &str| {
            change
                .get(name)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let votes = serde_json::to_string(&self.regions).unwrap_or_default();
        let members = serde_json::to_string(&self.members).unwrap_or_default();
        tracing::info!(
            target: "meshlb::health",
            at_ms = self.at_ms,
            kind = field("kind").as_deref(),
            load_balancer = field("load_balancer").as_deref(),
            pool = field("pool").as_deref(),
            endpoint = field("endpoint").as_deref(),
            monitor = field("monitor").as_deref(),
            from = field("from").as_deref(),
            to = field("to").as_deref(),
            initial = self.initial,
            votes = %votes,
            members = %members,
            "health change"
        );
    }
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
        if meshlb_node::logging::is_json() {
            event.log();
        } else if let Ok(line) = serde_json::to_string(&event) {
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
            .filter(|e| f.pool.as_deref().is_none_or(|p| e.change.pool() == Some(p)))
            .filter(|e| {
                f.endpoint
                    .as_deref()
                    .is_none_or(|p| e.change.endpoint() == Some(p))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn event(change: Change) -> HealthEvent {
        HealthEvent {
            at_ms: 7,
            change,
            regions: Vec::new(),
            members: Vec::new(),
            initial: false,
        }
    }

    /// The JSON shape operators' tooling reads: the kind and names first, then the states.
    #[test]
    fn events_are_shown_as_they_always_were() {
        let endpoint = event(Change::Endpoint {
            pool: "web".into(),
            endpoint: "one".into(),
            from: Verdict::Healthy,
            to: Verdict::Unhealthy,
        });
        assert_eq!(
            serde_json::to_string(&endpoint).expect("json"),
            r#"{"at_ms":7,"kind":"endpoint","pool":"web","endpoint":"one","from":"healthy","to":"unhealthy"}"#
        );
        let pool = event(Change::Pool {
            pool: "web".into(),
            from: PoolState::Healthy,
            to: PoolState::NoHealth,
        });
        assert_eq!(
            serde_json::to_string(&pool).expect("json"),
            r#"{"at_ms":7,"kind":"pool","pool":"web","from":"healthy","to":"no_health"}"#
        );
        let lb = HealthEvent {
            initial: true,
            ..event(Change::LoadBalancer {
                load_balancer: "www.example.test".into(),
                from: None,
                to: LbState::Critical,
            })
        };
        assert_eq!(
            serde_json::to_string(&lb).expect("json"),
            r#"{"at_ms":7,"kind":"load_balancer","load_balancer":"www.example.test","from":"unknown","to":"critical","initial":true}"#
        );
        assert_eq!(lb.change.states(), ("unknown", "critical"));
        assert!(lb.change.is_down() && pool.change.pool() == Some("web"));
    }
}
