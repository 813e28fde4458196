//! The chaos trials, one behaviour each, in the order they run (the order of the one function
//! they were before): a trial that needs the state an earlier one left says so, and
//! establishes it itself, so each passes alone, in order and reversed
//! (`MESHLB_TRIALS_REVERSED=1`). Each returns the row it adds to the report; it passes when the
//! row does.

mod aggregators;
mod control;
mod failover;
mod probers;
mod steering;

use crate::mesh::Mesh;
use crate::report::Outcome;

/// A trial: its name (the behaviour it checks) and what it runs.
pub type Trial = (&'static str, fn(&mut Mesh) -> Outcome);

/// `(name, function)` pairs named after the functions.
macro_rules! trials {
    ($($module:ident::$name:ident),* $(,)?) => {
        &[$((stringify!($name), $module::$name as fn(&mut Mesh) -> Outcome)),*]
    };
}

/// Every trial, in running order.
pub const ALL: &[Trial] = trials![
    probers::killing_a_minority_of_probers_changes_no_verdict,
    probers::killing_every_prober_of_one_region_changes_no_verdict,
    probers::a_partitioned_region_changes_no_verdict_and_rejoins,
    failover::an_origin_s_death_and_return_are_seen_within_the_bound,
    failover::two_pools_losing_every_origin_at_once_fail_over_within_the_bound,
    failover::pools_fail_over_in_order_to_a_fallback_that_serves_even_when_down,
    failover::a_disabled_fallback_answers_nodata_and_530_and_serves_again_when_enabled,
    failover::pools_recover_in_order_as_their_origins_return,
    steering::dynamic_steering_leaves_a_pool_whose_latency_rises,
    aggregators::killing_an_aggregator_fails_no_request_through_the_other,
    aggregators::a_restarted_aggregator_is_ready_and_answers_from_the_primary_pool,
    probers::restarting_the_whole_prober_fleet_makes_no_flapping,
    control::a_config_write_reaches_every_node_under_load_without_a_false_change_or_failed_request,
    failover::a_killed_tcp_origin_cuts_at_most_the_open_layer4_connection,
    control::a_weight_written_on_the_primary_moves_the_follower_s_traffic_split,
    control::a_pool_written_on_the_primary_takes_the_follower_s_traffic_once_probed,
    control::an_endpoint_deleted_on_the_primary_takes_none_of_the_follower_s_traffic,
];

/// Unix time in ms, as the aggregators' events give it.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

/// The addresses of origins `names`, sorted.
fn ip_of(m: &Mesh, names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|n| m.addr[*n].to_string()).collect();
    v.sort();
    v
}

/// agg1's answer for fo.chaos.test: (status, sorted addresses).
fn answer(m: &Mesh) -> (String, Vec<String>) {
    let (status, mut a) = m.dig(0, "fo.chaos.test");
    a.sort();
    (status, a)
}
