//! Losing probers: a minority, a region, a partition, the whole fleet. None of it may change a
//! verdict.

use std::time::Duration;

use crate::mesh::Mesh;
use crate::report::Outcome;
use crate::SETTLE;

/// Kills `names`, waits until the tallies run without their votes, counts changes, restarts
/// them and waits for the mesh.
fn kill_and_watch(m: &mut Mesh, names: &[String]) -> usize {
    let before = m.all_changes();
    for n in names {
        m.world.node(n).kill();
    }
    m.wait_votes_gone(names);
    let changes = m.all_changes() - before;
    for n in names {
        m.world.node(n).start();
    }
    m.wait_all_live(Duration::from_secs(30));
    changes
}

/// kill -9 one prober per region, then a random third of all probers: zero health changes.
pub fn killing_a_minority_of_probers_changes_no_verdict(m: &mut Mesh) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let one_each: Vec<String> = m.probers.values().map(|v| v[0].clone()).collect();
    let c1 = kill_and_watch(m, &one_each);
    let mut all = m.all_probers();
    let mut seed = u64::from(std::process::id());
    let mut third = Vec::new();
    while third.len() < 13 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = usize::try_from(seed >> 33).unwrap_or(0) % all.len();
        third.push(all.remove(i));
    }
    let c2 = kill_and_watch(m, &third);
    Outcome::new(
        "kill -9 one prober per region, then a random third of all probers",
        "zero health changes",
        format!("{c1} changes, then {c2}"),
        c1 + c2 == 0,
    )
    .false_changes(c1 + c2)
}

/// kill -9 all three probers of SEAS: zero health changes.
pub fn killing_every_prober_of_one_region_changes_no_verdict(m: &mut Mesh) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let seas = m.probers["SEAS"].clone();
    let c = kill_and_watch(m, &seas);
    Outcome::new(
        "kill every prober of one region (SEAS)",
        "zero health changes",
        format!("{c} changes"),
        c == 0,
    )
    .false_changes(c)
}

/// WEU's link down (its probers are dead to the aggregators), then up: zero health changes,
/// and the region rejoins.
pub fn a_partitioned_region_changes_no_verdict_and_rejoins(m: &mut Mesh) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let before = m.all_changes();
    m.world.link("weu", false);
    let weu = m.probers["WEU"].clone();
    m.wait_votes_gone(&weu);
    let cut = test_support::wait_until(SETTLE, || {
        m.live_probers(0) == 36 && m.live_probers(1) == 36
    });
    let dropped = m.live_probers(0);
    let c = m.all_changes() - before;
    m.world.link("weu", true);
    let rejoin = m.wait_all_live(Duration::from_secs(30));
    Outcome::new(
        "partition one region (WEU's link down), then heal",
        "zero false changes; the region rejoins",
        format!(
            "{c} changes; {dropped} probers live while cut off; rejoined in {:.1} s",
            rejoin.as_secs_f64()
        ),
        c == 0 && dropped == 36 && cut.is_some(),
    )
    .false_changes(c)
    .detection(rejoin)
}

/// kill -9 all 39 probers (the aggregators serve their last known health, fail static), then
/// start them again: zero health changes on the way up, counted until every prober votes on
/// every endpoint again.
pub fn restarting_the_whole_prober_fleet_makes_no_flapping(m: &mut Mesh) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let before = m.all_changes();
    let all = m.all_probers();
    for n in &all {
        m.world.node(n).kill();
    }
    // Every vote gone: the aggregators serve their last known health (fail static).
    m.wait_votes_gone(&all);
    for n in &all {
        m.world.node(n).start();
    }
    let up = m.wait_all_live(Duration::from_secs(60));
    // Counted once every prober votes on every endpoint again: the way up is over.
    let voting = m.wait_all_voting();
    let c = m.all_changes() - before;
    Outcome::new(
        "restart the whole prober fleet (kill -9 all 39, start them again)",
        "no flapping on the way up (zero health changes)",
        format!(
            "39 live again in {:.1} s, all voting {:.1} s later; {c} changes",
            up.as_secs_f64(),
            voting.as_secs_f64()
        ),
        c == 0,
    )
    .false_changes(c)
    .detection(up)
}
