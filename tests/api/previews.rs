//! Previews: the primary's bounds (how many at once, how many origins, who may start one, a
//! valid monitor, a live prober that can run it), and on the mesh every prober's outcome per
//! origin and region, no config changed, and the preview read on any aggregator.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use test_support::{scrape, wait_for};

use super::mesh_world::Mesh;
use super::world::{cloudflare_pool, Primary};
use crate::{call, MONITORS, POOLS, READ, WRITE};

/// Starts a preview of `body` on `target` (`monitors/{id}` or `pools/{id}`) at `admin`.
pub fn start_preview(
    admin: SocketAddr,
    token: Option<&str>,
    target: &str,
    body: &Value,
) -> (u16, Value) {
    let path = format!("/client/v4/accounts/a/load_balancers/{target}/preview");
    let (status, _, e) = call(admin, token, "POST", &path, Some(&body.to_string()), &[]);
    (status, e)
}

pub fn preview_monitor(path: &str) -> Value {
    json!({ "type": "http", "path": path, "expected_codes": "2xx", "interval": 2, "timeout": 1 })
}

pub fn previews_beyond_the_limit_are_refused_429_and_counted(w: &mut Primary) {
    let mut started = 0;
    for _ in 0..4 {
        let (status, e) = start_preview(w.admin, WRITE, "pools/fallback", &preview_monitor("/"));
        match status {
            200 => started += 1,
            429 => {
                let message = e["errors"][0]["message"].as_str().unwrap_or("");
                assert!(message.contains("--api-preview-max"), "{e:#}");
                assert_eq!(started, 3, "refused after the third: {e:#}");
                let metrics = scrape(w.admin);
                let refused = metrics.lines().any(|l| {
                    l.starts_with("meshlb_api_previews_total{")
                        && l.contains("outcome=\"refused\"")
                        && l.ends_with(" 1")
                });
                assert!(refused, "{metrics}");
                return;
            }
            _ => panic!("{status}: {e:#}"),
        }
    }
    panic!("four previews started with --api-preview-max 3");
}

pub fn a_preview_no_live_prober_can_run_is_refused_at_once_naming_the_regions(w: &mut Primary) {
    // A pool checked from ENAM only: the world's one prober is in WEU.
    let mut pool: Value = serde_json::from_str(&cloudflare_pool(
        "enam-only",
        &w.monitor_id(),
        &[("e", "127.0.0.1", 1.0)],
    ))
    .expect("a pool body");
    pool["check_regions"] = json!(["ENAM"]);
    let (status, _, e) = call(w.admin, WRITE, "POST", POOLS, Some(&pool.to_string()), &[]);
    assert_eq!(status, 200, "{e:#}");
    let (status, e) = start_preview(w.admin, WRITE, "pools/enam-only", &preview_monitor("/"));
    let (deleted, _, d) = call(
        w.admin,
        WRITE,
        "DELETE",
        &format!("{POOLS}/enam-only"),
        None,
        &[],
    );
    assert_eq!(deleted, 200, "{d:#}");
    assert_eq!(status, 503, "{e:#}");
    assert_eq!(e["success"], json!(false), "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("no live prober can run this preview")
            && message.contains("(ENAM)")
            && message.contains("live probers are in: WEU"),
        "{e:#}"
    );
}

pub fn a_preview_probing_more_origins_than_allowed_is_refused(w: &mut Primary) {
    // The monitor is used by two pools of one origin each: two origins, the limit is one.
    let target = format!("monitors/{}", w.monitor_id());
    let (status, e) = start_preview(w.admin, WRITE, &target, &preview_monitor("/"));
    assert_eq!(status, 400, "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("--api-preview-max-origins"), "{e:#}");
}

pub fn a_preview_needs_the_write_token(w: &mut Primary) {
    let (status, e) = start_preview(w.admin, READ, "pools/fallback", &preview_monitor("/"));
    assert_eq!(status, 403, "{e:#}");
}

pub fn an_invalid_preview_monitor_is_refused_with_its_field(w: &mut Primary) {
    let body = json!({ "type": "http", "path": "/", "interval": 2, "timeout": 9 });
    let (status, e) = start_preview(w.admin, WRITE, "pools/fallback", &body);
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(
        e["errors"][0]["source"]["pointer"],
        json!("/timeout"),
        "{e:#}"
    );
}

pub fn an_unknown_preview_is_a_404_envelope(w: &mut Primary) {
    let path = "/client/v4/accounts/a/load_balancers/preview/0123456789abcdef";
    let (status, _, e) = call(w.admin, READ, "GET", path, None, &[]);
    assert_eq!(status, 404, "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1001), "{e:#}");
}

/// The preview `id` read at `admin` once the four probers' outcomes of both origins of pool
/// `eu` are in (30 s at most), and how long that took.
pub fn preview_of_both(admin: SocketAddr, id: &str) -> (Value, Duration) {
    let path = format!("/client/v4/accounts/a/load_balancers/preview/{id}");
    let start = std::time::Instant::now();
    let mut got = Value::Null;
    wait_for("the preview's outcomes", Duration::from_secs(30), || {
        // Another aggregator knows the preview once gossip brought it: 404 until then.
        let (status, _, e) = call(admin, WRITE, "GET", &path, None, &[]);
        got = e["result"].clone();
        let from_every_prober = |o: &Value| {
            o.as_object()
                .and_then(|o| o.values().next())
                .is_some_and(|o| o["regions"]["WEU"]["probers"].as_array().map(Vec::len) == Some(4))
        };
        status == 200
            && got["eu"]["origins"]
                .as_array()
                .is_some_and(|o| o.len() == 2 && o.iter().all(from_every_prober))
    });
    (got, start.elapsed())
}

/// Starts a preview of the monitor `web` with `path` on the primary: its id. The preview's
/// document is the primary's, so the trial first gives pool `eu` the origins it expects.
pub fn preview_web(w: &Mesh, path: &str) -> String {
    let (status, e) = start_preview(w.primary, WRITE, "monitors/web", &preview_monitor(path));
    assert_eq!(status, 200, "{e:#}");
    assert_eq!(e["result"]["pools"], json!({ "eu": "eu" }), "{e:#}");
    e["result"]["preview_id"]
        .as_str()
        .expect("preview_id")
        .to_string()
}

pub fn a_preview_reports_the_origin_its_path_fails_on_unhealthy_per_region(w: &mut Mesh) {
    w.write_origins(true);
    let id = preview_web(w, "/missing");
    let (got, took) = preview_of_both(w.primary, &id);
    println!("every prober's outcomes in {took:?} (the previewed monitor's interval: 2 s)");
    assert!(
        took < Duration::from_secs(4),
        "within two intervals of 2 s: {took:?}"
    );
    let origins = &got["eu"]["origins"];
    let a = &origins[0]["127.0.0.2"];
    let b = &origins[1]["127.0.0.3"];
    assert_eq!(a["healthy"], json!(true), "{got:#}");
    assert_eq!(b["healthy"], json!(false), "{got:#}");
    assert_eq!(b["response_code"], json!(404), "{got:#}");
    assert!(
        b["failure_reason"].as_str().unwrap_or("").contains("404"),
        "{got:#}"
    );
    let weu = &b["regions"]["WEU"];
    assert_eq!(weu["healthy"], json!(false), "{got:#}");
    assert_eq!(weu["probers"].as_array().map(Vec::len), Some(4), "{got:#}");
}

pub fn a_preview_changes_no_config(w: &mut Mesh) {
    w.write_origins(true);
    let before = w.generation();
    let id = preview_web(w, "/missing");
    preview_of_both(w.primary, &id);
    assert_eq!(w.generation(), before);
    let (_, _, monitor) = call(
        w.primary,
        WRITE,
        "GET",
        &format!("{MONITORS}/web"),
        None,
        &[],
    );
    assert_eq!(monitor["result"]["path"], json!("/"), "{monitor:#}");
}

pub fn a_preview_is_read_on_any_aggregator(w: &mut Mesh) {
    w.write_origins(true);
    let id = preview_web(w, "/");
    let (got, _) = preview_of_both(w.secondary, &id);
    assert_eq!(got["eu"]["healthy"], json!(true), "{got:#}");
}
