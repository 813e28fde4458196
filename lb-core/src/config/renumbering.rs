//! Where a reload moved each pool and endpoint. Pools and endpoints are positional
//! (`PoolId`, `EndpointId`), so state kept across a reload — live request and connection
//! counts, header-affinity sessions, drains — is carried through this map, never by position.
//! An endpoint is the same origin when its pool's name, its own name, its address and its port
//! are the same; anything else is a new origin, and what was bound to the old one is dropped.

use super::{Config, EndpointId, PoolId};

/// Old positions to new ones, from one config to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renumbering {
    pools: Vec<Option<PoolId>>,
    /// `endpoints[old pool][old endpoint]`.
    endpoints: Vec<Vec<Option<(PoolId, EndpointId)>>>,
}

impl Renumbering {
    pub fn between(old: &Config, new: &Config) -> Renumbering {
        let pools: Vec<Option<PoolId>> = old
            .pools
            .iter()
            .map(|p| new.pool_by_name(&p.name))
            .collect();
        let endpoints = old
            .pools
            .iter()
            .zip(&pools)
            .map(|(p, to)| {
                p.endpoints
                    .iter()
                    .map(|e| {
                        let to = (*to)?;
                        let np = new.pool(to);
                        let ne = np.endpoint_by_name(&e.name)?;
                        let same = &np.endpoints[ne.0];
                        (same.address == e.address && same.port == e.port).then_some((to, ne))
                    })
                    .collect()
            })
            .collect();
        Renumbering { pools, endpoints }
    }

    /// The new position of an old pool, when the new config has a pool by its name.
    pub fn pool(&self, old: PoolId) -> Option<PoolId> {
        self.pools.get(old.0).copied().flatten()
    }

    /// The new position of an old endpoint, when it is the same origin.
    pub fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> Option<(PoolId, EndpointId)> {
        self.endpoints
            .get(pool.0)
            .and_then(|p| p.get(endpoint.0))
            .copied()
            .flatten()
    }

    /// Every endpoint that is the same origin in both configs: (old, new).
    pub fn kept(&self) -> impl Iterator<Item = ((PoolId, EndpointId), (PoolId, EndpointId))> + '_ {
        self.endpoints.iter().enumerate().flat_map(|(pi, p)| {
            p.iter()
                .enumerate()
                .filter_map(move |(ei, to)| to.map(|to| ((PoolId(pi), EndpointId(ei)), to)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RegionsTable;

    fn config(pools: &str) -> Config {
        let text = format!(
            "{pools}\n[[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"p\"]\n"
        );
        Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions"))
            .expect("config parses")
    }

    #[test]
    fn endpoints_follow_their_names_and_addresses_not_their_positions() {
        let old = config(
            "[[pools]]\nname = \"p\"\nendpoints = [{ name = \"a\", address = \"127.0.0.1\" }, { name = \"b\", address = \"127.0.0.2\" }, { name = \"c\", address = \"127.0.0.3\" }]\n[[pools]]\nname = \"gone\"\nendpoints = [{ name = \"a\", address = \"127.0.0.1\" }]",
        );
        let new = config(
            "[[pools]]\nname = \"q\"\nendpoints = [{ name = \"a\", address = \"127.0.0.1\" }]\n[[pools]]\nname = \"p\"\nendpoints = [{ name = \"new\", address = \"127.0.0.9\" }, { name = \"c\", address = \"127.0.0.3\", weight = 0.5 }, { name = \"a\", address = \"127.0.0.1\", port = 8080 }]",
        );
        let map = Renumbering::between(&old, &new);
        let (p, gone) = (PoolId(0), PoolId(1));
        assert_eq!(map.pool(p), Some(PoolId(1)));
        assert_eq!(map.pool(gone), None);
        assert_eq!(
            map.endpoint(p, EndpointId(2)),
            Some((PoolId(1), EndpointId(1))),
            "c moved"
        );
        assert_eq!(map.endpoint(p, EndpointId(0)), None, "a changed its port");
        assert_eq!(map.endpoint(p, EndpointId(1)), None, "b removed");
        assert_eq!(map.endpoint(gone, EndpointId(0)), None, "its pool is gone");
        assert_eq!(map.endpoint(PoolId(7), EndpointId(0)), None, "out of range");
        assert_eq!(map.kept().count(), 1);
    }
}
