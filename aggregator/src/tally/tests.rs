//! The tally, exhaustively: majorities, ties, staleness, fail static, and the property that no
//! minority of datacenters in any region and no single whole region can flip a verdict.

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::{PoolState, Verdict};
use lb_core::{Region, RegionsTable};
use proptest::prelude::*;

use super::*;

fn config(regions: &[Region]) -> Config {
    let list: Vec<String> = regions.iter().map(|r| format!("\"{r}\"")).collect();
    let toml = format!(
        r#"
[[monitors]]
name = "m"
interval = 10
[[pools]]
name = "p"
monitor = "m"
check_regions = [{}]
origins = [{{ name = "e", address = "192.0.2.1" }}, {{ name = "f", address = "192.0.2.2" }}]
[[pools]]
name = "static"
origins = [{{ name = "s", address = "192.0.2.9" }}]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
fallback_pool = "static"
"#,
        list.join(", ")
    );
    Config::parse("t.toml", &toml, &RegionsTable::embedded().expect("regions")).expect("config")
}

/// What one prober says about endpoint `e` (and, healthy, about `f`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Says {
    Up,
    Down,
    Nothing,
    Stale(bool),
    Dead(bool),
}

fn ballot(region: Region, dc: usize, says: Says) -> Ballot {
    let vote = |healthy: bool| {
        Some(Vote {
            healthy,
            rtt_ms: Some(20.0 + dc as f64),
            code: Some(200),
            reason: None,
        })
    };
    let (alive, e) = match says {
        Says::Up => (true, vote(true)),
        Says::Down => (true, vote(false)),
        Says::Nothing => (true, None),
        Says::Stale(h) => (true, vote(h)),
        Says::Dead(h) => (false, vote(h)),
    };
    // The other endpoint is up, reported as fresh (or as stale) as the first: a prober's
    // results are as old as its progress.
    let f = vote(true);
    let age = if matches!(says, Says::Stale(_)) {
        31
    } else {
        1
    };
    Ballot {
        prober: ProberId {
            region,
            datacenter: format!("{}-dc{dc}", region.code().to_lowercase()),
            node: format!("n{dc}"),
        },
        alive,
        age: Duration::from_secs(age),
        votes: vec![vec![vec![e, f].into()], Vec::new()],
    }
}

/// Every datacenter of every region says `says(region, dc)`.
fn ballots(regions: &[Region], says: impl Fn(Region, usize) -> Says) -> Vec<Ballot> {
    regions
        .iter()
        .flat_map(|&r| (0..3).map(move |dc| (r, dc)))
        .map(|(r, dc)| ballot(r, dc, says(r, dc)))
        .collect()
}

fn run(c: &Config, b: &[Ballot], prev: &TallyState) -> TallyOutcome {
    tally(c, b, prev, &TallySettings::default(), Instant::now())
}

const E: (PoolId, EndpointId) = (PoolId(0), EndpointId(0));

fn verdict(o: &TallyOutcome) -> Verdict {
    o.snapshot.endpoints[E.0 .0][E.1 .0].verdict
}

#[test]
fn unknown_until_the_first_verdict_then_majorities() {
    let regions = [Region::Weu, Region::Enam, Region::Neas];
    let c = config(&regions);
    let s0 = TallyState::new(&c);
    let o = run(&c, &ballots(&regions, |_, _| Says::Nothing), &s0);
    assert_eq!(verdict(&o), Verdict::Unknown);
    let o = run(&c, &ballots(&regions, |_, _| Says::Up), &s0);
    assert_eq!(verdict(&o), Verdict::Healthy);
    assert!(o.changes.iter().any(|ch| matches!(
        ch,
        HealthChange::Endpoint {
            from: Verdict::Unknown,
            to: Verdict::Healthy,
            ..
        }
    )));
    assert!(o.changes.iter().any(|ch| matches!(
        ch,
        HealthChange::LoadBalancer {
            to: LbState::Healthy,
            ..
        }
    )));
    // A real outage: every datacenter sees it.
    let down = run(&c, &ballots(&regions, |_, _| Says::Down), &o.state);
    assert_eq!(verdict(&down), Verdict::Unhealthy);
    let pool_change = down.changes.iter().find_map(|ch| match ch {
        HealthChange::Pool { to, .. } => Some(*to),
        _ => None,
    });
    assert_eq!(
        pool_change,
        Some(PoolState::Degraded),
        "one of two endpoints down"
    );
    // Region counts ride along with the change.
    let Some(HealthChange::Endpoint {
        regions: counts, ..
    }) = down
        .changes
        .iter()
        .find(|c| matches!(c, HealthChange::Endpoint { .. }))
    else {
        panic!()
    };
    assert!(counts
        .iter()
        .all(|(_, c)| c.unhealthy_dcs == 3 && c.verdict == Some(false)));
}

#[test]
fn ties_keep_the_previous_state() {
    let regions = [Region::Weu, Region::Enam];
    let c = config(&regions);
    let up = run(
        &c,
        &ballots(&regions, |_, _| Says::Up),
        &TallyState::new(&c),
    );
    // WEU says down, ENAM up: a tie of regions keeps Healthy.
    let o = run(
        &c,
        &ballots(&regions, |r, _| {
            if r == Region::Weu {
                Says::Down
            } else {
                Says::Up
            }
        }),
        &up.state,
    );
    assert_eq!(verdict(&o), Verdict::Healthy);
    assert!(o.changes.is_empty(), "{:?}", o.changes);
    // A region whose datacenters tie (one up, one down, one silent) has no verdict.
    let o = run(
        &c,
        &ballots(&regions, |r, dc| match (r, dc) {
            (Region::Weu, 0) => Says::Up,
            (Region::Weu, 1) => Says::Down,
            (Region::Weu, _) => Says::Nothing,
            _ => Says::Down,
        }),
        &up.state,
    );
    assert_eq!(o.snapshot.endpoints[0][0].regional.get(Region::Weu), None);
    assert_eq!(verdict(&o), Verdict::Unhealthy, "ENAM alone has a verdict");
}

#[test]
fn stale_and_dead_votes_do_not_count() {
    let regions = [Region::Weu, Region::Enam, Region::Neas];
    let c = config(&regions);
    let up = run(
        &c,
        &ballots(&regions, |_, _| Says::Up),
        &TallyState::new(&c),
    );
    let o = run(
        &c,
        &ballots(&regions, |_, dc| {
            if dc == 0 {
                Says::Up
            } else {
                Says::Stale(false)
            }
        }),
        &up.state,
    );
    assert_eq!(verdict(&o), Verdict::Healthy);
    let o = run(
        &c,
        &ballots(
            &regions,
            |_, dc| if dc == 0 { Says::Up } else { Says::Dead(false) },
        ),
        &up.state,
    );
    assert_eq!(verdict(&o), Verdict::Healthy);
}

#[test]
fn fail_static_when_cut_off_from_every_prober() {
    let regions = [Region::Weu, Region::Enam, Region::Neas];
    let c = config(&regions);
    let up = run(
        &c,
        &ballots(&regions, |_, _| Says::Up),
        &TallyState::new(&c),
    );
    for cut_off in [
        Vec::new(),
        ballots(&regions, |_, _| Says::Dead(false)),
        ballots(&regions, |_, _| Says::Stale(false)),
    ] {
        let o = run(&c, &cut_off, &up.state);
        assert!(o.snapshot.fail_static);
        assert_eq!(verdict(&o), Verdict::Healthy);
        assert!(o.changes.is_empty());
        assert_eq!(o.votes_counted, 0);
    }
}

#[test]
fn rtt_averages_per_region_and_pool() {
    let regions = [Region::Weu, Region::Enam, Region::Neas];
    let c = config(&regions);
    let o = run(
        &c,
        &ballots(&regions, |_, _| Says::Up),
        &TallyState::new(&c),
    );
    // DC RTTs 20, 21, 22 ms: the region sample is their mean.
    let rtt = o.snapshot.endpoints[0][0]
        .rtt_ms
        .get(Region::Weu)
        .expect("rtt");
    assert!((rtt - 21.0).abs() < 1e-9, "{rtt}");
    assert!(o.snapshot.pools[0].rtt_ms.get(Region::Enam).is_some());
    assert_eq!(
        o.snapshot.pools[0].rtt_ms.get(Region::Sas),
        None,
        "not probed from SAS"
    );
    // The unmonitored pool is healthy without votes.
    assert_eq!(o.snapshot.endpoints[1][0].verdict, Verdict::Healthy);
}

fn says_strategy() -> impl Strategy<Value = Says> {
    prop_oneof![
        Just(Says::Nothing),
        any::<bool>().prop_map(Says::Stale),
        any::<bool>().prop_map(Says::Dead),
        Just(Says::Up),
        Just(Says::Down)
    ]
}

proptest! {
    /// Whatever a minority of datacenters in every region does (lie, fall silent, go stale,
    /// die), and whatever one whole region does on top, the verdict does not flip.
    #[test]
    fn no_minority_of_datacenters_and_no_single_region_flips_a_verdict(
        n_regions in 2usize..=13,
        truth in any::<bool>(),
        faulty_dc in proptest::collection::vec(proptest::option::of(0usize..3), 13),
        faulty_says in proptest::collection::vec(says_strategy(), 13),
        rogue_region in proptest::option::of(0usize..13),
        rogue_says in says_strategy(),
    ) {
        let regions: Vec<Region> = Region::ALL[..n_regions].to_vec();
        let c = config(&regions);
        let honest = if truth { Says::Up } else { Says::Down };
        let start = run(&c, &ballots(&regions, |_, _| honest), &TallyState::new(&c));
        prop_assert_eq!(verdict(&start), if truth { Verdict::Healthy } else { Verdict::Unhealthy });
        let rogue = rogue_region.filter(|&r| r < n_regions);
        let b = ballots(&regions, |r, dc| {
            let ri = r.index();
            if Some(ri) == rogue {
                // The whole region: a lie in unison, or silence.
                return if rogue_says == honest { honest } else { match rogue_says { Says::Up | Says::Down => if truth { Says::Down } else { Says::Up }, other => other } };
            }
            if faulty_dc[ri] == Some(dc) {
                return match faulty_says[ri] { Says::Up | Says::Down => if truth { Says::Down } else { Says::Up }, other => other };
            }
            honest
        });
        let o = run(&c, &b, &start.state);
        prop_assert_eq!(verdict(&o), verdict(&start));
        let flipped = o.changes.iter().any(|ch| matches!(ch, HealthChange::Endpoint { .. }));
        prop_assert!(!flipped, "changes: {:?}", o.changes);
    }

    /// Adding stale or dead contrary votes to any situation never changes the outcome.
    #[test]
    fn stale_votes_are_ignored(says in proptest::collection::vec(says_strategy(), 9), contrary in any::<bool>()) {
        let regions = [Region::Weu, Region::Enam, Region::Neas];
        let c = config(&regions);
        let base = ballots(&regions, |r, dc| says[r.index().min(2) * 3 + dc]);
        let mut more = base.clone();
        for (i, &r) in regions.iter().enumerate() {
            let mut extra = ballot(r, i % 3, Says::Stale(contrary));
            extra.prober.node = "extra-stale".into();
            more.push(extra);
            let mut dead = ballot(r, (i + 1) % 3, Says::Dead(contrary));
            dead.prober.node = "extra-dead".into();
            more.push(dead);
        }
        let s = TallyState::new(&c);
        prop_assert_eq!(verdict(&run(&c, &base, &s)), verdict(&run(&c, &more, &s)));
    }
}
