//! What a real `meshlb aggregator` records of what it served: the proxy's access log (JSON
//! and combined), the layer-4 log, dnstap read back by BIND's `dnstap-read` and collected by
//! `fstrm_capture`, SIGUSR1's reopen, a stalled collector's drops, and `--log-format json`.
//!
//! A harness of named trials (`test_support::trials`): the trials of each module under
//! `tests/records/` share its world, and find their own records by a request id, a source
//! port or a query name of their own, so they run in any order.

mod records {
    pub mod access;
    pub mod collectors;
    pub mod layer4;
    pub mod world;
}

use records::*;
use test_support::{trials, Threads};

fn main() {
    let mut all = trials![world::WORLD =>
        access::a_geo_steered_request_is_recorded_with_its_pool_region_and_reason,
        access::an_affinity_hit_is_recorded_as_one,
        access::a_fallback_is_recorded_as_the_reason,
        access::a_refused_origin_is_a_521_recorded_with_cloudflares_class,
        access::a_zero_downtime_retry_is_recorded_with_the_endpoint_it_left,
        access::a_clients_request_id_is_kept_passed_on_and_returned,
        access::a_malformed_request_id_is_replaced_by_a_new_one,
        access::sigusr1_reopens_the_access_log_after_a_rename,
        layer4::a_tcp_connection_leaves_one_record_with_its_bytes_and_close,
        layer4::a_udp_flow_leaves_one_record_when_it_idles_out,
        collectors::dnstap_read_shows_a_query_and_its_answer_from_the_file,
        collectors::json_process_logs_carry_a_reloads_fields,
    ];
    all.extend(trials![world::COMBINED =>
        access::the_combined_format_parses_with_the_common_regex,
        collectors::fstrm_capture_collects_dnstap_over_the_socket,
        collectors::a_collector_that_comes_back_is_reconnected,
    ]);
    all.extend(trials![world::STALLED =>
        collectors::a_collector_that_never_reads_costs_dropped_records_not_answers,
    ]);
    test_support::trials::run(all, Threads::One);
}
