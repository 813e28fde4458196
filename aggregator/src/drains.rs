//! Drains shared by every aggregator: each publishes its admin API's decisions in gossip, and
//! the drains in force are, for every endpoint, the newest decision any live aggregator made —
//! so a drain (or undrain) made on one aggregator holds on all of them. Pure.

use std::collections::BTreeMap;

use lb_core::config::{Config, EndpointId, PoolId};
use prober::mesh::keys::DrainDecision;

/// The drains in force: (pool, endpoint) -> since (unix seconds). Decisions about names the
/// config does not know are ignored; of two decisions made at the same millisecond, the drain
/// wins (the cautious side).
pub fn in_force<'a>(
    config: &Config,
    decisions: impl Iterator<Item = &'a DrainDecision>,
) -> BTreeMap<(PoolId, EndpointId), u64> {
    let mut newest: BTreeMap<(PoolId, EndpointId), &DrainDecision> = BTreeMap::new();
    for d in decisions {
        let Some(p) = config.pool_by_name(&d.pool) else {
            continue;
        };
        let Some(e) = config.pool(p).endpoint_by_name(&d.endpoint) else {
            continue;
        };
        let slot = newest.entry((p, e)).or_insert(d);
        if (d.at_ms, d.draining) > (slot.at_ms, slot.draining) {
            *slot = d;
        }
    }
    newest
        .into_iter()
        .filter(|(_, d)| d.draining)
        .map(|(k, d)| (k, d.since))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
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
        let v = [d("a", true, 100, 1_000), d("a", false, 0, 2_000)];
        assert!(in_force(&c, v.iter()).is_empty());
        // Undrained, then drained again later: drained since the later drain.
        let v = [d("a", false, 0, 2_000), d("a", true, 3, 3_000)];
        assert_eq!(in_force(&c, v.iter()), BTreeMap::from([(a, 3)]));
        // A tie: the drain wins.
        let v = [d("a", false, 0, 5_000), d("a", true, 5, 5_000)];
        assert_eq!(in_force(&c, v.iter()), BTreeMap::from([(a, 5)]));
        // Unknown names (another config version) are ignored.
        let v = [d("zz", true, 1, 1)];
        assert!(in_force(&c, v.iter()).is_empty());
    }

    #[test]
    fn decisions_survive_the_gossip_encoding() {
        use prober::mesh::keys::{decode_drains, encode_drains};
        let v = vec![d("a", true, 100, 1_000), d("b", false, 0, 2_000)];
        assert_eq!(decode_drains(&encode_drains(&v)), v);
        assert!(decode_drains("web\ta\tx\n\nweb\tb\t1\t2\n").is_empty());
    }
}
