//! Bounded gossip (`vendor/chitchat/src/bounded.rs`) on the simulated WAN: 120 real mesh
//! nodes, too many for a full digest to fit one 1,400-byte datagram, on tokio's paused clock
//! (the deadlines below are simulated time, so a slow machine measures the same).

use std::collections::BTreeSet;
use std::time::Duration;

use mesh_sim::fleet::Fleet;
use mesh_sim::measure;
use mesh_sim::net::{NetSettings, Rtt, SimNet};

const NODES: usize = 120;
const BOUND: usize = 1_400;

fn net() -> SimNet {
    SimNet::new(NetSettings {
        rtt: Rtt::Uniform(Duration::from_millis(100)),
        ..NetSettings::default()
    })
}

async fn converged(full_digests: BTreeSet<usize>) -> Fleet {
    let fleet = Fleet::start_mixed(
        net(),
        NODES,
        Duration::from_millis(100),
        Some(BOUND),
        full_digests,
    )
    .await
    .expect("fleet");
    assert!(
        fleet
            .wait_converged(Duration::from_secs(120))
            .await
            .is_some(),
        "{NODES} bounded nodes never all held each other live"
    );
    fleet
}

#[tokio::test(start_paused = true)]
async fn a_change_reaches_every_node_of_a_bounded_mesh_within_two_seconds() {
    let fleet = converged(BTreeSet::new()).await;
    let spreads = measure::propagation(&fleet, 5, Duration::from_millis(200), 7).await;
    for spread in spreads {
        let all = spread.all.expect("a change never reached every node");
        assert!(
            all < Duration::from_secs(2),
            "a change took {all:?} to reach every node"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_change_reaches_every_node_while_every_node_advances_its_progress_each_second() {
    let fleet = converged(BTreeSet::new()).await;
    // Every node a prober: 120 members moving every second, each pushed as a rumour, compete
    // with the health changes for the room in every message.
    let progress = fleet.start_progress(NODES, Duration::from_secs(1));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spreads = measure::propagation(&fleet, 10, Duration::from_millis(100), 11).await;
    progress.abort();
    for spread in spreads {
        let all = spread.all.expect("a change never reached every node");
        assert!(
            all < Duration::from_secs(2),
            "under progress load a change took {all:?} to reach every node"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_datagram_of_a_bounded_mesh_is_over_its_bound() {
    let fleet = converged(BTreeSet::new()).await;
    // A burst of large values from many nodes at once: the deltas must be cut, not the bound.
    let burst = "x".repeat(600);
    let publishers = (0..NODES).step_by(4).count();
    for i in (0..NODES).step_by(4) {
        fleet.publish(i, "burst", &burst).await;
    }
    // Until every node holds every publisher's value (at most 30 simulated seconds).
    let everywhere = publishers * (NODES - 1);
    let arrived = || {
        fleet
            .arrivals
            .lock()
            .expect("arrivals")
            .get(&burst)
            .map_or(0, Vec::len)
    };
    for _ in 0..300 {
        if arrived() >= everywhere {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        arrived() >= everywhere,
        "the burst never reached every node"
    );
    let (_, datagrams, largest) = fleet.sent();
    assert!(datagrams > 0);
    assert!(largest <= BOUND as u64, "a datagram of {largest} bytes");
}

/// Letters that zstd cannot shrink much: chitchat compresses every delta.
fn incompressible(len: usize, mut seed: u64) -> String {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_value_larger_than_one_datagram_reaches_every_node_in_datagrams_within_the_bound() {
    let fleet = converged(BTreeSet::new()).await;
    // ~3 datagrams of state even compressed: one message of deltas alone could never carry it.
    let big = incompressible(6_000, 0x9e37_79b9_7f4a_7c15);
    fleet.publish(17, "big", &big).await;
    let arrived = || {
        fleet
            .arrivals
            .lock()
            .expect("arrivals")
            .get(&big)
            .map_or(0, Vec::len)
    };
    for _ in 0..100 {
        if arrived() >= NODES - 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        arrived() >= NODES - 1,
        "a 6,000-byte value reached {} of {} other nodes within 10 s",
        arrived(),
        NODES - 1
    );
    let (_, _, largest) = fleet.sent();
    assert!(largest <= BOUND as u64, "a datagram of {largest} bytes");
}

#[tokio::test(start_paused = true)]
async fn nodes_listing_every_member_and_bounded_nodes_share_changes() {
    // Nodes 0 and 1 still send full digests, as in the middle of turning bounded gossip on.
    let fleet = converged(BTreeSet::from([0, 1])).await;
    for from in [0, 1, 60] {
        fleet.publish(from, "mixed", &format!("from-{from}")).await;
    }
    let mut missing = Vec::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let arrivals = fleet.arrivals.lock().expect("arrivals").clone();
        missing = [0, 1, 60]
            .into_iter()
            .filter(|from| {
                arrivals
                    .get(&format!("from-{from}"))
                    .is_none_or(|at| at.len() < NODES - 1)
            })
            .collect();
        if missing.is_empty() {
            break;
        }
    }
    assert!(
        missing.is_empty(),
        "changes from {missing:?} never reached every node"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bounded_mesh_marks_a_killed_node_dead_everywhere() {
    let mut fleet = converged(BTreeSet::new()).await;
    let dead = measure::death(&mut fleet, 42, Duration::from_secs(120)).await;
    assert!(
        dead.is_some(),
        "some node still held the killed node live after 120 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bounded_mesh_marks_no_running_node_dead() {
    let fleet = converged(BTreeSet::new()).await;
    let deaths = measure::false_deaths(&fleet, Duration::from_secs(30)).await;
    assert_eq!(
        deaths, 0,
        "running nodes were marked dead over 30 simulated seconds"
    );
}
