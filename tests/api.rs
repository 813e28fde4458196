//! The control plane (docs/api.md): Cloudflare-shaped bodies for monitors, pools and load
//! balancers written through the primary's API, refused field by field where meshlb lacks a
//! field; `If-Match` conflicts; tokens and their scopes; and one write reaching every node of a
//! mesh — probers and a second aggregator started with `--config-from-mesh` — which then serve
//! it, catch up after a pause, refuse what does not validate on their side, and keep serving
//! when the primary is gone.
//!
//! Two worlds, each started once and shared by the named trials of its behaviours (a
//! `libtest-mimic` harness, `main` below, over the modules of `tests/api/`): a config primary
//! (`PRIMARY`, `world::Primary`) and a mesh following one (`MESH`, `mesh_world::Mesh`). Each
//! trial locks its world and establishes the state it needs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

mod api {
    pub mod auth;
    pub mod cli;
    pub mod config_file;
    pub mod etags;
    pub mod flags;
    pub mod following;
    pub mod limits;
    pub mod mesh_world;
    pub mod previews;
    pub mod reads;
    pub mod references;
    pub mod world;
    pub mod writes;
}

use api::*;
use test_support::{trials, Shared, Threads};

/// One API call: (status, ETag, JSON body or the text as a string).
fn call(
    admin: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String, Value) {
    let (status, etag, value, _) = call_with_head(admin, token, method, path, body, headers);
    (status, etag, value)
}

/// One API call, with the answer's head (status line and headers, lowercase) as well.
fn call_with_head(
    admin: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String, Value, String) {
    let mut s = TcpStream::connect(admin).expect("admin API");
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: admin\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    head.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    s.write_all(head.as_bytes()).expect("write");
    s.write_all(body.as_bytes()).expect("write body");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("reply");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let etag = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("etag: ")
                .map(str::to_string)
        })
        .unwrap_or_default()
        .trim_matches('"')
        .to_string();
    let value = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string()));
    (status, etag, value, head.to_ascii_lowercase())
}

const WRITE: Option<&str> = Some("secret-token");
const READ: Option<&str> = Some("read-only-token");

const POOLS: &str = "/client/v4/accounts/023e105f4ecef8ad9ca31a8372d0c353/load_balancers/pools";
const MONITORS: &str =
    "/client/v4/accounts/023e105f4ecef8ad9ca31a8372d0c353/load_balancers/monitors";
const LBS: &str = "/client/v4/zones/example.com/load_balancers";

static PRIMARY: Shared<world::Primary> = Shared::new(world::start_primary_world);
static MESH: Shared<mesh_world::Mesh> = Shared::new(mesh_world::start_mesh_world);

fn main() {
    let primary = trials![PRIMARY =>
        writes::a_cloudflare_monitor_body_is_accepted_with_a_generated_id,
        writes::cloudflare_pool_bodies_are_accepted_with_their_name_as_id,
        writes::a_cloudflare_load_balancer_body_is_accepted_with_its_steering,
        etags::each_write_answers_the_next_generation_as_its_etag,
        writes::bad_fields_are_refused_each_with_its_path_and_nothing_is_written,
        writes::a_value_of_the_wrong_type_is_refused_with_its_path,
        reads::lists_carry_result_info_and_the_read_token_reads_them,
        auth::the_read_token_cannot_write,
        auth::the_read_token_cannot_read_the_config_file_or_a_tunnel_token,
        auth::a_request_without_a_token_is_refused_401,
        auth::a_write_from_another_site_is_refused_403,
        etags::a_second_write_based_on_the_same_generation_is_a_conflict,
        etags::a_conflict_tells_the_client_not_to_retry,
        references::a_monitor_lists_the_pools_that_use_it_as_referrers,
        references::a_pool_lists_its_load_balancer_and_its_monitor,
        references::pools_filtered_by_a_monitor_are_the_ones_that_use_it,
        reads::a_path_the_api_does_not_serve_answers_an_envelope_naming_what_it_serves,
        references::a_pool_in_use_cannot_be_deleted_and_the_error_names_the_reference,
        etags::a_resource_read_can_be_written_back_unchanged_making_no_generation,
        writes::a_put_that_renames_is_refused,
        reads::pool_health_answers_in_cloudflare_shape,
        reads::the_analytics_events_view_answers,
        config_file::the_file_holds_the_generation_in_force_and_keeps_the_one_before,
        config_file::the_written_file_passes_meshlb_check,
        cli::meshlb_pools_list_shows_each_pool_with_its_description,
        cli::meshlb_pools_apply_creates_then_replaces_and_get_and_delete_work,
        cli::meshlb_monitor_groups_apply_creates_a_group_that_list_shows_and_delete_removes,
        config_file::meshlb_config_diff_shows_what_a_push_would_change,
        config_file::a_config_push_based_on_a_stale_generation_is_refused_409,
        config_file::meshlb_config_push_writes_the_file_verbatim,
        previews::previews_beyond_the_limit_are_refused_429_and_counted,
        previews::a_preview_no_live_prober_can_run_is_refused_at_once_naming_the_regions,
        previews::a_preview_probing_more_origins_than_allowed_is_refused,
        previews::a_preview_needs_the_write_token,
        previews::an_invalid_preview_monitor_is_refused_with_its_field,
        previews::an_unknown_preview_is_a_404_envelope,
        reads::the_user_level_paths_serve_the_same_resources,
        reads::an_api_version_header_is_accepted,
        references::search_finds_a_resource_by_its_description,
        writes::a_pool_notification_email_without_an_email_channel_is_refused,
        writes::a_bulk_patch_of_pools_takes_only_notification_email,
    ];
    let mesh = trials![MESH =>
        following::a_write_reaches_every_node_at_its_generation,
        following::a_follower_aggregator_serves_what_the_primary_wrote,
        following::a_write_on_a_follower_is_refused_421_naming_the_primary,
        following::a_paused_prober_catches_up_on_a_write_it_missed,
        following::a_document_one_node_cannot_validate_is_refused_there_and_reported,
        following::without_the_primary_a_follower_keeps_serving_and_writes_wait,
        previews::a_preview_reports_the_origin_its_path_fails_on_unhealthy_per_region,
        previews::a_preview_changes_no_config,
        previews::a_preview_is_read_on_any_aggregator,
    ];
    let alone = trials![
        flags::every_control_plane_flag_is_documented,
        limits::request_bodies_are_bounded_in_size_and_time_and_fetches_need_the_cluster_key,
    ];
    let all = [primary, mesh, alone].into_iter().flatten().collect();
    // The two worlds and the limits' primary are light enough to run side by side, as the
    // tests of this file always did.
    trials::run(all, Threads::Cores);
}
