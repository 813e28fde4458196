//! Hostile clients against a real aggregator and prober: each attack, and the defence that
//! holds (docs/security.md).
//!
//! A harness of named trials (libtest-mimic, `harness = false`) over the modules of
//! `tests/hostile/`, each named for what its attacks aim at. Every trial starts the nodes it
//! attacks (`world.rs` has the starts and the tools the trials share), so they run side by
//! side in any order.

mod hostile {
    pub mod admin;
    pub mod dns;
    pub mod http2;
    pub mod insiders;
    pub mod limits;
    pub mod slow_clients;
    pub mod vital_tasks;
    pub mod world;
}

use hostile::*;
use test_support::{trials, Threads};

fn main() {
    let all = trials![
        admin::admin_changes_need_the_token_and_never_come_from_a_browser,
        admin::a_request_head_that_never_ends_is_cut_at_the_admin_head_timeout,
        http2::connections_that_send_part_of_the_http2_preface_cost_next_to_nothing,
        vital_tasks::a_node_whose_vital_task_ends_exits_non_zero_naming_it,
        admin::admin_connections_beyond_the_limit_are_closed_and_counted,
        insiders::votes_count_only_from_datacenters_the_regions_table_lists,
        limits::invented_header_sessions_are_bounded_and_counted,
        dns::dns_tcp_connections_are_capped_and_idle_ones_closed,
        dns::dns_answers_over_the_rate_slip_to_tcp_or_are_dropped,
        slow_clients::a_request_body_that_dribbles_is_cut_at_the_body_timeout,
        slow_clients::a_client_that_never_reads_frees_the_origin_at_the_send_timeout,
        slow_clients::an_http2_client_that_opens_no_window_frees_the_origin_at_the_send_timeout,
        http2::an_idle_http2_connection_is_closed_with_a_goaway,
        limits::connections_beyond_a_workers_limit_are_closed_and_counted,
        limits::upgraded_connections_count_against_the_workers_limit,
        http2::an_http2_answer_that_outlasts_the_idle_timeout_is_not_cut,
        insiders::drains_forged_by_a_prober_or_stamped_in_the_future_change_nothing,
    ];
    trials::run(all, Threads::Cores);
}
