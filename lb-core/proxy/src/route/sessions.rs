//! Header-affinity sessions: session key -> (endpoint, last activity). The TTL resets on
//! activity (docs/design.md#session-affinity); expired sessions are swept as the table grows.

use std::collections::HashMap;
use std::sync::Mutex;

use lb_core::config::Renumbering;
use lb_core::request::HeaderBinding;
use lb_core::steering::Target;

/// Beyond this many sessions the table sweeps expired ones on insert.
const SWEEP_AT: usize = 100_000;

#[derive(Debug, Default)]
pub struct HeaderSessions {
    table: Mutex<HashMap<u64, (Target, u64)>>,
}

impl HeaderSessions {
    pub fn get(&self, key: u64) -> Option<HeaderBinding> {
        let table = self.table.lock().ok()?;
        table.get(&key).map(|&(t, last_seen)| HeaderBinding {
            pool: t.pool,
            endpoint: t.endpoint,
            last_seen,
        })
    }

    pub fn bind(&self, key: u64, target: Target, now: u64, ttl: u64) {
        if let Ok(mut table) = self.table.lock() {
            if table.len() >= SWEEP_AT {
                table.retain(|_, (_, seen)| now.saturating_sub(*seen) < ttl);
            }
            table.insert(key, (target, now));
        }
    }

    /// The sessions of the next config generation: each one whose endpoint is still the same
    /// origin, moved to its new position; the others end.
    pub fn carried(&self, map: &Renumbering) -> HeaderSessions {
        let table = self.table.lock().map_or_else(
            |_| HashMap::new(),
            |table| {
                table
                    .iter()
                    .filter_map(|(&key, &(t, seen))| {
                        let (pool, endpoint) = map.endpoint(t.pool, t.endpoint)?;
                        Some((key, (Target { pool, endpoint }, seen)))
                    })
                    .collect()
            },
        );
        HeaderSessions {
            table: Mutex::new(table),
        }
    }

    pub fn touch(&self, key: u64, now: u64) {
        if let Ok(mut table) = self.table.lock() {
            if let Some((_, seen)) = table.get_mut(&key) {
                *seen = now;
            }
        }
    }
}
