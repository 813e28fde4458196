//! Reads in Cloudflare's shapes: lists with `result_info`, pool health, the analytics events
//! view, the user-level paths, an `api-version` header, and the 404 envelope of a path the API
//! does not serve.

use serde_json::json;

use super::world::Primary;
use crate::{call, call_with_head, MONITORS, POOLS, READ, WRITE};

pub fn lists_carry_result_info_and_the_read_token_reads_them(w: &mut Primary) {
    let (status, _, list) = call(w.admin, READ, "GET", POOLS, None, &[]);
    assert_eq!(status, 200, "{list:#}");
    assert_eq!(list["result_info"]["count"], json!(2), "{list:#}");
    assert_eq!(list["result_info"]["total_count"], json!(2), "{list:#}");
}

pub fn a_path_the_api_does_not_serve_answers_an_envelope_naming_what_it_serves(w: &mut Primary) {
    let path = format!("{MONITORS}/m/zebras");
    let (status, _, e, head) = call_with_head(w.admin, WRITE, "POST", &path, Some("{}"), &[]);
    assert_eq!(status, 404, "{e:#}");
    assert_eq!(e["success"], json!(false), "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1001), "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("/accounts/{account}/load_balancers/pools/{id}/health"),
        "{message}"
    );
    assert!(head.contains("\r\nx-should-retry: false"), "{head}");
}

pub fn the_user_level_paths_serve_the_same_resources(w: &mut Primary) {
    let id = w.monitor_id();
    let account = format!("{MONITORS}/{id}");
    let user = format!("/client/v4/user/load_balancers/monitors/{id}");
    let (a, _, by_account) = call(w.admin, READ, "GET", &account, None, &[]);
    let (u, _, by_user) = call(w.admin, READ, "GET", &user, None, &[]);
    assert_eq!((a, u), (200, 200), "{by_user:#}");
    assert_eq!(by_account["result"], by_user["result"]);
    let (status, _, refs) = call(
        w.admin,
        READ,
        "GET",
        &format!("{user}/references"),
        None,
        &[],
    );
    assert_eq!(status, 200, "{refs:#}");
}

pub fn an_api_version_header_is_accepted(w: &mut Primary) {
    let version = [("api-version", "2024-01-01")];
    let (status, _, e) = call(w.admin, READ, "GET", POOLS, None, &version);
    assert_eq!(status, 200, "{e:#}");
}

pub fn pool_health_answers_in_cloudflare_shape(w: &mut Primary) {
    let path = format!("{POOLS}/primary-dc-1/health");
    let (status, _, h) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{h:#}");
    assert_eq!(h["result"]["pool_id"], json!("primary-dc-1"));
    let origin = &h["result"]["pop_health"]["WEU"]["origins"][0]["127.0.0.1"];
    assert!(origin.is_object(), "{h:#}");
}

pub fn the_analytics_events_view_answers(w: &mut Primary) {
    let path = "/client/v4/user/load_balancing_analytics/events";
    let (status, _, ev) = call(w.admin, READ, "GET", path, None, &[]);
    assert_eq!(
        (status, ev["success"].clone()),
        (200, json!(true)),
        "{ev:#}"
    );
}
