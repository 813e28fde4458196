//! The tally of monitor groups: each member tallied like a monitor, the endpoint's verdict by
//! `lb_core::group_verdict`, member changes reported with the endpoint change they caused,
//! RTT from the deciding members only.

use std::time::{Duration, Instant};

use lb_core::config::{Config, EndpointId, PoolId};
use lb_core::health::Verdict;
use lb_core::{Region, RegionsTable};

use super::*;

/// Checks, in order: http (must_be_healthy), tcp (decides), deep (monitoring_only).
fn config() -> Config {
    config_with(
        r#"{ monitor = "http", must_be_healthy = true }, { monitor = "tcp" }, { monitor = "deep", monitoring_only = true }"#,
    )
}

/// Three monitors, and a group `g` of `members` on pool `p` (one endpoint, three regions).
fn config_with(members: &str) -> Config {
    let text = format!(
        r#"
[[monitors]]
name = "http"
interval = 10
[[monitors]]
name = "tcp"
type = "tcp"
interval = 10
[[monitors]]
name = "deep"
interval = 10
[[monitor_groups]]
name = "g"
members = [{members}]
[[pools]]
name = "p"
monitor_group = "g"
check_regions = ["WEU", "ENAM", "SEAS"]
origins = [{{ name = "e", address = "192.0.2.1" }}]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
"#
    );
    Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions")).expect("config")
}

const HTTP: usize = 0;
const TCP: usize = 1;
const DEEP: usize = 2;
const E: EndpointId = EndpointId(0);

/// Every prober (three regions, three datacenters each) says `up[check]` about the endpoint,
/// with RTT `rtt[check]`.
fn ballots(up: [bool; 3], rtt: [f64; 3]) -> Vec<Ballot> {
    [Region::Weu, Region::Enam, Region::Seas]
        .iter()
        .flat_map(|&r| (0..3).map(move |dc| (r, dc)))
        .map(|(region, dc)| Ballot {
            prober: ProberId {
                region,
                datacenter: format!("dc{dc}"),
                node: format!("{region}-{dc}"),
            },
            alive: true,
            age: Duration::from_secs(1),
            votes: vec![(0..3)
                .map(|c| {
                    vec![Some(Vote {
                        healthy: up[c],
                        rtt_ms: Some(rtt[c]),
                        code: None,
                        reason: (!up[c]).then(|| "connection refused".into()),
                    })]
                    .into()
                })
                .collect()],
        })
        .collect()
}

fn run(c: &Config, up: [bool; 3], prev: &TallyState) -> TallyOutcome {
    let b = ballots(up, [10.0, 20.0, 900.0]);
    tally(c, &b, prev, &TallySettings::default(), Instant::now())
}

/// An endpoint change: from, to, and each member's (verdict, changed).
type EndpointChange = (Verdict, Verdict, Vec<(Verdict, bool)>);

fn endpoint_change(o: &TallyOutcome) -> Option<EndpointChange> {
    o.changes.iter().find_map(|c| match c {
        HealthChange::Endpoint {
            from, to, members, ..
        } => Some((*from, *to, members.clone())),
        _ => None,
    })
}

fn member_changes(o: &TallyOutcome) -> Vec<(usize, Verdict)> {
    o.changes
        .iter()
        .filter_map(|c| match c {
            HealthChange::Check { check, to, .. } => Some((*check, *to)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_member_is_tallied_and_the_group_rule_decides() {
    let c = config();
    let o = run(&c, [true, true, false], &TallyState::new(&c));
    assert_eq!(o.snapshot.endpoint(PoolId(0), E).verdict, Verdict::Healthy);
    assert_eq!(
        member_changes(&o),
        [
            (HTTP, Verdict::Healthy),
            (TCP, Verdict::Healthy),
            (DEEP, Verdict::Unhealthy)
        ],
        "the monitoring_only member is tallied and reported too"
    );
    assert_eq!(
        o.state.check_verdict(PoolId(0), DEEP, E),
        Verdict::Unhealthy
    );
    // The deciding tcp member fails: one of two deciding members is no strict majority.
    let o = run(&c, [true, false, false], &o.state);
    let (from, to, members) = endpoint_change(&o).expect("endpoint change");
    assert_eq!((from, to), (Verdict::Healthy, Verdict::Unhealthy));
    assert_eq!(
        members,
        [
            (Verdict::Healthy, false),
            (Verdict::Unhealthy, true),
            (Verdict::Unhealthy, false)
        ],
        "the event names the member that moved it"
    );
    // tcp back, the must-be-healthy http down: unhealthy whatever the majority says.
    let o = run(&c, [true, true, false], &o.state);
    assert_eq!(o.snapshot.endpoint(PoolId(0), E).verdict, Verdict::Healthy);
    let o = run(&c, [false, true, true], &o.state);
    assert_eq!(
        o.snapshot.endpoint(PoolId(0), E).verdict,
        Verdict::Unhealthy
    );
    assert_eq!(
        o.snapshot.endpoint(PoolId(0), E).regional.get(Region::Weu),
        Some(false),
        "per-region verdicts follow the same rule"
    );
}

#[test]
fn a_monitoring_only_member_is_reported_but_never_decides() {
    let c = config();
    let settled = run(&c, [true, true, true], &TallyState::new(&c)).state;
    let o = run(&c, [true, true, false], &settled);
    assert_eq!(member_changes(&o), [(DEEP, Verdict::Unhealthy)]);
    assert_eq!(endpoint_change(&o), None, "the endpoint stays healthy");
    assert_eq!(o.snapshot.endpoint(PoolId(0), E).verdict, Verdict::Healthy);
}

#[test]
fn steering_rtt_comes_from_the_deciding_members() {
    let c = config();
    let o = run(&c, [true, true, true], &TallyState::new(&c));
    let rtt = o
        .snapshot
        .endpoint(PoolId(0), E)
        .rtt_ms
        .get(Region::Weu)
        .expect("rtt");
    assert!(
        (rtt - 15.0).abs() < 1e-9,
        "mean of http (10) and tcp (20), not the deep check's 900: {rtt}"
    );
}

#[test]
fn a_member_added_by_a_reload_keeps_the_others_verdicts() {
    let c = config();
    let settled = run(&c, [true, true, true], &TallyState::new(&c)).state;
    let without =
        config_with(r#"{ monitor = "http", must_be_healthy = true }, { monitor = "tcp" }"#);
    // Dropping the monitoring_only member keeps the endpoint's identity and verdicts.
    assert!(removed_endpoints(&c, &without).is_empty());
    let carried = settled.carry_over(&c, &without);
    assert_eq!(carried.verdict(PoolId(0), E), Verdict::Healthy);
    assert_eq!(carried.check_verdict(PoolId(0), 1, E), Verdict::Healthy);
    // Adding it back: the new member starts unknown, the others keep theirs.
    let back = carried.carry_over(&without, &c);
    assert_eq!(back.verdict(PoolId(0), E), Verdict::Healthy);
    assert_eq!(back.check_verdict(PoolId(0), TCP, E), Verdict::Healthy);
    assert_eq!(back.check_verdict(PoolId(0), DEEP, E), Verdict::Unknown);
    // Making tcp monitoring_only changes what decides: a new identity.
    let demoted = config_with(
        r#"{ monitor = "http", must_be_healthy = true }, { monitor = "tcp", monitoring_only = true }"#,
    );
    assert_eq!(removed_endpoints(&without, &demoted), [(PoolId(0), E)]);
}
