//! Reloading a node's configuration: a prober follows its file through a Kubernetes-style
//! ConfigMap update (a new directory, the `..data` symlink swapped) and through SIGHUP, refuses
//! a broken file with its errors and keeps probing with the config it had, and says so in
//! metrics; an aggregator reloads fifty times under traffic (a world started once, whose
//! named trials each check one thing the fifty reloads had to keep), refuses a broken reload,
//! and drains the sessions of an endpoint a reload disabled. A `libtest-mimic` harness (`main`
//! at the end) runs the trials of the modules of `tests/reload/` and stops the shared world
//! after them.

use std::time::Duration;

mod reload {
    pub mod broken_reload;
    pub mod clients;
    pub mod config_map;
    pub mod drain;
    pub mod events_and_metrics;
    pub mod under_traffic;
    pub mod world;
}

use reload::*;
use test_support::{trials, Shared, Threads};

/// The value of an unlabelled-but-for-node-labels metric line `name{...} value`, matching
/// `needle` in its labels.
fn metric(text: &str, name: &str, needle: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(needle))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

const TOKEN: &str = "secret-token";

/// `POST /-/reload` with the token (or `token`): the status and the JSON answer.
fn post_reload(admin: std::net::SocketAddr, token: Option<&str>) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    s.set_read_timeout(Some(Duration::from_secs(40))).ok();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "POST /-/reload HTTP/1.0\r\nHost: admin\r\n{auth}Content-Length: 0\r\n\r\n"
    )
    .expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("answer");
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_default())
}

static FIFTY: Shared<world::Fifty> = Shared::new(world::start_fifty);

fn main() {
    let alone = trials![
        // The trials with worlds of their own first, beside the fifty reloads' world.
        config_map::a_prober_follows_its_config_map_and_refuses_a_broken_file,
        broken_reload::an_aggregator_refuses_a_broken_reload_and_keeps_serving,
        drain::an_endpoint_disabled_by_a_reload_drains_its_sessions_for_drain_duration,
    ];
    let fifty = trials![FIFTY =>
        under_traffic::every_reload_answers_that_it_reloaded_with_the_next_generation,
        under_traffic::requests_begun_after_a_reload_are_answered_and_never_by_the_endpoint_it_removed,
        under_traffic::an_endpoint_a_reload_adds_takes_traffic_once_voted,
        under_traffic::a_websocket_stays_open_through_every_reload,
        under_traffic::traffic_flows_between_two_reloads,
        under_traffic::a_streaming_download_begun_before_the_reloads_completes,
        under_traffic::no_request_or_query_fails_while_the_aggregator_reloads,
        events_and_metrics::an_endpoint_no_reload_changed_gets_no_event,
        events_and_metrics::each_reload_that_removes_an_endpoint_logs_one_removal_event,
        events_and_metrics::the_generation_and_the_reload_metrics_count_every_reload,
        events_and_metrics::an_endpoint_the_last_reload_removed_no_longer_shows_healthy,
    ];
    let all = [alone, fifty].into_iter().flatten().collect();
    // The fifty reloads' mesh and the other trials' nodes run side by side, as the tests of
    // this file always did.
    trials::run(all, Threads::Cores);
}
