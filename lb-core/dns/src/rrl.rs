//! Response-rate limiting, in the spirit of BIND's and Knot's RRL: a UDP answer costs nothing
//! to ask for with a spoofed source, so a flood of queries "from" a victim turns the server
//! into an amplifier aimed at it. Each client prefix (`/24` for IPv4, `/56` for IPv6 by
//! default) gets a token bucket of `responses_per_second` (a second's worth of burst); past it,
//! every `slip`-th answer goes out as an empty truncated one (TC=1), so a real resolver retries
//! over TCP — which a spoofed source cannot — and the others are dropped. TCP is never limited.
//! Off unless `responses_per_second` is set. The table is bounded (`table_size` prefixes, the
//! least recently seen forgotten first) and sharded, so it never grows and threads rarely wait.

use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::sync::Mutex;

use lru::LruCache;

/// Shards of the table (a power of two).
const SHARDS: usize = 16;

/// RRL settings (`--dns-rrl-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrlSettings {
    /// Answers per second per client prefix; 0 turns rate limiting off.
    pub responses_per_second: u32,
    /// Of the answers over the rate, every `slip`-th is sent truncated (TC=1), the others
    /// dropped; 0 drops them all, 1 truncates them all (BIND's default is 2).
    pub slip: u32,
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
    /// Client prefixes tracked at once.
    pub table_size: usize,
}

impl Default for RrlSettings {
    fn default() -> Self {
        RrlSettings {
            responses_per_second: 0,
            slip: 2,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            table_size: 65_536,
        }
    }
}

/// What to do with one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Send,
    /// Send it empty and truncated (TC=1).
    Slip,
    Drop,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Tokens, in thousandths of an answer.
    milli_tokens: u64,
    /// When it was last refilled (ms on the caller's clock).
    at_ms: u64,
    /// Answers over the rate so far (for the slip rhythm).
    over: u32,
}

#[derive(Debug)]
pub struct Rrl {
    settings: RrlSettings,
    /// The one clock of every thread that shares the limiter.
    epoch: std::time::Instant,
    shards: Vec<Mutex<LruCache<u128, Bucket>>>,
    slipped: metrics::Counter,
    dropped: metrics::Counter,
}

impl Rrl {
    /// `None` when the settings turn it off.
    pub fn new(settings: RrlSettings) -> Option<Rrl> {
        if settings.responses_per_second == 0 {
            return None;
        }
        let per_shard = NonZeroUsize::new(settings.table_size.div_ceil(SHARDS).max(1))
            .unwrap_or(NonZeroUsize::MIN);
        Some(Rrl {
            settings,
            epoch: std::time::Instant::now(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            slipped: metrics::counter!("meshlb_dns_rrl_total", "action" => "slipped"),
            dropped: metrics::counter!("meshlb_dns_rrl_total", "action" => "dropped"),
        })
    }

    /// The client prefix `ip` belongs to, as one number (family in the top bits).
    fn prefix(&self, ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(v4) => {
                let bits = u32::from(self.settings.ipv4_prefix.min(32));
                let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                (1u128 << 127) | u128::from(u32::from(v4) & mask)
            }
            IpAddr::V6(v6) => {
                let bits = u32::from(self.settings.ipv6_prefix.min(128));
                let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
                (u128::from(v6) & mask) >> 1
            }
        }
    }

    /// Whether an answer to `ip` goes out now, and how.
    pub fn check_now(&self, ip: IpAddr) -> Limit {
        self.check(ip, self.epoch.elapsed().as_millis() as u64)
    }

    /// Whether an answer to `ip` goes out at `now_ms` (on the limiter's clock), and how.
    pub fn check(&self, ip: IpAddr, now_ms: u64) -> Limit {
        let key = self.prefix(ip);
        let shard = &self.shards[(key as usize ^ (key >> 64) as usize) & (SHARDS - 1)];
        let Ok(mut table) = shard.lock() else {
            return Limit::Send;
        };
        let rate = u64::from(self.settings.responses_per_second);
        let full = rate * 1000;
        let bucket = table.get_or_insert_mut(key, || Bucket {
            milli_tokens: full,
            at_ms: now_ms,
            over: 0,
        });
        let elapsed = now_ms.saturating_sub(bucket.at_ms);
        bucket.milli_tokens = (bucket.milli_tokens + elapsed.saturating_mul(rate)).min(full);
        bucket.at_ms = now_ms.max(bucket.at_ms);
        if bucket.milli_tokens >= 1000 {
            bucket.milli_tokens -= 1000;
            bucket.over = 0;
            return Limit::Send;
        }
        bucket.over = bucket.over.wrapping_add(1);
        let slip = self.settings.slip;
        if slip > 0 && bucket.over % slip == 0 {
            self.slipped.increment(1);
            Limit::Slip
        } else {
            self.dropped.increment(1);
            Limit::Drop
        }
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.shards
            .iter()
            .filter_map(|s| s.lock().ok().map(|t| t.len()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrl(rate: u32, slip: u32) -> Rrl {
        Rrl::new(RrlSettings {
            responses_per_second: rate,
            slip,
            ..RrlSettings::default()
        })
        .expect("on")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn off_by_default() {
        assert!(Rrl::new(RrlSettings::default()).is_none());
    }

    #[test]
    fn a_burst_of_the_rate_then_every_second_one_slips() {
        let r = rrl(5, 2);
        let seen: Vec<Limit> = (0..9).map(|_| r.check(ip("192.0.2.7"), 1_000)).collect();
        use Limit::*;
        assert_eq!(seen, [Send, Send, Send, Send, Send, Drop, Slip, Drop, Slip]);
        // Tokens come back at the rate: 200 ms is one more answer.
        assert_eq!(r.check(ip("192.0.2.7"), 1_200), Send);
        assert_ne!(r.check(ip("192.0.2.7"), 1_200), Send);
    }

    #[test]
    fn a_prefix_shares_its_bucket_and_others_have_their_own() {
        let r = rrl(1, 0);
        assert_eq!(r.check(ip("192.0.2.1"), 0), Limit::Send);
        assert_eq!(r.check(ip("192.0.2.200"), 0), Limit::Drop, "the same /24");
        assert_eq!(r.check(ip("192.0.3.1"), 0), Limit::Send, "another /24");
        assert_eq!(r.check(ip("2001:db8:0:1::1"), 0), Limit::Send);
        assert_eq!(
            r.check(ip("2001:db8:0:1:ffff::9"), 0),
            Limit::Drop,
            "the same /56"
        );
        assert_eq!(
            r.check(ip("2001:db8:0:100::1"), 0),
            Limit::Send,
            "another /56"
        );
    }

    #[test]
    fn the_table_stays_bounded_whatever_the_sources() {
        let r = Rrl::new(RrlSettings {
            responses_per_second: 10,
            table_size: 256,
            ..RrlSettings::default()
        })
        .expect("on");
        for i in 0..100_000u32 {
            r.check(IpAddr::V4((i << 8).into()), 0);
        }
        assert!(r.tracked() <= 256, "{}", r.tracked());
    }
}
