//! Voting: every region votes; probers killed (a minority in every region, or a whole region)
//! change nothing; a stopped origin is voted down within the bound by a majority of regions,
//! and up again once back.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use super::world::{node_id, World};
use crate::{endpoint_verdict, readyz, REGIONS};
use test_support::*;

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Whether no endpoint of `/status` counts a vote of the nodes `names` any more (each is dead
/// or stale).
fn votes_excluded(status: &Value, names: &[String]) -> bool {
    status["pools"][0]["endpoints"]
        .as_array()
        .is_some_and(|eps| {
            eps.iter().all(|e| {
                e["regions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|r| r["datacenters"].as_array().into_iter().flatten())
                    .all(|d| {
                        !names.iter().any(|n| d["node"] == n.as_str())
                            || d["alive"] == false
                            || d["stale"] == true
                    })
            })
        })
}

fn snapshot_version(admin: SocketAddr) -> u64 {
    get(admin, "/status")
        .and_then(|s| s["snapshot_version"].as_u64())
        .unwrap_or(0)
}

/// Kills `victims` (indices into `w.probers`) and returns the endpoint health changes that
/// follow. A false change could only happen once the aggregator stops counting the victims'
/// votes (dead, or stale), so we wait for exactly that, and for one more tally after it,
/// instead of guessing a duration.
fn kill_and_collect_changes(w: &mut World, victims: &[usize]) -> Vec<Value> {
    let since = now_ms();
    for &v in victims {
        let _ = w.procs.0[w.probers[v].proc].kill();
    }
    let names: Vec<String> = victims
        .iter()
        .map(|&v| node_id(w.probers[v].region, w.probers[v].dc))
        .collect();
    wait_for(
        "the victims' votes no longer counted",
        Duration::from_secs(20),
        || get(w.admin, "/status").is_some_and(|s| votes_excluded(&s, &names)),
    );
    let version = snapshot_version(w.admin);
    wait_for("one more tally", Duration::from_secs(5), || {
        snapshot_version(w.admin) > version
    });
    let events = get(w.admin, &format!("/events?since={since}")).expect("events");
    events
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "endpoint")
        .cloned()
        .collect()
}

/// Every region has a healthy verdict on both endpoints from its datacenters.
pub fn every_region_votes_on_every_endpoint(w: &mut World) {
    w.wait_whole();
    let status = get(w.admin, "/status").expect("status");
    for endpoint in status["pools"][0]["endpoints"]
        .as_array()
        .expect("endpoints")
    {
        let regions = endpoint["regions"].as_array().expect("regions");
        assert_eq!(regions.len(), REGIONS.len(), "{endpoint}");
        assert!(regions.iter().all(|r| r["verdict"] == true), "{endpoint}");
        assert_eq!(endpoint["verdict"], "healthy", "{endpoint}");
    }
}

/// With a verdict for every endpoint, the aggregator is ready.
pub fn an_aggregator_with_a_verdict_for_every_endpoint_is_ready(w: &mut World) {
    w.wait_whole();
    let (code, ready) = readyz(w.admin).expect("/readyz");
    assert_eq!(code, 200, "{ready}");
    assert_eq!(ready["unknown_endpoints"], 0, "{ready}");
}

/// Every prober joins; the intruder, sealing with another key, never does.
pub fn every_prober_joins_and_a_node_with_the_wrong_key_never_does(w: &mut World) {
    w.wait_whole();
    let members = get(w.admin, "/members").expect("members");
    let probers = members
        .as_array()
        .expect("members")
        .iter()
        .filter(|m| m["role"] == "prober" && m["alive"] == true)
        .count();
    assert_eq!(probers, REGIONS.len() * 3, "{members}");
    assert!(
        !members
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["node_id"] == "intruder"),
        "the wrong key never joins: {members}"
    );
}

/// One prober killed in every region: no health change. (They are started again after.)
pub fn a_minority_of_probers_killed_in_every_region_changes_nothing(w: &mut World) {
    w.wait_whole();
    let victims: Vec<usize> = (0..w.probers.len())
        .filter(|&i| w.probers[i].dc == "a")
        .collect();
    let changes = kill_and_collect_changes(w, &victims);
    assert!(
        changes.is_empty(),
        "a minority of probers in every region changed nothing: {changes:?}"
    );
    w.restart(&victims);
}

/// Every prober of one region killed: no health change (the other regions decide); the
/// killed probers show as dead in the member state gauge. (They are started again after.)
pub fn a_whole_region_killed_changes_nothing(w: &mut World) {
    w.wait_whole();
    let victims: Vec<usize> = (0..w.probers.len())
        .filter(|&i| w.probers[i].region == "NEAS")
        .collect();
    let changes = kill_and_collect_changes(w, &victims);
    assert!(
        changes.is_empty(),
        "a whole region killed changed nothing: {changes:?}"
    );
    // The killed region's probers went stale above; the failure detector calls them dead a
    // little later, after a multiple of their mean heartbeat gap.
    let dead = "role=\"prober\",region=\"NEAS\",state=\"dead\"} ";
    wait_for("the NEAS probers dead", Duration::from_secs(30), || {
        // At least the three killed here (a trial before may have left dead ones of NEAS).
        scrape(w.admin)
            .lines()
            .filter_map(|l| l.split_once(dead))
            .any(|(_, n)| n.parse::<f64>().is_ok_and(|n| n >= 3.0))
    });
    w.restart(&victims);
}

/// Origin `one` stops: unhealthy everywhere within interval x consecutive_down + 1 s
/// (2 s + 1 s), asserted with a generous margin for a loaded 2-core machine (the chaos suite
/// allows the bound plus 7 s); `two` stays healthy. Started again: healthy again.
pub fn a_stopped_origin_is_voted_down_within_the_bound_and_up_once_back(w: &mut World) {
    w.wait_whole();
    let stopped = Stopped::new([&w.one]);
    let took = wait_for("endpoint one unhealthy", Duration::from_secs(15), || {
        get(w.admin, "/status")
            .is_some_and(|s| endpoint_verdict(&s, "one").as_deref() == Some("unhealthy"))
    });
    eprintln!("failover detected in {took:?}");
    assert!(took < Duration::from_secs(10), "detection took {took:?}");
    let status = get(w.admin, "/status").expect("status");
    assert_eq!(endpoint_verdict(&status, "two").as_deref(), Some("healthy"));
    drop(stopped);
    wait_for(
        "endpoint one healthy again",
        Duration::from_secs(15),
        || {
            get(w.admin, "/status")
                .is_some_and(|s| endpoint_verdict(&s, "one").as_deref() == Some("healthy"))
        },
    );
}

/// The event of a verdict change carries the votes behind it: a strict majority of the
/// regions with a verdict says down (at the moment of change some regions may still be split
/// or not have noticed yet); and the change is counted by kind.
pub fn a_verdict_change_is_an_event_with_a_majority_of_regions_behind_it(w: &mut World) {
    w.wait_whole();
    let since = now_ms();
    {
        let _stopped = Stopped::new([&w.one]);
        wait_for("endpoint one unhealthy", Duration::from_secs(15), || {
            get(w.admin, "/status")
                .is_some_and(|s| endpoint_verdict(&s, "one").as_deref() == Some("unhealthy"))
        });
    }
    let events = get(
        w.admin,
        &format!("/events?pool=web&endpoint=one&since={since}"),
    )
    .expect("events");
    let down = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "unhealthy")
        .expect("an event");
    let regions = down["regions"].as_array().expect("regions");
    let says = |v: bool| regions.iter().filter(|r| r["verdict"] == v).count();
    assert!(says(false) > says(true), "{down}");
    assert!(
        scrape(w.admin).contains("kind=\"endpoint\""),
        "the change counted by kind"
    );
    w.wait_whole();
}
