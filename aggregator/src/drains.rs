//! Drains shared by every aggregator: each publishes in gossip the newest decision it knows
//! per endpoint — its admin API's, or one it adopted from another aggregator — and the drains
//! in force are, for every endpoint, the newest decision any live aggregator publishes. So a
//! drain (or undrain) made on one aggregator holds on all of them, and outlives the aggregator
//! it was made on as long as one other lives. Pure.
//!
//! What another node publishes is checked first (docs/security.md): only aggregators'
//! decisions count (the mesh view reads `drains` from aggregators only), and a decision
//! stamped beyond now plus `MAX_DRAIN_SKEW_MS` is refused, so that no node can publish one
//! that nothing could ever supersede. A decision made on this aggregator's admin API is
//! stamped after every decision it knows about the endpoint (`stamp`), so an operator can
//! always override.

use std::collections::BTreeMap;

use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::HealthSnapshot;
use mesh::keys::DrainDecision;

pub type Decisions = BTreeMap<(PoolId, EndpointId), DrainDecision>;

/// Drains in force: (pool, endpoint) -> since (unix seconds).
pub type Since = BTreeMap<(PoolId, EndpointId), u64>;

/// How far in the future (by this aggregator's clock) a decision may be stamped: the clock
/// skew the sealed transport tolerates (`mesh::seal::MAX_CLOCK_SKEW_MS`).
pub const MAX_DRAIN_SKEW_MS: u64 = mesh::seal::MAX_CLOCK_SKEW_MS;

/// Whether a decision from another node is believable at `now_ms`: neither made nor begun
/// beyond now plus the skew.
pub fn plausible(d: &DrainDecision, now_ms: u64) -> bool {
    let horizon = now_ms.saturating_add(MAX_DRAIN_SKEW_MS);
    d.at_ms <= horizon && d.since.saturating_mul(1000) <= horizon
}

/// The time to stamp a new decision about an endpoint with, given the newest one known about
/// it: now, or just after that one if it is (plausibly) ahead of this clock.
pub fn stamp(now_ms: u64, newest_known: Option<&DrainDecision>) -> u64 {
    newest_known.map_or(now_ms, |d| now_ms.max(d.at_ms.saturating_add(1)))
}

/// Whether `d` supersedes `than`: made later, or at the same millisecond and a drain (the
/// cautious side).
fn newer(d: &DrainDecision, than: &DrainDecision) -> bool {
    (d.at_ms, d.draining) > (than.at_ms, than.draining)
}

/// The newest decision per endpoint. Decisions about names the config does not know (another
/// config version) are ignored.
pub fn newest<'a>(
    config: &Config,
    decisions: impl Iterator<Item = &'a DrainDecision>,
) -> Decisions {
    let mut newest = Decisions::new();
    for d in decisions {
        let Some(p) = config.pool_by_name(&d.pool) else {
            continue;
        };
        let Some(e) = config.pool(p).endpoint_by_name(&d.endpoint) else {
            continue;
        };
        match newest.get(&(p, e)) {
            Some(slot) if !newer(d, slot) => {}
            _ => {
                newest.insert((p, e), d.clone());
            }
        }
    }
    newest
}

/// The drains in force: (pool, endpoint) -> since (unix seconds).
pub fn in_force(newest: &Decisions) -> BTreeMap<(PoolId, EndpointId), u64> {
    newest
        .iter()
        .filter(|(_, d)| d.draining)
        .map(|(&k, d)| (k, d.since))
        .collect()
}

/// Marks the drained endpoints in a tally's snapshot: they take no new traffic, and their
/// sessions drain for the load balancer's `drain_duration` (lb-core's affinity).
pub fn apply(snapshot: &mut HealthSnapshot, in_force: &BTreeMap<(PoolId, EndpointId), u64>) {
    for (&(pool, endpoint), &since) in in_force {
        if let Some(e) = snapshot
            .endpoints
            .get_mut(pool.0)
            .and_then(|p| p.get_mut(endpoint.0))
        {
            e.disabled_at = Some(since);
        }
    }
}

/// The endpoints the config disables (`enabled = false`, on the endpoint or its pool) ->
/// since when (unix seconds), so they drain like a drain through `/drain`: no new traffic,
/// sessions kept for `drain_duration`. `before` is the previous generation's config and its
/// map: an endpoint disabled there already keeps its start; one enabled there starts draining
/// `now`; one new to the config, or disabled in the config a node starts with, has nothing to
/// drain (since 0).
pub fn from_config(config: &Config, before: Option<(&Config, &Since)>, now: u64) -> Since {
    let mut was: BTreeMap<(PoolId, EndpointId), Option<u64>> = BTreeMap::new();
    if let Some((old, drains)) = before {
        let map = lb_core::config::Renumbering::between(old, config);
        for (from, to) in map.kept() {
            was.insert(to, drains.get(&from).copied());
        }
    }
    let mut out = BTreeMap::new();
    for (pi, p) in config.pools.iter().enumerate() {
        for (ei, e) in p.endpoints.iter().enumerate() {
            if p.enabled && e.enabled {
                continue;
            }
            let key = (PoolId(pi), EndpointId(ei));
            let since = match was.get(&key) {
                Some(Some(since)) => *since,
                Some(None) => now,
                None => 0,
            };
            out.insert(key, since);
        }
    }
    out
}

/// The drains of both kinds together: an endpoint drained both ways drains from the earlier.
pub fn merged(admin: &Since, config: &Since) -> Since {
    let mut out = admin.clone();
    for (&k, &since) in config {
        out.entry(k)
            .and_modify(|s| *s = (*s).min(since))
            .or_insert(since);
    }
    out
}

/// Takes into `own` (what this aggregator publishes) every decision newer than its own, so
/// the decision is still published when the aggregator that made it is gone. Returns whether
/// `own` changed.
pub fn adopt(own: &mut Decisions, newest: &Decisions) -> bool {
    let mut changed = false;
    for (k, d) in newest {
        if own.get(k).is_none_or(|mine| newer(d, mine)) {
            own.insert(*k, d.clone());
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn drained_endpoints_are_marked_in_the_snapshot() {
        let c = config();
        let mut snapshot = HealthSnapshot::initial(&c);
        let in_force = BTreeMap::from([((PoolId(0), EndpointId(1)), 1_700_000_000)]);
        apply(&mut snapshot, &in_force);
        assert_eq!(
            snapshot.endpoint(PoolId(0), EndpointId(0)).disabled_at,
            None
        );
        assert_eq!(
            snapshot.endpoint(PoolId(0), EndpointId(1)).disabled_at,
            Some(1_700_000_000)
        );
        // A drain of an endpoint the snapshot does not have changes nothing.
        apply(
            &mut snapshot,
            &BTreeMap::from([((PoolId(9), EndpointId(0)), 1)]),
        );
    }

    /// One pool `web` with endpoints `a` and `b` (also the state file's tests').
    pub(crate) fn config() -> Config {
        Config::parse(
            "t.toml",
            r#"
[[pools]]
name = "web"
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "192.0.2.2" }]
[[load_balancers]]
name = "www.example.test"
default_pools = ["web"]
"#,
            &lb_core::regions_table::RegionsTable::embedded().expect("regions"),
        )
        .expect("valid")
    }

    fn d(endpoint: &str, draining: bool, since: u64, at_ms: u64) -> DrainDecision {
        DrainDecision {
            pool: "web".into(),
            endpoint: endpoint.into(),
            draining,
            since,
            at_ms,
        }
    }

    #[test]
    fn the_newest_decision_wins_whoever_made_it() {
        let c = config();
        let a = (PoolId(0), EndpointId(0));
        // Drained on one aggregator, undrained later on another: not drained.
        let force = |v: &[DrainDecision]| in_force(&newest(&c, v.iter()));
        let v = [d("a", true, 100, 1_000), d("a", false, 0, 2_000)];
        assert!(force(&v).is_empty());
        // Undrained, then drained again later: drained since the later drain.
        let v = [d("a", false, 0, 2_000), d("a", true, 3, 3_000)];
        assert_eq!(force(&v), BTreeMap::from([(a, 3)]));
        // In either order.
        let v = [d("a", true, 3, 3_000), d("a", false, 0, 2_000)];
        assert_eq!(force(&v), BTreeMap::from([(a, 3)]));
        // A tie: the drain wins.
        let v = [d("a", false, 0, 5_000), d("a", true, 5, 5_000)];
        assert_eq!(force(&v), BTreeMap::from([(a, 5)]));
        // Unknown names (another config version) are ignored.
        let v = [d("zz", true, 1, 1)];
        assert!(force(&v).is_empty());
    }

    #[test]
    fn future_stamped_decisions_are_refused_and_the_operator_always_wins() {
        let now = 1_800_000_000_000;
        let forged = d("a", true, 10, u64::MAX);
        assert!(!plausible(&forged, now), "stamped at the end of time");
        assert!(
            !plausible(&d("a", true, u64::MAX / 1000, now), now),
            "begun in the future"
        );
        assert!(plausible(&d("a", true, 10, now + MAX_DRAIN_SKEW_MS), now));
        assert!(!plausible(
            &d("a", true, 10, now + MAX_DRAIN_SKEW_MS + 1),
            now
        ));
        // A decision a little ahead of this clock (within the skew) is still overridden.
        let ahead = d("a", true, 10, now + 60_000);
        let undrain = d("a", false, 0, stamp(now, Some(&ahead)));
        assert!(newer(&undrain, &ahead));
        assert_eq!(stamp(now, None), now);
        assert_eq!(stamp(now, Some(&d("a", true, 10, now - 5))), now);
    }

    #[test]
    fn adopted_decisions_outlive_the_aggregator_that_made_them() {
        let c = config();
        let (a, b) = ((PoolId(0), EndpointId(0)), (PoolId(0), EndpointId(1)));
        // Aggregator 1 drained a; aggregator 2 had undrained b long ago.
        let from_1 = [d("a", true, 10, 10_000)];
        let mut own_2 = Decisions::from([(b, d("b", false, 0, 1_000))]);
        let seen = newest(&c, from_1.iter().chain(own_2.values()));
        assert!(adopt(&mut own_2, &seen));
        assert!(!adopt(&mut own_2, &seen), "nothing new the second time");
        // Aggregator 1 is gone: what 2 publishes alone still drains a.
        assert_eq!(
            in_force(&newest(&c, own_2.values())),
            BTreeMap::from([(a, 10)])
        );
        // A newer decision of 2's own is never replaced by an older one it sees.
        own_2.insert(a, d("a", false, 0, 20_000));
        assert!(!adopt(&mut own_2, &newest(&c, from_1.iter())));
        assert!(in_force(&newest(&c, own_2.values())).is_empty());
    }

    #[test]
    fn an_endpoint_the_config_disables_drains_from_the_reload_that_disabled_it() {
        let c = config();
        let text = |a: &str, b: &str| {
            format!("[[pools]]\nname = \"web\"\norigins = [{{ name = \"a\", address = \"192.0.2.1\", enabled = {a} }}, {{ name = \"b\", address = \"192.0.2.2\", enabled = {b} }}]\n[[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"web\"]\n")
        };
        let parse = |t: String| {
            Config::parse(
                "t.toml",
                &t,
                &lb_core::regions_table::RegionsTable::embedded().expect("regions"),
            )
            .expect("valid")
        };
        let (a, b) = ((PoolId(0), EndpointId(0)), (PoolId(0), EndpointId(1)));
        // Disabled in the config a node starts with: nothing to drain.
        let off = parse(text("true", "false"));
        assert_eq!(from_config(&off, None, 100), BTreeMap::from([(b, 0)]));
        // Disabled by a reload: drains from the reload.
        let first = from_config(&c, None, 100);
        assert!(first.is_empty());
        let second = from_config(&off, Some((&c, &first)), 200);
        assert_eq!(second, BTreeMap::from([(b, 200)]));
        // Still disabled at the next reload: keeps its start.
        let third = from_config(&off, Some((&off, &second)), 300);
        assert_eq!(third, BTreeMap::from([(b, 200)]));
        // Enabled again: no drain; the pool disabled: every endpoint drains.
        assert!(from_config(&c, Some((&off, &third)), 400).is_empty());
        let pool_off = parse(
            text("true", "true").replace("name = \"web\"\n", "name = \"web\"\nenabled = false\n"),
        );
        assert_eq!(
            from_config(&pool_off, Some((&c, &first)), 500),
            BTreeMap::from([(a, 500), (b, 500)])
        );
        // Drained both ways: from the earlier.
        let admin = BTreeMap::from([(b, 150)]);
        assert_eq!(merged(&admin, &second), BTreeMap::from([(b, 150)]));
        assert_eq!(merged(&BTreeMap::new(), &second), second);
    }

    #[test]
    fn decisions_survive_the_gossip_encoding() {
        use mesh::keys::{decode_drains, encode_drains};
        let v = vec![d("a", true, 100, 1_000), d("b", false, 0, 2_000)];
        assert_eq!(decode_drains(&encode_drains(&v)), v);
        assert!(decode_drains("web\ta\tx\n\nweb\tb\t1\t2\n").is_empty());
    }
}
