//! Header-affinity sessions: session key -> (endpoint, last activity, TTL). The TTL is the
//! load balancer's (or a matching rule's) `session_affinity_ttl` and resets on activity
//! (docs/design.md#session-affinity).
//!
//! The table is shared by every worker of a proxy and its keys come from clients, so it is
//! split into `SHARDS` shards by key (a lock is held only for one shard's lookup) and bounded:
//! each shard is an LRU of `capacity / SHARDS` sessions, an expired session is dropped when it
//! is next looked up, and when a shard is full its least recently used session makes room,
//! counted in `meshlb_proxy_header_sessions_evicted_total`. A client inventing session ids can
//! therefore push out idle sessions, never grow the table or stall other load balancers.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use lb_core::config::Renumbering;
use lb_core::request::HeaderBinding;
use lb_core::steering::Target;
use lru::LruCache;

/// Shards of the table (a power of two: the shard is the key's low bits).
const SHARDS: usize = 16;

/// Header sessions a proxy keeps by default (`--proxy-max-header-sessions`): about 100 bytes
/// each.
pub const DEFAULT_MAX_HEADER_SESSIONS: usize = 1 << 18;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    target: Target,
    /// Last activity, unix seconds.
    seen: u64,
    ttl: u32,
}

impl Session {
    fn expired(&self, now: u64) -> bool {
        now.saturating_sub(self.seen) >= u64::from(self.ttl)
    }
}

#[derive(Debug)]
pub struct HeaderSessions {
    shards: Vec<Mutex<LruCache<u64, Session>>>,
    capacity: usize,
    evicted: metrics::Counter,
    /// Sessions pushed out so far (what `evicted` counts, for tests).
    #[cfg(test)]
    evictions: std::sync::atomic::AtomicU64,
}

impl Default for HeaderSessions {
    fn default() -> Self {
        HeaderSessions::new(DEFAULT_MAX_HEADER_SESSIONS)
    }
}

impl HeaderSessions {
    /// A table of at most `capacity` sessions (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        let per_shard =
            NonZeroUsize::new(capacity.div_ceil(SHARDS).max(1)).unwrap_or(NonZeroUsize::MIN);
        HeaderSessions {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            capacity,
            evicted: metrics::counter!("meshlb_proxy_header_sessions_evicted_total"),
            #[cfg(test)]
            evictions: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The shard of a key: its bits mixed (a multiplicative hash of all 64), so keys that a
    /// client picks to share their low bits still spread.
    fn shard(&self, key: u64) -> &Mutex<LruCache<u64, Session>> {
        let mixed = (key ^ (key >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        &self.shards[(mixed >> 60) as usize & (SHARDS - 1)]
    }

    /// The live session of `key` at `now`; an expired one is dropped.
    pub fn get(&self, key: u64, now: u64) -> Option<HeaderBinding> {
        let mut shard = self.shard(key).lock().ok()?;
        let s = *shard.peek(&key)?;
        if s.expired(now) {
            shard.pop(&key);
            return None;
        }
        Some(HeaderBinding {
            pool: s.target.pool,
            endpoint: s.target.endpoint,
            last_seen: s.seen,
        })
    }

    pub fn bind(&self, key: u64, target: Target, now: u64, ttl: u32) {
        let Ok(mut shard) = self.shard(key).lock() else {
            return;
        };
        let session = Session {
            target,
            seen: now,
            ttl,
        };
        if let Some((old, pushed_out)) = shard.push(key, session) {
            // A live session made room; an expired one was due to go anyway.
            if old != key && !pushed_out.expired(now) {
                self.evicted.increment(1);
                #[cfg(test)]
                self.evictions
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    pub fn touch(&self, key: u64, now: u64, ttl: u32) {
        if let Ok(mut shard) = self.shard(key).lock() {
            if let Some(s) = shard.get_mut(&key) {
                s.seen = now;
                s.ttl = ttl;
            }
        }
    }

    /// Sessions held now (expired ones not yet looked up included).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .filter_map(|s| s.lock().ok().map(|s| s.len()))
            .sum()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sessions of the next config generation: each one whose endpoint is still the same
    /// origin, moved to its new position; the others end.
    pub fn carried(&self, map: &Renumbering) -> HeaderSessions {
        let next = HeaderSessions::new(self.capacity);
        for (shard, into) in self.shards.iter().zip(&next.shards) {
            let (Ok(shard), Ok(mut into)) = (shard.lock(), into.lock()) else {
                continue;
            };
            // Least recently used first, so the order of use carries over too.
            for (&key, s) in shard.iter().rev() {
                if let Some((pool, endpoint)) = map.endpoint(s.target.pool, s.target.endpoint) {
                    into.put(
                        key,
                        Session {
                            target: Target { pool, endpoint },
                            ..*s
                        },
                    );
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::config::{EndpointId, PoolId};

    fn target(e: usize) -> Target {
        Target {
            pool: PoolId(0),
            endpoint: EndpointId(e),
        }
    }

    #[test]
    fn a_session_lives_for_its_own_ttl_from_its_last_activity() {
        let t = HeaderSessions::new(64);
        t.bind(1, target(3), 1_000, 30);
        assert_eq!(t.get(1, 1_029).map(|b| b.endpoint), Some(EndpointId(3)));
        t.touch(1, 1_029, 30);
        assert!(t.get(1, 1_058).is_some(), "activity resets the TTL");
        assert!(t.get(1, 1_059).is_none(), "idle for its TTL: gone");
        assert!(t.is_empty(), "and dropped");
    }

    #[test]
    fn the_table_never_grows_past_its_capacity() {
        let t = HeaderSessions::new(1_024);
        for key in 0..120_000u64 {
            t.bind(
                key.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                target(0),
                1_000,
                3_600,
            );
        }
        assert_eq!(t.len(), 1_024);
        assert_eq!(
            t.evictions.load(std::sync::atomic::Ordering::Relaxed),
            120_000 - 1_024
        );
        // The most recent sessions are the ones kept.
        let last = 119_999u64.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        assert!(t.get(last, 1_001).is_some());
    }
}
