//! A real mesh on loopback: 39 `meshlb prober` processes (13 regions x 3 datacenters) and one
//! `meshlb aggregator`, sealed gossip, real HTTP origins. Killing a minority of probers in
//! every region changes nothing; stopping an origin marks it unhealthy within
//! interval x consecutive_down + 1 s (asserted with a margin; the exact figure is reported by
//! the propagation benchmark); a node with the wrong key never joins.
//!
//! A harness of named trials (libtest-mimic, `harness = false`) over one mesh world
//! (`mesh/world.rs`), started once — the only heavy mesh of this binary — and taken by one
//! trial at a time; each trial waits for the whole mesh at its start and starts again the
//! probers it killed, so they run in any order. Two trials start lone aggregators of their own;
//! one starts an edge aggregator beside the world.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

mod mesh {
    pub mod admin;
    pub mod alone;
    pub mod edge;
    pub mod metrics;
    pub mod votes;
    pub mod world;
}

use mesh::*;
use test_support::{trials, Shared, Threads};

/// Every region x three datacenters = 39 probers, the production shape. (The prober crate is
/// built optimized even in test builds: unoptimized, the AEAD code monomorphized into it made
/// 40 processes saturate two cores.)
pub const REGIONS: [&str; 13] = [
    "WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS",
];

/// `GET /readyz` (no token): its status code and JSON body.
pub fn readyz(admin: SocketAddr) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(s, "GET /readyz HTTP/1.0\r\nHost: admin\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let json = serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()?;
    Some((code, json))
}

pub fn endpoint_verdict(status: &Value, endpoint: &str) -> Option<String> {
    status["pools"][0]["endpoints"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == endpoint)
        .map(|e| e["verdict"].as_str().unwrap_or("").to_string())
}

static WORLD: Shared<world::World> = Shared::new(world::World::start);

fn main() {
    let meshed = trials![
        WORLD =>
        votes::every_region_votes_on_every_endpoint,
        votes::an_aggregator_with_a_verdict_for_every_endpoint_is_ready,
        votes::every_prober_joins_and_a_node_with_the_wrong_key_never_does,
        votes::a_minority_of_probers_killed_in_every_region_changes_nothing,
        votes::a_whole_region_killed_changes_nothing,
        votes::a_stopped_origin_is_voted_down_within_the_bound_and_up_once_back,
        votes::a_verdict_change_is_an_event_with_a_majority_of_regions_behind_it,
        admin::meshlb_explain_reads_the_admin_api,
        admin::meshlb_status_reads_the_admin_api,
        admin::the_whole_mesh_runs_one_config_without_drift,
        admin::the_admin_api_wants_its_token,
        metrics::the_aggregator_exports_states_as_one_hot_gauges,
        metrics::gossip_packets_sealed_with_another_key_are_counted_as_rejected,
        metrics::a_prober_exports_its_probes,
        metrics::a_probers_failed_probes_are_classed_by_reason,
        edge::an_edge_aggregator_tallies_every_region_and_no_core_node_holds_it,
    ];
    let lone = trials![
        alone::an_aggregator_without_verdicts_is_ready_only_after_its_warm_up_timeout,
        alone::explain_uses_the_regions_table_of_the_aggregator,
    ];
    let all = [meshed, lone].into_iter().flatten().collect();
    trials::run(all, Threads::PerTrial);
}
