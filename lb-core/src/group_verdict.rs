//! A monitor group's verdict on one endpoint from its members' verdicts (Cloudflare Load
//! Balancing's monitor groups): healthy when every `must_be_healthy` member is healthy and a
//! strict majority of the members that decide are; `monitoring_only` members never count.
//! A pool with one monitor is a group of one deciding member, so this is also its rule.

use crate::config::MemberRole;

/// `members`: each enabled member's role and verdict (`None`: none yet). `Some(true)`
/// healthy, `Some(false)` unhealthy, `None` undecided: the members that have no verdict yet
/// could still tip it either way.
pub fn group_verdict(
    members: impl IntoIterator<Item = (MemberRole, Option<bool>)>,
) -> Option<bool> {
    let (mut healthy, mut unhealthy, mut deciding) = (0u32, 0u32, 0u32);
    let (mut must_down, mut must_unknown) = (false, false);
    for (role, verdict) in members {
        if !role.decides() {
            continue;
        }
        deciding += 1;
        match verdict {
            Some(true) => healthy += 1,
            Some(false) => unhealthy += 1,
            None => {}
        }
        if role == MemberRole::MustBeHealthy {
            must_down |= verdict == Some(false);
            must_unknown |= verdict.is_none();
        }
    }
    if deciding == 0 {
        return None;
    }
    let undecided = deciding - healthy - unhealthy;
    if must_down || 2 * (healthy + undecided) <= deciding {
        // A must-be-healthy member is down, or a healthy majority is out of reach.
        Some(false)
    } else if 2 * healthy > deciding && !must_unknown {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use MemberRole::*;

    #[test]
    fn one_deciding_member_is_its_own_verdict() {
        for v in [Some(true), Some(false), None] {
            assert_eq!(group_verdict([(Decides, v)]), v);
            assert_eq!(group_verdict([(MustBeHealthy, v)]), v);
        }
    }

    #[test]
    fn the_majority_of_deciding_members_rules() {
        let up = Some(true);
        let down = Some(false);
        assert_eq!(
            group_verdict([(Decides, up), (Decides, up), (Decides, down)]),
            up
        );
        assert_eq!(
            group_verdict([(Decides, up), (Decides, down), (Decides, down)]),
            down
        );
        // Two of two: a tie is not a strict majority.
        assert_eq!(group_verdict([(Decides, up), (Decides, down)]), down);
        // One healthy, one still unknown: not yet a majority, not yet out of reach.
        assert_eq!(group_verdict([(Decides, up), (Decides, None)]), None);
        assert_eq!(
            group_verdict([(Decides, up), (Decides, up), (Decides, None)]),
            up
        );
        assert_eq!(
            group_verdict([(Decides, down), (Decides, down), (Decides, None)]),
            down
        );
    }

    #[test]
    fn a_must_be_healthy_member_vetoes() {
        let up = Some(true);
        let down = Some(false);
        assert_eq!(
            group_verdict([(MustBeHealthy, down), (Decides, up), (Decides, up)]),
            down
        );
        assert_eq!(
            group_verdict([(MustBeHealthy, None), (Decides, up), (Decides, up)]),
            None,
            "healthy only once the must-be-healthy member is"
        );
        assert_eq!(
            group_verdict([(MustBeHealthy, up), (Decides, down), (Decides, down)]),
            down,
            "and it still needs the majority"
        );
    }

    #[test]
    fn nothing_deciding_is_no_verdict() {
        assert_eq!(group_verdict([(MonitoringOnly, Some(true))]), None);
        assert_eq!(group_verdict([]), None);
    }

    fn role() -> impl Strategy<Value = MemberRole> {
        prop_oneof![Just(Decides), Just(MustBeHealthy), Just(MonitoringOnly)]
    }

    fn verdict() -> impl Strategy<Value = Option<bool>> {
        prop_oneof![Just(Some(true)), Just(Some(false)), Just(None)]
    }

    proptest! {
        /// A monitoring_only member never changes the verdict, whatever it says.
        #[test]
        fn monitoring_only_never_decides(
            members in prop::collection::vec((role(), verdict()), 0..8),
            says in verdict(),
            at in 0usize..8,
        ) {
            let mut with = members.clone();
            with.insert(at.min(members.len()), (MonitoringOnly, says));
            prop_assert_eq!(group_verdict(with), group_verdict(members));
        }

        /// A verdict, once reached, holds whatever the undecided members turn out to say.
        #[test]
        fn a_verdict_is_final_over_the_undecided(
            members in prop::collection::vec((role(), verdict()), 1..8),
            fill in prop::collection::vec(any::<bool>(), 8),
        ) {
            if let Some(v) = group_verdict(members.clone()) {
                let filled = members
                    .iter()
                    .zip(&fill)
                    .map(|(&(r, m), &f)| (r, m.or(Some(f))));
                prop_assert_eq!(group_verdict(filled), Some(v));
            }
        }

        /// With every member decided, there is always a verdict.
        #[test]
        fn decided_members_always_give_a_verdict(
            members in prop::collection::vec((role(), any::<bool>()), 1..8),
        ) {
            let any_decides = members.iter().any(|(r, _)| r.decides());
            let v = group_verdict(members.iter().map(|&(r, h)| (r, Some(h))));
            prop_assert_eq!(v.is_some(), any_decides);
        }
    }
}
