//! Fail static stands on evidence that the probers are gone, never on their targets being
//! dead: every endpoint of two pools down, with the probers alive, fails over; each way of
//! counting no vote is named.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lb_core::config::Config;
use lb_core::health::{PoolState, Verdict};
use lb_core::{Region, RegionsTable};

use super::*;

const REGIONS: [Region; 3] = [Region::Weu, Region::Enam, Region::Neas];

/// Two monitored pools of two endpoints each (1 s monitor, as in the chaos world), a fallback.
fn config() -> Config {
    let toml = r#"
[[monitors]]
name = "m"
interval = 1
timeout = 1
[[pools]]
name = "eu"
monitor = "m"
check_regions = ["WEU", "ENAM", "NEAS"]
origins = [{ name = "eu-1", address = "192.0.2.1" }, { name = "eu-2", address = "192.0.2.2" }]
[[pools]]
name = "us"
monitor = "m"
check_regions = ["WEU", "ENAM", "NEAS"]
origins = [{ name = "us-1", address = "192.0.2.3" }, { name = "us-2", address = "192.0.2.4" }]
[[pools]]
name = "static"
origins = [{ name = "s", address = "192.0.2.9" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["eu", "us"]
fallback_pool = "static"
"#;
    Config::parse("t.toml", toml, &RegionsTable::embedded().expect("regions")).expect("config")
}

/// Three probers per region, alive or not, whose progress moved `age` ago, each saying
/// `healthy` of every endpoint of both pools (no result at all when `None`).
fn ballots(alive: bool, age: Duration, healthy: Option<bool>) -> Vec<Ballot> {
    let votes = |n: usize| -> PoolVotes {
        let vote = healthy.map(|healthy| Vote {
            healthy,
            rtt_ms: healthy.then_some(20.0),
            code: healthy.then_some(200),
            reason: (!healthy).then(|| Arc::from("connection refused")),
        });
        vec![vote; n].into()
    };
    REGIONS
        .iter()
        .flat_map(|&region| (0..3).map(move |dc| (region, dc)))
        .map(|(region, dc)| Ballot {
            prober: ProberId {
                region,
                datacenter: format!("{}-dc{dc}", region.code().to_lowercase()),
                node: format!("{region}-{dc}"),
            },
            alive,
            age,
            votes: vec![vec![votes(2)], vec![votes(2)], Vec::new()],
        })
        .collect()
}

fn run(c: &Config, b: &[Ballot], prev: &TallyState) -> TallyOutcome {
    tally(c, b, prev, &TallySettings::default(), Instant::now())
}

/// The state after every prober said every endpoint is up.
fn all_up(c: &Config) -> TallyState {
    let o = run(
        c,
        &ballots(true, Duration::from_millis(300), Some(true)),
        &TallyState::new(c),
    );
    assert!(!o.snapshot.fail_static);
    o.state
}

#[test]
fn every_endpoint_of_two_pools_down_with_the_probers_alive_fails_over() {
    let c = config();
    let up = all_up(&c);
    let o = run(
        &c,
        &ballots(true, Duration::from_millis(300), Some(false)),
        &up,
    );
    assert!(
        !o.snapshot.fail_static,
        "dead targets are votes, not silence"
    );
    assert_eq!(o.silence, None);
    assert_eq!(o.votes_counted, 9 * 4);
    for pool in 0..2 {
        for e in &o.snapshot.endpoints[pool] {
            assert_eq!(e.verdict, Verdict::Unhealthy);
        }
    }
    assert_eq!(o.state.lb_states(), &[Some(LbState::Critical)]);
    assert!(o.changes.iter().any(|ch| matches!(
        ch,
        HealthChange::Pool {
            to: PoolState::Critical,
            ..
        }
    )));
}

#[test]
fn results_of_probers_whose_progress_moved_within_three_intervals_are_votes() {
    let c = config();
    let up = all_up(&c);
    // Three 1 s intervals: a prober must advance its progress more often than that (it does
    // every second, prober/src/publisher.rs), or its "down" is silence.
    let fresh = run(
        &c,
        &ballots(true, Duration::from_millis(2_900), Some(false)),
        &up,
    );
    assert!(!fresh.snapshot.fail_static);
    let stale = run(
        &c,
        &ballots(true, Duration::from_millis(3_100), Some(false)),
        &up,
    );
    assert!(stale.snapshot.fail_static);
    assert_eq!(
        stale.silence,
        Some(Silence::AllStale {
            live: 9,
            freshest_age_ms: 3_100
        })
    );
    assert_eq!(stale.snapshot.endpoints[0][0].verdict, Verdict::Healthy);
}

#[test]
fn no_prober_in_the_mesh_is_named_as_such() {
    let c = config();
    let o = run(&c, &[], &all_up(&c));
    assert!(o.snapshot.fail_static);
    assert_eq!(o.silence, Some(Silence::NoProber));
}

#[test]
fn every_prober_dead_is_named_as_such() {
    let c = config();
    let o = run(
        &c,
        &ballots(false, Duration::from_millis(300), Some(false)),
        &all_up(&c),
    );
    assert_eq!(o.silence, Some(Silence::AllDead { probers: 9 }));
    assert!(o.changes.is_empty(), "nothing fails over while static");
}

#[test]
fn fresh_probers_without_results_are_named_as_such() {
    let c = config();
    let o = run(
        &c,
        &ballots(true, Duration::from_millis(300), None),
        &all_up(&c),
    );
    assert_eq!(o.silence, Some(Silence::NoResults { live: 9 }));
}

#[test]
fn each_silence_says_what_it_is_in_words() {
    for (s, words) in [
        (Silence::NoProber, "no prober"),
        (Silence::AllDead { probers: 3 }, "all 3 probers are dead"),
        (
            Silence::AllStale {
                live: 2,
                freshest_age_ms: 4_000,
            },
            "moved 4000 ms ago",
        ),
        (
            Silence::NoResults { live: 5 },
            "5 live probers hold no result",
        ),
    ] {
        assert!(s.describe().contains(words), "{s:?}: {}", s.describe());
    }
}
