//! The two majority rules of docs/design.md#majorities, as small pure functions tested exhaustively.
//!
//! - A region's verdict is a strict majority of its datacenters that voted; a tie or no vote is
//!   no verdict.
//! - An endpoint's verdict is a strict majority of the regions that have a verdict; a tie or no
//!   verdict keeps the previous state.

/// Strict majority of `healthy` against `unhealthy`: `Some(true)`, `Some(false)`, or `None`
/// for a tie (including 0 to 0).
pub fn strict_majority(healthy: u32, unhealthy: u32) -> Option<bool> {
    match healthy.cmp(&unhealthy) {
        std::cmp::Ordering::Greater => Some(true),
        std::cmp::Ordering::Less => Some(false),
        std::cmp::Ordering::Equal => None,
    }
}

/// A datacenter with several prober nodes votes as their strict majority.
pub fn datacenter_vote(votes: impl IntoIterator<Item = bool>) -> Option<bool> {
    let (mut h, mut u) = (0, 0);
    for v in votes {
        if v {
            h += 1;
        } else {
            u += 1;
        }
    }
    strict_majority(h, u)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhaustive_small_counts() {
        for h in 0..8 {
            for u in 0..8 {
                let m = strict_majority(h, u);
                assert_eq!(
                    m,
                    if h > u {
                        Some(true)
                    } else if u > h {
                        Some(false)
                    } else {
                        None
                    }
                );
            }
        }
        assert_eq!(datacenter_vote([true, true, false]), Some(true));
        assert_eq!(datacenter_vote([true, false]), None);
        assert_eq!(datacenter_vote([]), None);
    }
}
