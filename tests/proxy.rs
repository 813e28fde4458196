//! The HTTP reverse proxy of a real `meshlb aggregator`, fed by a real mesh (three probers
//! probing real HTTP origins), driven with curl and plain HTTP clients: weights, least
//! outstanding requests, hash and ip_cookie stickiness, cookie affinity (and a tampered
//! cookie), header override and X-Forwarded-*, trailers both ways, a protocol upgrade tunnel
//! and a real WebSocket session, TLS termination with SNI, 530 when nothing can serve,
//! zero-downtime failover under a steady stream, drains, and TLS to origins.
//!
//! A harness of named trials (libtest-mimic, `harness = false`): the trials of each module
//! under `tests/proxy/` share its world (`world::World`, `drain::DrainWorld`,
//! `origin_tls::OriginTlsWorld`), started once and taken by one trial at a time; each trial
//! waits for the state it needs and puts back what it changed, so they run in any order.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

mod proxy {
    pub mod affinity;
    pub mod drain;
    pub mod failover;
    pub mod messages;
    pub mod metrics;
    pub mod origin_pulls;
    pub mod origin_tls;
    pub mod state_dir;
    pub mod steering;
    pub mod tunnels;
    pub mod world;
}

use proxy::*;
use test_support::{trials, Shared, Threads};

#[derive(Debug, Default)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The origin's name: the first line of its body.
    pub fn origin(&self) -> &str {
        self.body.lines().next().unwrap_or("")
    }
}

/// One request with curl; `extra` are more curl arguments.
pub fn curl(url: &str, host: &str, extra: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args(["-s", "-i", "--max-time", "10"])
        .args(["-H", &format!("Host: {host}")])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A plain HTTP/1.1 request on its own connection: the status code (0 when the proxy could
/// not be reached at all).
pub fn raw_status(proxy: SocketAddr, host: &str, path: &str) -> u16 {
    let Ok(mut s) = TcpStream::connect(proxy) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    if write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return 0;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

static WORLD: Shared<world::World> = Shared::new(world::World::start);
static DRAINS: Shared<drain::DrainWorld> = Shared::new(drain::DrainWorld::start);
static TLS: Shared<origin_tls::OriginTlsWorld> = Shared::new(origin_tls::OriginTlsWorld::start);
static PULLS: Shared<origin_pulls::PullsWorld> = Shared::new(origin_pulls::PullsWorld::start);

fn main() {
    let steady = trials![
        WORLD =>
        messages::a_load_balancer_with_nothing_to_serve_answers_530_naming_itself,
        messages::an_unknown_host_answers_404,
        messages::a_request_head_over_64_kib_is_refused_with_431,
        messages::a_1_mib_chunked_answer_streams_to_the_client_intact,
        messages::an_upload_beyond_the_replay_buffer_reaches_the_origin_whole,
        messages::a_chunked_upload_beyond_the_replay_buffer_reaches_the_origin_whole,
        messages::an_uploads_trailers_reach_the_origin_but_not_framing_ones,
        messages::an_origins_trailers_reach_an_http1_client_that_accepts_them,
        messages::an_origins_trailers_reach_an_http2_client,
        messages::x_forwarded_for_and_proto_reach_the_origin,
        messages::an_endpoints_host_override_replaces_the_clients_host,
        messages::no_te_goes_to_the_origin_when_the_client_takes_no_trailers,
        messages::the_proxy_asks_for_trailers_when_the_client_takes_them,
        messages::a_doubled_or_misplaced_chunked_coding_is_refused_with_400,
        messages::an_h2c_upgrade_is_served_as_http1_without_its_upgrade_fields,
        steering::weights_share_requests_between_endpoints,
        steering::least_outstanding_requests_spares_the_endpoint_holding_requests,
        steering::hash_steering_keeps_a_client_address_on_one_endpoint,
        steering::hash_steering_spreads_client_addresses,
        steering::ip_cookie_affinity_keeps_a_client_address_without_its_cookie,
        affinity::a_cookie_pins_the_client_to_its_endpoint,
        affinity::the_affinity_cookie_is_httponly_samesite_lax_with_the_ttl,
        affinity::a_rules_ttl_override_reissues_the_cookie_on_the_same_endpoint,
        affinity::a_tampered_cookie_is_ignored_and_replaced,
        affinity::a_session_survives_another_endpoints_failure,
        tunnels::a_protocol_upgrade_is_tunnelled_both_ways,
        tunnels::a_websocket_session_runs_through_the_proxy,
        tunnels::tls_termination_picks_the_certificate_by_sni,
        tunnels::http2_over_tls_is_served,
        tunnels::http2_in_clear_with_prior_knowledge_is_served,
        failover::zero_downtime_failover_loses_no_request_when_an_origin_dies,
        failover::failover_across_pools_retries_on_the_next_pool,
        failover::a_refused_origin_answers_521,
        failover::a_dead_origin_stops_getting_requests_within_the_bound,
        metrics::proxy_requests_are_counted_by_load_balancer_pool_endpoint_and_class,
        metrics::affinity_hits_are_counted,
        metrics::the_proxys_own_error_answers_are_counted_by_code,
        metrics::a_connection_the_origin_closes_is_never_reused,
    ];
    let drained = trials![
        DRAINS =>
        drain::a_drained_endpoint_takes_no_new_clients,
        drain::a_drained_endpoint_keeps_its_sessions_within_drain_duration,
        drain::a_drained_endpoints_sessions_move_after_drain_duration,
        drain::a_drain_holds_on_the_other_aggregator,
        drain::an_undrain_holds_on_the_other_aggregator,
        drain::an_undrained_endpoint_takes_new_clients_again,
        drain::a_drain_outlives_the_aggregator_it_was_made_on,
    ];
    let tls = trials![
        TLS =>
        origin_tls::strict_origin_tls_with_the_origins_ca_is_served,
        origin_tls::strict_origin_tls_without_the_origins_ca_answers_526,
        origin_tls::full_origin_tls_to_an_origin_without_tls_answers_525,
        origin_tls::a_renewed_origin_ca_file_is_taken_by_a_reload_of_the_same_config,
    ];
    let pulls = trials![
        PULLS =>
        origin_pulls::a_probe_zone_monitor_judges_a_client_certificate_origin_healthy,
        origin_pulls::an_origin_requiring_a_client_certificate_is_served_through_the_proxy,
        origin_pulls::the_origin_refuses_a_client_without_the_certificate,
    ];
    let others = trials![
        state_dir::drains_survive_a_restart_with_a_state_dir,
        state_dir::a_damaged_state_file_stops_the_start_naming_it,
    ];
    let all = [steady, drained, tls, pulls, others]
        .into_iter()
        .flatten()
        .collect();
    trials::run(all, Threads::PerTrial);
}
