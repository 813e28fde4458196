//! Open connections (TCP) and flows (UDP) per endpoint and pool, read by `least_connections`
//! steering. Each counter is shared with the generation before it for every endpoint that is
//! the same origin (`Renumbering`), so connections opened on the old config are still counted,
//! and end, on the counter the new one reads.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use lb_core::config::{Config, EndpointId, PoolId, Renumbering};
use lb_core::request::LoadCounts;
use lb_core::steering::Target;

#[derive(Debug)]
pub struct Live {
    endpoints: Vec<Vec<Arc<AtomicU32>>>,
    pools: Vec<Arc<AtomicU32>>,
}

impl Live {
    pub fn new(config: &Config) -> Live {
        Live {
            endpoints: config
                .pools
                .iter()
                .map(|p| p.endpoints.iter().map(|_| Arc::default()).collect())
                .collect(),
            pools: config.pools.iter().map(|_| Arc::default()).collect(),
        }
    }

    /// `config`'s counters, taking over `before`'s wherever the origin is the same.
    pub fn carried(config: &Config, old: &Config, before: &Live) -> Live {
        let mut live = Live::new(config);
        let map = Renumbering::between(old, config);
        for ((op, oe), (np, ne)) in map.kept() {
            if let Some(c) = before.endpoints.get(op.0).and_then(|p| p.get(oe.0)) {
                live.endpoints[np.0][ne.0] = Arc::clone(c);
            }
        }
        for (i, c) in before.pools.iter().enumerate() {
            if let Some(np) = map.pool(PoolId(i)) {
                live.pools[np.0] = Arc::clone(c);
            }
        }
        live
    }

    /// Counts one connection or flow at `target` until the guard is dropped.
    pub fn open(&self, target: Target) -> Open {
        let endpoint = self
            .endpoints
            .get(target.pool.0)
            .and_then(|p| p.get(target.endpoint.0))
            .cloned()
            .unwrap_or_default();
        let pool = self.pools.get(target.pool.0).cloned().unwrap_or_default();
        endpoint.fetch_add(1, Ordering::Relaxed);
        pool.fetch_add(1, Ordering::Relaxed);
        Open { endpoint, pool }
    }

    /// Open at `target` now.
    pub fn count(&self, target: Target) -> u32 {
        self.endpoints
            .get(target.pool.0)
            .and_then(|p| p.get(target.endpoint.0))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

/// One open connection or flow.
#[derive(Debug)]
pub struct Open {
    endpoint: Arc<AtomicU32>,
    pool: Arc<AtomicU32>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.endpoint.fetch_sub(1, Ordering::Relaxed);
        self.pool.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Layer 4 has connections, not requests: outstanding requests read 0, so
/// `least_outstanding_requests` steers by weight alone, as Cloudflare's does off layer 7.
impl LoadCounts for Live {
    fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> (u32, u32) {
        (0, self.count(Target { pool, endpoint }))
    }

    fn pool(&self, pool: PoolId) -> (u32, u32) {
        (
            0,
            self.pools
                .get(pool.0)
                .map_or(0, |c| c.load(Ordering::Relaxed)),
        )
    }
}
