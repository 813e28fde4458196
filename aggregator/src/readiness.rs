//! Whether an aggregator's answers can be trusted yet. Until the tally has a verdict for every
//! monitored endpoint, pools count as Unknown and take no traffic (as Cloudflare treats them),
//! so a freshly started aggregator would answer with its fallback pool, or nothing, for the
//! second or two it takes to hear the probers. `GET /readyz` says when it is ready, so that
//! whatever routes clients to it (a Kubernetes Service, an anycast announcer, a load balancer's
//! health check) waits; after the warm-up timeout it is ready whatever it knows, since an
//! aggregator that never becomes ready is an outage of its own.

use std::time::Duration;

use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::{HealthSnapshot, Verdict};
use serde::Serialize;

/// The answer of `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// Enabled, monitored endpoints the tally has no verdict for yet.
    pub unknown_endpoints: usize,
    pub up_for_ms: u64,
    pub reason: String,
}

/// Judges readiness from the current snapshot and how long the aggregator has been up.
pub fn assess(
    config: &Config,
    snapshot: &HealthSnapshot,
    up_for: Duration,
    warmup_timeout: Duration,
) -> Readiness {
    // Disabled pools and endpoints keep their verdict without votes: never a wait.
    let unknown_endpoints = config
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| p.enabled && p.is_monitored())
        .flat_map(|(pi, p)| {
            p.endpoints
                .iter()
                .enumerate()
                .filter(|(_, e)| e.enabled)
                .map(move |(ei, _)| (PoolId(pi), EndpointId(ei)))
        })
        .filter(|&(pool, endpoint)| snapshot.endpoint(pool, endpoint).verdict == Verdict::Unknown)
        .count();
    let (ready, reason) = if unknown_endpoints == 0 {
        (true, "every monitored endpoint has a verdict".to_string())
    } else if up_for >= warmup_timeout {
        (
            true,
            format!(
                "the warm-up timeout ({} s) has passed; {unknown_endpoints} endpoints still \
                 without a verdict count as Unknown",
                warmup_timeout.as_secs_f64()
            ),
        )
    } else {
        (
            false,
            format!("warming up: {unknown_endpoints} endpoints without a verdict yet"),
        )
    };
    Readiness {
        ready,
        unknown_endpoints,
        up_for_ms: u64::try_from(up_for.as_millis()).unwrap_or(u64::MAX),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;

    const CONFIG: &str = r#"
[[monitors]]
name = "http"
[[pools]]
name = "checked"
monitor = "http"
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "192.0.2.2" }, { name = "off", address = "192.0.2.3", enabled = false }]
[[pools]]
name = "unchecked"
origins = [{ name = "c", address = "192.0.2.4" }]
[[pools]]
name = "disabled"
monitor = "http"
enabled = false
origins = [{ name = "d", address = "192.0.2.5" }]
[[load_balancers]]
name = "www.example.test"
default_pools = ["checked", "unchecked"]
"#;

    fn config() -> Config {
        Config::parse(
            "test.toml",
            CONFIG,
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config")
    }

    fn with_verdicts(config: &Config, a: Verdict, b: Verdict) -> HealthSnapshot {
        let mut s = HealthSnapshot::initial(config);
        s.endpoints[0][0].verdict = a;
        s.endpoints[0][1].verdict = b;
        s
    }

    const TIMEOUT: Duration = Duration::from_secs(30);

    #[test]
    fn ready_once_every_enabled_monitored_endpoint_has_a_verdict() {
        let c = config();
        let early = Duration::from_millis(800);
        let r = assess(&c, &HealthSnapshot::initial(&c), early, TIMEOUT);
        assert_eq!((r.ready, r.unknown_endpoints), (false, 2), "{r:?}");
        let r = assess(
            &c,
            &with_verdicts(&c, Verdict::Healthy, Verdict::Unknown),
            early,
            TIMEOUT,
        );
        assert_eq!((r.ready, r.unknown_endpoints), (false, 1), "{r:?}");
        // Unhealthy is a verdict too; the disabled endpoint and pool, and the pool without a
        // monitor, are not waited for.
        let r = assess(
            &c,
            &with_verdicts(&c, Verdict::Healthy, Verdict::Unhealthy),
            early,
            TIMEOUT,
        );
        assert_eq!((r.ready, r.unknown_endpoints), (true, 0), "{r:?}");
        assert_eq!(r.up_for_ms, 800);
    }

    #[test]
    fn ready_after_the_warm_up_timeout_whatever_it_knows() {
        let c = config();
        let s = HealthSnapshot::initial(&c);
        let r = assess(&c, &s, TIMEOUT - Duration::from_millis(1), TIMEOUT);
        assert!(!r.ready, "{r:?}");
        let r = assess(&c, &s, TIMEOUT, TIMEOUT);
        assert!(r.ready && r.unknown_endpoints == 2, "{r:?}");
        assert!(r.reason.contains("warm-up timeout"), "{r:?}");
        // A zero timeout never waits.
        assert!(assess(&c, &s, Duration::ZERO, Duration::ZERO).ready);
    }
}
