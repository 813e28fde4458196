//! Weighted random draws and stable hashes shared by pool and endpoint steering.

use std::net::IpAddr;

use rand::{Rng, RngCore};
use xxhash_rust::xxh3::Xxh3;

/// Draws one item with probability weight / sum(weights). Items of weight 0 are never drawn;
/// `None` when no item has a positive weight.
pub(crate) fn weighted_pick<T: Copy>(items: &[(T, f64)], rng: &mut dyn RngCore) -> Option<T> {
    // NaN and negative weights count as 0: never drawn, never poisoning the total.
    let usable = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let total: f64 = items.iter().map(|&(_, w)| usable(w)).sum();
    if !total.is_finite() || total <= 0.0 {
        return None;
    }
    let mut point = rng.random::<f64>() * total;
    let mut last = None;
    for &(item, w) in items {
        let w = usable(w);
        if w <= 0.0 {
            continue;
        }
        if point < w {
            return Some(item);
        }
        point -= w;
        last = Some(item);
    }
    // Rounding can leave `point` a hair above the last weight.
    last
}

/// Least-outstanding transform (Cloudflare's, docs/design.md#least-outstanding-requests-and-least-connections): weight / (count + 1).
pub(crate) fn transformed_weight(weight: f64, count: u32) -> f64 {
    weight / (f64::from(count) + 1.0)
}

/// A hash of the client address and a salt that is the same on every node and every run,
/// so that every aggregator makes the same hash-based choice for a client. The salt parts
/// start with a tag naming the purpose (`"endpoint"`, `"shed"`, ...), so that choices made for
/// different purposes, or for same-named things in different pools, are independent.
pub(crate) fn client_hash(ip: IpAddr, salt: &[&str]) -> u64 {
    let mut h = Xxh3::with_seed(0x6d65_7368_6c62);
    for part in salt {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    match ip {
        IpAddr::V4(v4) => h.update(&v4.octets()),
        IpAddr::V6(v6) => h.update(&v6.octets()),
    }
    h.digest()
}

/// Maps a hash to the open interval (0, 1).
pub(crate) fn unit_interval(hash: u64) -> f64 {
    // 52 bits, centred in their bucket: never 0, and at most 1 - 2^-53 (representable).
    ((hash >> 12) as f64 + 0.5) / (1u64 << 52) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn weights_of_zero_are_never_drawn() {
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..1000 {
            assert_eq!(
                weighted_pick(&[(1, 0.0), (2, 0.5), (3, 0.0)], &mut rng),
                Some(2)
            );
        }
        assert_eq!(weighted_pick(&[(1, 0.0)], &mut rng), None);
        assert_eq!(weighted_pick::<u8>(&[], &mut rng), None);
        assert_eq!(weighted_pick(&[(1, f64::NAN)], &mut rng), None);
        for _ in 0..100 {
            assert_eq!(
                weighted_pick(&[(1, f64::NAN), (2, 0.3), (3, -1.0)], &mut rng),
                Some(2)
            );
        }
    }

    #[test]
    fn unit_interval_is_open() {
        assert!(unit_interval(0) > 0.0);
        assert!(unit_interval(u64::MAX) < 1.0);
    }
}
