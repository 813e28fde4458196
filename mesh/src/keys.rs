//! What probers publish in gossip, and how it is encoded.
//!
//! As docs/design.md#what-chitchat-costs measures on chitchat: keep keys few and values stable. A prober
//! publishes one value per pool it probes (`pool/<name>`), holding every endpoint's debounced
//! state, RTT, code and reason, and rewrites it only when that meaning changes (state, code,
//! reason, or RTT beyond a band). Freshness travels separately in one small `progress` key that
//! advances once per probe round.

use std::collections::BTreeMap;

/// Node tags.
pub const ROLE: &str = "role";
pub const REGION: &str = "region";
pub const DATACENTER: &str = "dc";
pub const VERSION: &str = "version";
pub const CONFIG_HASH: &str = "config_hash";
/// When the node loaded the config it runs (unix seconds): with the hash, a mixed mesh shows
/// which nodes run which config since when.
pub const CONFIG_LOADED_AT: &str = "config_loaded_at";
/// The mesh config generation a node runs (docs/api.md#one-config-for-the-mesh).
pub const CONFIG_GENERATION: &str = "config_generation";
/// Set by the config primary only: the generation it holds and where to fetch it
/// (`aggregator::control::Announcement`).
pub const CONFIG_PRIMARY: &str = "config_primary";
/// Set by any other node that holds a signed generation and serves it (a relay): the same
/// value as `config_primary`'s, with its own URL.
pub const CONFIG_HOLDS: &str = "config_holds";
/// A generation this node refused (it failed validation here): `generation sha256 reason`.
pub const CONFIG_REFUSED: &str = "config_refused";
/// Advances every probe round; its movement is the freshness of the prober's votes.
pub const PROGRESS: &str = "progress";
/// Prefix of the per-pool result keys.
pub const POOL_PREFIX: &str = "pool/";
/// Between a pool's name and a monitor group member's in a result key: the ASCII unit
/// separator, a control character, which names cannot hold (`lb-core/src/config/validate`).
pub const MEMBER_SEPARATOR: char = '\u{1f}';
/// An aggregator's drain decisions (its admin API's), shared so every aggregator drains.
pub const DRAINS: &str = "drains";
/// Where clients reach an aggregator's proxy (`--advertise-proxy`): addresses, comma-separated.
/// DNS answers proxied names with them (`lb_core::pops`).
pub const PROXY_ADDRS: &str = "proxy_addrs";
/// `1` while an aggregator is ready (`GET /readyz`), `0` before: only ready PoPs are answered.
pub const READY: &str = "ready";
/// Where other PoPs (and probers) relay through an aggregator with a tunnel listener, and its
/// certificate's pin: `ADDR PIN` (`tunnel::holders`).
pub const TUNNEL_RELAY: &str = "tunnel_relay";
/// The tunnels an aggregator holds live connector connections of: ids, comma-separated.
pub const TUNNELS_HELD: &str = "tunnels";

/// The addresses of a `proxy_addrs` value; anything that is not an address is skipped.
pub fn decode_addrs(value: &str) -> Vec<std::net::IpAddr> {
    value
        .split(',')
        .filter_map(|a| a.trim().parse().ok())
        .collect()
}

/// A `proxy_addrs` value.
pub fn encode_addrs(addrs: &[std::net::IpAddr]) -> String {
    addrs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// One drain decision: the newest decision about an endpoint, from any aggregator, wins.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DrainDecision {
    pub pool: String,
    pub endpoint: String,
    pub draining: bool,
    /// When the drain began (unix seconds).
    pub since: u64,
    /// When this decision was made (unix milliseconds).
    pub at_ms: u64,
}

/// One decision per line: `pool TAB endpoint TAB 0|1 TAB since TAB at_ms` (names never hold
/// tabs or newlines).
pub fn encode_drains(decisions: &[DrainDecision]) -> String {
    decisions
        .iter()
        .map(|d| {
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                d.pool,
                d.endpoint,
                u8::from(d.draining),
                d.since,
                d.at_ms
            )
        })
        .collect()
}

/// The decisions in a value; malformed lines are skipped (they come from the network).
pub fn decode_drains(value: &str) -> Vec<DrainDecision> {
    value
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [pool, endpoint, draining, since, at_ms] = f.as_slice() else {
                return None;
            };
            Some(DrainDecision {
                pool: pool.to_string(),
                endpoint: endpoint.to_string(),
                draining: *draining == "1",
                since: since.parse().ok()?,
                at_ms: at_ms.parse().ok()?,
            })
        })
        .collect()
}

/// A published RTT is rewritten only when it moves by more than this fraction (or 2 ms).
pub const RTT_BAND: f64 = 0.2;
pub const RTT_BAND_MIN_MS: f64 = 2.0;

/// One endpoint's published result.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointResult {
    pub healthy: bool,
    pub rtt_ms: Option<f64>,
    pub code: Option<u32>,
    pub reason: Option<String>,
}

impl EndpointResult {
    /// Whether `newer` means something `self` does not: a state, code or reason change, or an
    /// RTT outside the band.
    pub fn differs(&self, newer: &EndpointResult) -> bool {
        if self.healthy != newer.healthy || self.code != newer.code || self.reason != newer.reason {
            return true;
        }
        match (self.rtt_ms, newer.rtt_ms) {
            (Some(a), Some(b)) => (a - b).abs() > (a * RTT_BAND).max(RTT_BAND_MIN_MS),
            (None, None) => false,
            _ => true,
        }
    }
}

/// The key of a pool's results: `pool/<pool>` for the pool's own monitor, `pool/<pool>` US
/// `<monitor>` for each member of its monitor group (one value per member, so one member's
/// change rewrites only its own value).
pub fn pool_key(pool: &str, member: Option<&str>) -> String {
    match member {
        None => format!("{POOL_PREFIX}{pool}"),
        Some(m) => format!("{POOL_PREFIX}{pool}{MEMBER_SEPARATOR}{m}"),
    }
}

/// One line per endpoint: `name \t H|U \t rtt_ms \t code \t reason` (empty fields allowed).
pub fn encode_pool(results: &BTreeMap<String, EndpointResult>) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let mut out = String::new();
    for (name, r) in results {
        out.push_str(&clean(name));
        out.push('\t');
        out.push(if r.healthy { 'H' } else { 'U' });
        out.push('\t');
        if let Some(rtt) = r.rtt_ms {
            out.push_str(&format!("{rtt:.1}"));
        }
        out.push('\t');
        if let Some(c) = r.code {
            out.push_str(&c.to_string());
        }
        out.push('\t');
        if let Some(reason) = &r.reason {
            out.push_str(&clean(reason));
        }
        out.push('\n');
    }
    out
}

/// Parses a pool value; malformed lines (another version, a bug) are skipped, never fatal.
pub fn decode_pool(value: &str) -> BTreeMap<String, EndpointResult> {
    value
        .lines()
        .filter_map(|line| {
            let mut f = line.split('\t');
            let name = f.next()?.to_string();
            let healthy = match f.next()? {
                "H" => true,
                "U" => false,
                _ => return None,
            };
            let rtt_ms = f
                .next()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|r| r.is_finite() && *r >= 0.0);
            let code = f.next().and_then(|s| s.parse().ok());
            let reason = f.next().filter(|s| !s.is_empty()).map(str::to_string);
            Some((
                name,
                EndpointResult {
                    healthy,
                    rtt_ms,
                    code,
                    reason,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_band() {
        let mut m = BTreeMap::new();
        m.insert(
            "web-1".to_string(),
            EndpointResult {
                healthy: true,
                rtt_ms: Some(12.34),
                code: Some(200),
                reason: None,
            },
        );
        m.insert(
            "web\t2".to_string(),
            EndpointResult {
                healthy: false,
                rtt_ms: None,
                code: Some(503),
                reason: Some("unexpected code 503\nmore".into()),
            },
        );
        let back = decode_pool(&encode_pool(&m));
        assert_eq!(back["web-1"].rtt_ms, Some(12.3));
        assert_eq!(
            back["web 2"].reason.as_deref(),
            Some("unexpected code 503 more")
        );
        let a = &m["web-1"];
        let mut b = a.clone();
        b.rtt_ms = Some(13.5);
        assert!(!a.differs(&b), "within the band");
        b.rtt_ms = Some(20.0);
        assert!(a.differs(&b));
    }

    #[test]
    fn a_member_key_cannot_be_another_pool_key() {
        assert_eq!(pool_key("web", None), "pool/web");
        assert_ne!(pool_key("web", Some("tcp")), pool_key("web/tcp", None));
        assert_ne!(pool_key("web", Some("tcp")), pool_key("web tcp", None));
    }

    proptest! {
        #[test]
        fn decoding_never_panics(s in ".{0,500}") {
            let _ = decode_pool(&s);
        }
    }
}
