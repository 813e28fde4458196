//! Which health changes a channel hears about, and the words and JSON they are sent in — pure,
//! so every filter case is tested without a server.

use std::time::Duration;

use lb_core::config::{Config, PoolId};
use serde::Serialize;

use lb_core::health::{PoolState, Verdict};

use crate::events::{Change, HealthEvent};

/// Whether `event` passes the pool's `notification_filter` and the channel's pool list.
/// Endpoint and pool changes only; first verdicts after a start are not news.
pub fn wanted(config: &Config, channel_pools: &[PoolId], event: &HealthEvent) -> bool {
    if event.initial || event.change.from_unknown() {
        return false;
    }
    let Some(pool) = event.change.pool().and_then(|p| config.pool_by_name(p)) else {
        return false;
    };
    if !channel_pools.is_empty() && !channel_pools.contains(&pool) {
        return false;
    }
    let filter = config.pool(pool).notification_filter;
    match event.change {
        // A monitor group member's own change is news about the endpoint, monitoring_only
        // members' included (they are alerted on, never decide).
        Change::Endpoint { to, .. } | Change::Member { to, .. } => {
            filter.origin.passes(to == Verdict::Healthy)
        }
        // A pool is unhealthy when critical (below minimum_origins); degraded still serves.
        Change::Pool { to, .. } => filter.pool.passes(to != PoolState::Critical),
        // Made by the operator's reload, not news of health.
        Change::LoadBalancer { .. } | Change::EndpointRemoved { .. } => false,
    }
}

/// The changes of a batch that a channel should get.
pub fn select<'a>(
    config: &Config,
    channel_pools: &[PoolId],
    batch: &'a [HealthEvent],
) -> Vec<&'a HealthEvent> {
    batch
        .iter()
        .filter(|e| wanted(config, channel_pools, e))
        .collect()
}

fn line(e: &HealthEvent) -> String {
    let subject = match &e.change {
        Change::Endpoint { pool, endpoint, .. }
        | Change::EndpointRemoved { pool, endpoint, .. } => {
            format!("endpoint {endpoint} of pool {pool}")
        }
        Change::Member {
            pool,
            endpoint,
            monitor,
            role,
            ..
        } => format!(
            "monitor {monitor} ({}) on endpoint {endpoint} of pool {pool}",
            role.name()
        ),
        Change::Pool { pool, .. } => format!("pool {pool}"),
        Change::LoadBalancer { .. } => "load balancer".to_string(),
    };
    let votes: Vec<String> = e
        .regions
        .iter()
        .map(|r| {
            format!(
                "{} {}/{}/{}",
                r.region, r.healthy_dcs, r.unhealthy_dcs, r.silent_dcs
            )
        })
        .collect();
    let (from, to) = e.change.states();
    let mut s = format!("{subject}: {from} -> {to}");
    if !e.members.is_empty() {
        let members: Vec<String> = e
            .members
            .iter()
            .map(|m| {
                format!(
                    "{} {}{}",
                    m.monitor,
                    m.verdict.name(),
                    if m.changed { " (changed)" } else { "" }
                )
            })
            .collect();
        s.push_str(&format!(" (monitor group: {})", members.join(", ")));
    }
    if !votes.is_empty() {
        s.push_str(&format!(
            " (regions healthy/unhealthy/silent datacenters: {})",
            votes.join(", ")
        ));
    }
    for r in &e.regions {
        for d in r.datacenters.iter().filter(|d| d.healthy == Some(false)) {
            if let Some(reason) = &d.reason {
                s.push_str(&format!("\n    {} {}: {reason}", r.region, d.datacenter));
            }
        }
    }
    s
}

/// Subject and plain-text body of an email.
pub fn email_text(node: &str, events: &[&HealthEvent]) -> (String, String) {
    let down = events.iter().filter(|e| e.change.is_down()).count();
    let up = events.len() - down;
    let subject = match events {
        [one] => format!("[meshlb] {}", line(one).lines().next().unwrap_or_default()),
        _ => format!(
            "[meshlb] {} health changes ({down} down, {up} up)",
            events.len()
        ),
    };
    let mut body = format!("Health changes seen by aggregator {node}:\n\n");
    for e in events {
        body.push_str(&format!("- {} (unix ms {})\n", line(e), e.at_ms));
    }
    body.push_str("\nThe votes behind each change: GET /events on the aggregator's admin API.\n");
    (subject, body)
}

#[derive(Serialize)]
pub struct WebhookBody<'a> {
    pub source: &'static str,
    pub aggregator: &'a str,
    pub events: &'a [&'a HealthEvent],
}

/// The JSON a webhook receives.
pub fn webhook_json(node: &str, events: &[&HealthEvent]) -> Vec<u8> {
    serde_json::to_vec(&WebhookBody {
        source: "meshlb",
        aggregator: node,
        events,
    })
    .unwrap_or_default()
}

/// Wait before attempt `n` (1-based; the first attempt does not wait): 1 s, 2 s, 4 s ...
/// capped at 60 s.
pub fn backoff(attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(2).min(6);
    Duration::from_secs((1u64 << exp).min(60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::regions_table::RegionsTable;

    fn config(filter: &str) -> Config {
        let text = format!(
            r#"
[[monitors]]
name = "m"
[[pools]]
name = "eu"
monitor = "m"
origins = [{{ name = "a", address = "192.0.2.1" }}]
{filter}
[[pools]]
name = "us"
monitor = "m"
origins = [{{ name = "b", address = "192.0.2.2" }}]
[[load_balancers]]
name = "www.example.test"
default_pools = ["eu", "us"]
"#
        );
        Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions")).expect("valid")
    }

    fn verdict(name: &str) -> Verdict {
        match name {
            "healthy" => Verdict::Healthy,
            "unhealthy" => Verdict::Unhealthy,
            _ => Verdict::Unknown,
        }
    }

    fn pool_state(name: &str) -> PoolState {
        match name {
            "healthy" => PoolState::Healthy,
            "degraded" => PoolState::Degraded,
            "critical" => PoolState::Critical,
            _ => PoolState::Unknown,
        }
    }

    /// A change of `kind` in `pool` (an endpoint change is of its endpoint `a`).
    fn event(kind: &'static str, pool: &str, from: &str, to: &str) -> HealthEvent {
        let pool = pool.to_string();
        let change = match kind {
            "endpoint" => Change::Endpoint {
                pool,
                endpoint: "a".to_string(),
                from: verdict(from),
                to: verdict(to),
            },
            "pool" => Change::Pool {
                pool,
                from: pool_state(from),
                to: pool_state(to),
            },
            _ => Change::LoadBalancer {
                load_balancer: "www.example.test".to_string(),
                from: Some(crate::tally::LbState::Healthy),
                to: crate::tally::LbState::Critical,
            },
        };
        HealthEvent {
            at_ms: 1,
            change,
            regions: Vec::new(),
            members: Vec::new(),
            initial: false,
        }
    }

    #[test]
    fn without_a_filter_every_change_but_first_verdicts_passes() {
        let c = config("");
        assert!(wanted(
            &c,
            &[],
            &event("endpoint", "eu", "healthy", "unhealthy")
        ));
        assert!(wanted(
            &c,
            &[],
            &event("endpoint", "eu", "unhealthy", "healthy")
        ));
        assert!(wanted(&c, &[], &event("pool", "eu", "healthy", "critical")));
        assert!(!wanted(
            &c,
            &[],
            &event("endpoint", "eu", "unknown", "healthy")
        ));
        assert!(!wanted(
            &c,
            &[],
            &event("load_balancer", "eu", "healthy", "fallback")
        ));
        assert!(!wanted(
            &c,
            &[],
            &event("endpoint", "nowhere", "healthy", "unhealthy")
        ));
    }

    #[test]
    fn first_verdicts_after_a_start_are_not_news() {
        let c = config("");
        let first = HealthEvent {
            initial: true,
            ..event("pool", "eu", "degraded", "healthy")
        };
        assert!(!wanted(&c, &[], &first));
        assert!(wanted(&c, &[], &event("pool", "eu", "degraded", "healthy")));
    }

    #[test]
    fn cloudflare_filter_semantics() {
        let c = config(
            "notification_filter = { origin = { healthy = false }, pool = { disable = true } }",
        );
        assert!(wanted(
            &c,
            &[],
            &event("endpoint", "eu", "healthy", "unhealthy")
        ));
        assert!(!wanted(
            &c,
            &[],
            &event("endpoint", "eu", "unhealthy", "healthy")
        ));
        assert!(!wanted(
            &c,
            &[],
            &event("pool", "eu", "healthy", "critical")
        ));
        // Another pool's filter is its own.
        assert!(wanted(&c, &[], &event("pool", "us", "healthy", "critical")));
        let c = config("notification_filter = { pool = { healthy = true } }");
        assert!(wanted(
            &c,
            &[],
            &event("pool", "eu", "critical", "degraded")
        ));
        assert!(!wanted(
            &c,
            &[],
            &event("pool", "eu", "healthy", "critical")
        ));
        let c = config("notification_filter = { origin = { disable = true } }");
        assert!(!wanted(
            &c,
            &[],
            &event("endpoint", "eu", "healthy", "unhealthy")
        ));
    }

    #[test]
    fn a_channel_restricted_to_pools_hears_only_them() {
        let c = config("");
        let us = c.pool_by_name("us").expect("us");
        let batch = vec![
            event("endpoint", "eu", "healthy", "unhealthy"),
            event("pool", "us", "healthy", "critical"),
        ];
        let got = select(&c, &[us], &batch);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].change.pool(), Some("us"));
        assert_eq!(select(&c, &[], &batch).len(), 2);
    }

    #[test]
    fn email_and_webhook_bodies() {
        let a = event("endpoint", "eu", "healthy", "unhealthy");
        let b = event("pool", "eu", "healthy", "critical");
        let (subject, body) = email_text("agg-1", &[&a]);
        assert_eq!(
            subject,
            "[meshlb] endpoint a of pool eu: healthy -> unhealthy"
        );
        assert!(body.contains("agg-1"));
        let (subject, body) = email_text("agg-1", &[&a, &b]);
        assert_eq!(subject, "[meshlb] 2 health changes (2 down, 0 up)");
        assert!(body.contains("pool eu: healthy -> critical"));
        let json: serde_json::Value =
            serde_json::from_slice(&webhook_json("agg-1", &[&a, &b])).expect("json");
        assert_eq!(json["source"], "meshlb");
        assert_eq!(json["events"][0]["endpoint"], "a");
        assert_eq!(json["events"][1]["to"], "critical");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let waits: Vec<u64> = (1..=10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, vec![1, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
