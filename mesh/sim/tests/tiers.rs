//! Tiers (`vendor/chitchat/src/tier.rs`) on the simulated WAN: 40 core members and 160 edges,
//! on tokio's paused clock (the deadlines are simulated time). The fleet is started once per
//! test: each test kills or publishes on it.

use std::collections::BTreeSet;
use std::time::Duration;

use mesh_sim::fleet::{self, Fleet};
use mesh_sim::measure;
use mesh_sim::net::{NetSettings, Rtt, SimNet};

const NODES: usize = 200;
const CORE: usize = 40;

async fn converged() -> Fleet {
    let net = SimNet::new(NetSettings {
        rtt: Rtt::Uniform(Duration::from_millis(100)),
        loss: 0.01,
        ..NetSettings::default()
    });
    let fleet = Fleet::start_tiered(net, NODES, CORE, Duration::from_millis(100), Some(1_400))
        .await
        .expect("fleet");
    assert!(
        fleet
            .wait_converged(Duration::from_secs(60))
            .await
            .is_some(),
        "the edges never all held every core member live"
    );
    fleet
}

/// The node ids node `i` holds state of.
async fn held(fleet: &Fleet, i: usize) -> BTreeSet<String> {
    let handle = fleet.handle(i).expect("running");
    let chitchat = handle.chitchat();
    let chitchat = chitchat.lock().await;
    chitchat
        .node_states()
        .keys()
        .map(|id| id.node_id.to_string())
        .collect()
}

fn core_ids() -> BTreeSet<String> {
    (0..CORE).map(|i| format!("n{i}")).collect()
}

#[tokio::test(start_paused = true)]
async fn edges_hold_the_core_and_themselves_and_the_core_holds_no_edge() {
    let fleet = converged().await;
    // Changes that reached every node: the gossip ran past any edge's own state.
    let spreads = measure::propagation(&fleet, 5, Duration::from_millis(200), 9).await;
    assert!(
        spreads.iter().all(|s| s.all.is_some()),
        "a change missed a node"
    );
    for i in 0..NODES {
        let mut expected = core_ids();
        expected.insert(format!("n{i}"));
        assert_eq!(
            held(&fleet, i).await,
            expected,
            "node n{i} holds other members"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_core_change_reaches_every_edge_within_two_seconds() {
    let fleet = converged().await;
    let spreads = measure::propagation(&fleet, 10, Duration::from_millis(200), 3).await;
    for spread in spreads {
        let all = spread.all.expect("a change never reached every node");
        assert!(all < Duration::from_secs(2), "a change took {all:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_edge_s_own_keys_never_reach_another_node() {
    let fleet = converged().await;
    let edge = NODES - 1;
    fleet.publish(edge, "own", "edge-only").await;
    // A core change published after it, to every node, shows the gossip ran past it.
    fleet.publish(0, "after", "core-change").await;
    let spreads_done = async {
        loop {
            let got = fleet
                .arrivals
                .lock()
                .map(|a| a.get("core-change").map_or(0, Vec::len))
                .unwrap_or(0);
            if got >= NODES - 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), spreads_done)
        .await
        .expect("the core change never reached every node");
    let arrivals = fleet.arrivals.lock().expect("lock");
    let own = arrivals.get("edge-only").map_or(0, Vec::len);
    // The edge's own listener may hear its own write; no other node does.
    assert!(own <= 1, "{own} nodes got an edge's own key");
}

#[tokio::test(start_paused = true)]
async fn a_stopped_edge_leaves_every_view_within_the_ttl() {
    let mut fleet = converged().await;
    let edge = NODES - 2;
    fleet.kill(edge).await.expect("killed");
    let addr = fleet::addr(edge);
    let ttl = chitchat::ViewSettings::default().ttl;
    let gone = async {
        loop {
            let mut held_by = 0;
            for i in 0..NODES {
                if let Some(h) = fleet.handle(i) {
                    if h.chitchat().lock().await.view().contains(&addr) {
                        held_by += 1;
                    }
                }
            }
            if held_by == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::time::timeout(ttl + Duration::from_secs(5), gone)
        .await
        .expect("a stopped edge stayed in some view past the ttl");
}

#[tokio::test(start_paused = true)]
async fn a_killed_core_member_is_dead_to_every_edge() {
    let mut fleet = converged().await;
    let took = measure::death(&mut fleet, CORE / 2, Duration::from_secs(30)).await;
    assert!(
        took.is_some(),
        "a killed core member stayed live to some node"
    );
}

#[tokio::test(start_paused = true)]
async fn no_running_node_is_marked_dead_in_a_tiered_mesh() {
    let fleet = converged().await;
    let deaths = measure::false_deaths(&fleet, Duration::from_secs(60)).await;
    assert_eq!(deaths, 0);
}
