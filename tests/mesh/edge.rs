//! An aggregator at the mesh's edge (`--mesh-edge`, `vendor/chitchat/src/tier.rs`) beside the
//! world's 39 probers and its core aggregator: it tallies what every region votes, and no core
//! node ever holds it.

use std::time::Duration;

use serde_json::Value;

use super::world::World;
use crate::REGIONS;
use test_support::*;

fn node_ids(members: &Value) -> Vec<String> {
    members
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["node_id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every region's verdict on both endpoints, as the edge's tally counts them, is healthy.
fn tallies_every_region(status: &Value) -> bool {
    status["pools"][0]["endpoints"]
        .as_array()
        .is_some_and(|endpoints| {
            endpoints.len() == 2
                && endpoints.iter().all(|e| {
                    e["verdict"] == "healthy"
                        && e["regions"].as_array().is_some_and(|r| {
                            r.len() == REGIONS.len() && r.iter().all(|r| r["verdict"] == true)
                        })
                })
        })
}

pub fn an_edge_aggregator_tallies_every_region_and_no_core_node_holds_it(w: &mut World) {
    w.wait_whole();
    let admin = free_tcp();
    let edge = w.spawn_edge(admin, "edge-enam-1");
    let _edge = Procs(vec![edge]);
    wait_for(
        "the edge to tally every region",
        Duration::from_secs(60),
        || get(admin, "/status").is_some_and(|s| tallies_every_region(&s)),
    );
    let edge_members = node_ids(&get(admin, "/members").expect("the edge's members"));
    assert!(
        edge_members
            .iter()
            .filter(|id| id.starts_with("prober-"))
            .count()
            >= REGIONS.len() * 3,
        "the edge holds every prober: {edge_members:?}"
    );
    let core_members = node_ids(&get(w.admin, "/members").expect("the core's members"));
    assert!(
        !core_members.iter().any(|id| id == "edge-enam-1"),
        "the core aggregator holds the edge: {core_members:?}"
    );
}
