//! The control plane (docs/api.md): Cloudflare-shaped bodies for monitors, pools and load
//! balancers written through the primary's API, refused field by field where meshlb lacks a
//! field; `If-Match` conflicts; tokens and their scopes; and one write reaching every node of a
//! mesh — probers and a second aggregator started with `--config-from-mesh` — which then serve
//! it, catch up after a pause, refuse what does not validate on their side, and keep serving
//! when the primary is gone.
//!
//! Two worlds, each started once and shared by the named trials of its behaviours (a
//! `libtest-mimic` harness, `main` below): a config primary (`PRIMARY`) and a mesh following
//! one (`MESH`). Each trial locks its world and establishes the state it needs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};

use test_support::*;

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

/// Cloudflare's documentation example of a monitor (`POST .../load_balancers/monitors`),
/// with the fields meshlb has and values a loopback origin answers.
fn cloudflare_monitor(port: u16) -> String {
    json!({
        "allow_insecure": true,
        "consecutive_down": 0,
        "consecutive_up": 0,
        "description": "Login page monitor",
        "expected_body": "ok",
        "expected_codes": "2xx",
        "follow_redirects": true,
        "header": { "Host": ["example.com"], "X-App-ID": ["abc123"] },
        "interval": 5,
        "method": "GET",
        "path": "/health",
        "port": port,
        "retries": 0,
        "timeout": 2,
        "type": "http"
    })
    .to_string()
}

/// Cloudflare's example of a pool (`POST .../load_balancers/pools`), fields meshlb has.
fn cloudflare_pool(name: &str, monitor: &str, origins: &[(&str, &str, f64)]) -> String {
    let origins: Vec<Value> = origins
        .iter()
        .map(|(name, address, weight)| {
            json!({
                "address": address,
                "enabled": true,
                "header": { "Host": ["example.com"] },
                "name": name,
                "port": 0,
                "weight": weight
            })
        })
        .collect();
    json!({
        "name": name,
        "origins": origins,
        "check_regions": ["WEU"],
        "description": "Primary data center - Provider XYZ",
        "enabled": true,
        "latitude": 50.1,
        "load_shedding": {
            "default_percent": 0, "default_policy": "random",
            "session_percent": 0, "session_policy": "hash"
        },
        "longitude": 8.7,
        "minimum_origins": 1,
        "monitor": monitor,
        "notification_filter": {
            "origin": { "disable": false, "healthy": true },
            "pool": { "disable": false, "healthy": false }
        },
        "origin_steering": { "policy": "random" }
    })
    .to_string()
}

/// Cloudflare's example of a load balancer (`POST /zones/{zone}/load_balancers`), fields
/// meshlb has.
fn cloudflare_lb(name: &str, pools: &[&str], fallback: &str) -> String {
    json!({
        "default_pools": pools,
        "fallback_pool": fallback,
        "name": name,
        "adaptive_routing": { "failover_across_pools": true },
        "country_pools": { "GB": [pools[0]], "US": pools },
        "description": "Load Balancer for www.example.com",
        "location_strategy": { "mode": "resolver_ip", "prefer_ecs": "always" },
        "proxied": true,
        "random_steering": { "default_weight": 0.2, "pool_weights": { pools[0]: 0.4 } },
        "region_pools": { "WNAM": pools, "ENAM": [pools[0]] },
        "session_affinity": "cookie",
        "session_affinity_attributes": {
            "drain_duration": 100, "samesite": "Auto", "secure": "Auto",
            "zero_downtime_failover": "sticky"
        },
        "session_affinity_ttl": 1800,
        "steering_policy": "dynamic_latency",
        "ttl": 30
    })
    .to_string()
}

const POOLS: &str = "/client/v4/accounts/023e105f4ecef8ad9ca31a8372d0c353/load_balancers/pools";
const MONITORS: &str =
    "/client/v4/accounts/023e105f4ecef8ad9ca31a8372d0c353/load_balancers/monitors";
const LBS: &str = "/client/v4/zones/example.com/load_balancers";

fn tokens(dir: &std::path::Path) -> Vec<String> {
    let read = dir.join("read-token");
    std::fs::write(&read, "read-only-token").expect("read token");
    let mut args = admin_token_args(dir);
    args.extend(["--admin-read-token-file".into(), read.display().to_string()]);
    args
}

/// A config primary on an empty `config` with `args` (its tokens and limits), up.
fn start_primary(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    args: Vec<String>,
) -> Procs {
    start_primary_seeded(config, key, admin, free_udp(), args)
}

/// [`start_primary`] gossiping with `seed` (a prober's address: no other node is its seed).
fn start_primary_seeded(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    seed: SocketAddr,
    mut args: Vec<String>,
) -> Procs {
    std::fs::write(config, "").expect("empty config");
    args.push("--config-primary".into());
    let procs = Procs(vec![start_aggregator(
        config, key, "WEU", admin, seed, &args,
    )]);
    wait_up(admin);
    procs
}

fn wait_up(admin: SocketAddr) {
    wait_for("the admin API", Duration::from_secs(30), || {
        TcpStream::connect(admin).is_ok()
    });
}

/// A config primary on an empty file, with the write and the read token, at most three
/// previews of one origin each, and what its first writes answered: Cloudflare's example monitor, two pools (`primary-dc-1` and `fallback`)
/// and a load balancer over them, written in that order as the trials below find them.
struct Primary {
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
    admin: SocketAddr,
    monitor: (u16, String, Value),
    pool: (u16, String, Value),
    fallback: (u16, String, Value),
    lb: (u16, String, Value),
    _origin: Origin,
    _procs: Procs,
}

fn start_primary_world() -> Primary {
    let (dir, key) = scratch_dir_with_key("api");
    let config = dir.path().join("meshlb.toml");
    let admin = free_tcp();
    let mut args = tokens(dir.path());
    args.extend(["--api-preview-max", "3", "--api-preview-max-origins", "1"].map(String::from));
    // One prober in WEU, following the primary's config, runs the previews (a preview no live
    // prober can run is refused).
    let seed = free_udp();
    let mut procs = start_primary_seeded(&config, &key, admin, seed, args);
    let mut prober = prober_args(dir.path(), &key, seed, 0);
    if let Some(i) = prober.iter().position(|a| a == "--listen") {
        prober[i + 1] = seed.to_string();
    }
    procs.0.push(node(&prober));
    wait_for("the prober in the mesh", Duration::from_secs(60), || {
        members_at(admin, 1).0 == 2
    });
    let origin = origin();
    let monitor = call(
        admin,
        WRITE,
        "POST",
        MONITORS,
        Some(&cloudflare_monitor(origin.port)),
        &[],
    );
    let id = monitor.2["result"]["id"].as_str().unwrap_or("").to_string();
    let pool = cloudflare_pool("primary-dc-1", &id, &[("app-server-1", "127.0.0.1", 0.6)]);
    let pool = call(admin, WRITE, "POST", POOLS, Some(&pool), &[]);
    let fallback = cloudflare_pool("fallback", &id, &[("b", "127.0.0.1", 1.0)]);
    let fallback = call(admin, WRITE, "POST", POOLS, Some(&fallback), &[]);
    let lb = cloudflare_lb("www.example.com", &["primary-dc-1"], "fallback");
    let lb = call(admin, WRITE, "POST", LBS, Some(&lb), &[]);
    Primary {
        dir,
        config,
        admin,
        monitor,
        pool,
        fallback,
        lb,
        _origin: origin,
        _procs: procs,
    }
}

static PRIMARY: Shared<Primary> = Shared::new(start_primary_world);

impl Primary {
    /// The id the API gave the monitor.
    fn monitor_id(&self) -> String {
        let m = &self.monitor.2;
        m["result"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("the monitor was not created: {m:#}"))
            .to_string()
    }

    /// The generation in force (`GET /config`).
    fn generation(&self) -> u64 {
        let (_, _, state) = call(self.admin, READ, "GET", "/config", None, &[]);
        state["result"]["generation"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generation in {state:#}"))
    }

    /// `meshlb ARGS --admin ... --token-file ...`: exit code, stdout, stderr.
    fn cli(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let token = self.dir.path().join("admin-token");
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(args)
            .args(["--admin", &self.admin.to_string()])
            .args(["--token-file", token.to_str().unwrap()])
            .output()
            .expect("meshlb");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    /// The file in force with the monitor's description edited, written beside it.
    fn edited_config(&self) -> (std::path::PathBuf, String) {
        let edited = std::fs::read_to_string(&self.config)
            .expect("config")
            .replace("Login page monitor", "Edited monitor");
        assert!(edited.contains("Edited monitor"), "{edited}");
        let next = self.dir.path().join("next.toml");
        std::fs::write(&next, &edited).expect("next");
        (next, edited)
    }
}

fn a_cloudflare_monitor_body_is_accepted_with_a_generated_id(w: &mut Primary) {
    let (status, _, m) = &w.monitor;
    assert_eq!(*status, 200, "{m:#}");
    assert_eq!(
        (
            m["success"].clone(),
            m["errors"].clone(),
            m["messages"].clone()
        ),
        (json!(true), json!([]), json!([]))
    );
    let id = w.monitor_id();
    assert_eq!(id.len(), 32, "a Cloudflare-like generated id: {id}");
    assert_eq!(m["result"]["header"]["X-App-ID"], json!(["abc123"]));
}

fn cloudflare_pool_bodies_are_accepted_with_their_name_as_id(w: &mut Primary) {
    let (status, _, p) = &w.pool;
    assert_eq!(*status, 200, "{p:#}");
    assert_eq!(p["result"]["id"], json!("primary-dc-1"));
    assert_eq!(w.fallback.0, 200, "{:#}", w.fallback.2);
}

fn a_cloudflare_load_balancer_body_is_accepted_with_its_steering(w: &mut Primary) {
    let (status, _, l) = &w.lb;
    assert_eq!(*status, 200, "{l:#}");
    assert_eq!(l["result"]["steering_policy"], json!("dynamic_latency"));
}

fn each_write_answers_the_next_generation_as_its_etag(w: &mut Primary) {
    let etags = [&w.monitor.1, &w.pool.1, &w.fallback.1, &w.lb.1];
    assert_eq!(
        etags,
        ["2", "3", "4", "5"],
        "the empty file was generation 1, then one per write"
    );
}

fn fields_meshlb_lacks_are_refused_each_with_its_path_and_nothing_is_written(w: &mut Primary) {
    let before = w.generation();
    let monitor = w.monitor_id();
    let mut unsupported: Value =
        serde_json::from_str(&cloudflare_pool("p2", &monitor, &[("a", "127.0.0.1", 1.0)]))
            .expect("json");
    unsupported["origins"][0]["virtual_network_id"] = json!("a5624d4e-044a-4ff0-b3e1-e2465353d4b4");
    unsupported["notification_email"] = json!("someone@example.com");
    let body = unsupported.to_string();
    let (status, etag, e) = call(w.admin, WRITE, "POST", POOLS, Some(&body), &[]);
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(e["success"], json!(false));
    assert_eq!(etag, before.to_string(), "nothing was written");
    assert_eq!(w.generation(), before, "nothing was written");
    let pointers: Vec<&str> = e["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|x| x["source"]["pointer"].as_str())
        .collect();
    assert!(pointers.contains(&"/origins/0/virtual_network_id"), "{e:#}");
    assert!(pointers.contains(&"/notification_email"), "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("unknown field"), "{e:#}");
}

fn a_value_of_the_wrong_type_is_refused_with_its_path(w: &mut Primary) {
    let (status, _, e) = call(
        w.admin,
        WRITE,
        "PATCH",
        &format!("{POOLS}/primary-dc-1"),
        Some(r#"{"minimum_origins": "two"}"#),
        &[],
    );
    assert_eq!(status, 400, "{e:#}");
    let pointer = &e["errors"][0]["source"]["pointer"];
    assert_eq!(pointer, &json!("/minimum_origins"), "{e:#}");
}

fn lists_carry_result_info_and_the_read_token_reads_them(w: &mut Primary) {
    let (status, _, list) = call(w.admin, READ, "GET", POOLS, None, &[]);
    assert_eq!(status, 200, "{list:#}");
    assert_eq!(list["result_info"]["count"], json!(2), "{list:#}");
    assert_eq!(list["result_info"]["total_count"], json!(2), "{list:#}");
}

fn the_read_token_cannot_write(w: &mut Primary) {
    let path = format!("{POOLS}/fallback");
    let (status, _, e) = call(w.admin, READ, "DELETE", &path, None, &[]);
    assert_eq!((status, e["errors"][0]["code"].clone()), (403, json!(1005)));
}

fn a_request_without_a_token_is_refused_401(w: &mut Primary) {
    assert_eq!(call(w.admin, None, "GET", POOLS, None, &[]).0, 401);
}

fn a_write_from_another_site_is_refused_403(w: &mut Primary) {
    let evil = [("Origin", "https://evil.example")];
    assert_eq!(
        call(w.admin, WRITE, "POST", POOLS, Some("{}"), &evil).0,
        403
    );
}

fn a_second_write_based_on_the_same_generation_is_a_conflict(w: &mut Primary) {
    let based_on = format!("\"{}\"", w.generation());
    let path = format!("{POOLS}/fallback");
    let if_match = [("If-Match", based_on.as_str())];
    let patch = r#"{"description": "edited"}"#;
    let (first, etag, e) = call(w.admin, WRITE, "PATCH", &path, Some(patch), &if_match);
    assert_eq!(first, 200, "the first lands: {e:#}");
    assert_eq!(etag, w.generation().to_string());
    let again = r#"{"description": "again"}"#;
    let (second, _, e) = call(w.admin, WRITE, "PATCH", &path, Some(again), &if_match);
    assert_eq!(second, 409, "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1003));
}

fn a_conflict_tells_the_client_not_to_retry(w: &mut Primary) {
    let stale = [("If-Match", "\"0\"")];
    let patch = r#"{"description": "stale"}"#;
    let path = format!("{POOLS}/fallback");
    let (status, _, e, head) = call_with_head(w.admin, WRITE, "PATCH", &path, Some(patch), &stale);
    assert_eq!(status, 409, "{e:#}");
    assert!(head.contains("\r\nx-should-retry: false"), "{head}");
}

fn a_path_the_api_does_not_serve_answers_an_envelope_naming_what_it_serves(w: &mut Primary) {
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

/// Starts a preview of `body` on `target` (`monitors/{id}` or `pools/{id}`) at `admin`.
fn start_preview(
    admin: SocketAddr,
    token: Option<&str>,
    target: &str,
    body: &Value,
) -> (u16, Value) {
    let path = format!("/client/v4/accounts/a/load_balancers/{target}/preview");
    let (status, _, e) = call(admin, token, "POST", &path, Some(&body.to_string()), &[]);
    (status, e)
}

fn preview_monitor(path: &str) -> Value {
    json!({ "type": "http", "path": path, "expected_codes": "2xx", "interval": 2, "timeout": 1 })
}

fn previews_beyond_the_limit_are_refused_429_and_counted(w: &mut Primary) {
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

fn a_preview_no_live_prober_can_run_is_refused_at_once_naming_the_regions(w: &mut Primary) {
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

fn a_preview_probing_more_origins_than_allowed_is_refused(w: &mut Primary) {
    // The monitor is used by two pools of one origin each: two origins, the limit is one.
    let target = format!("monitors/{}", w.monitor_id());
    let (status, e) = start_preview(w.admin, WRITE, &target, &preview_monitor("/"));
    assert_eq!(status, 400, "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("--api-preview-max-origins"), "{e:#}");
}

fn a_preview_needs_the_write_token(w: &mut Primary) {
    let (status, e) = start_preview(w.admin, READ, "pools/fallback", &preview_monitor("/"));
    assert_eq!(status, 403, "{e:#}");
}

fn an_invalid_preview_monitor_is_refused_with_its_field(w: &mut Primary) {
    let body = json!({ "type": "http", "path": "/", "interval": 2, "timeout": 9 });
    let (status, e) = start_preview(w.admin, WRITE, "pools/fallback", &body);
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(
        e["errors"][0]["source"]["pointer"],
        json!("/timeout"),
        "{e:#}"
    );
}

fn an_unknown_preview_is_a_404_envelope(w: &mut Primary) {
    let path = "/client/v4/accounts/a/load_balancers/preview/0123456789abcdef";
    let (status, _, e) = call(w.admin, READ, "GET", path, None, &[]);
    assert_eq!(status, 404, "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1001), "{e:#}");
}

fn the_user_level_paths_serve_the_same_resources(w: &mut Primary) {
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

fn an_api_version_header_is_accepted(w: &mut Primary) {
    let version = [("api-version", "2024-01-01")];
    let (status, _, e) = call(w.admin, READ, "GET", POOLS, None, &version);
    assert_eq!(status, 200, "{e:#}");
}

fn search_finds_a_resource_by_its_description(w: &mut Primary) {
    let path = "/client/v4/accounts/a/load_balancers/search?search_params%5Bquery%5D=login%20page&search_params%5Breferences%5D=referrer";
    let (status, _, e) = call(w.admin, READ, "GET", path, None, &[]);
    assert_eq!(status, 200, "{e:#}");
    let found = &e["result"]["resources"];
    assert_eq!(found[0]["resource_id"], json!(w.monitor_id()), "{e:#}");
    assert_eq!(found[0]["resource_type"], json!("monitor"), "{e:#}");
    assert!(
        has_reference(&found[0]["references"], "referrer", "pool", "fallback"),
        "{e:#}"
    );
}

fn a_pool_notification_email_without_an_email_channel_is_refused(w: &mut Primary) {
    let path = format!("{POOLS}/fallback");
    let body = r#"{"notification_email": "ops@example.com"}"#;
    let (status, _, e) = call(w.admin, WRITE, "PATCH", &path, Some(body), &[]);
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(
        e["errors"][0]["source"]["pointer"],
        json!("/notification_email"),
        "{e:#}"
    );
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("[[notifications.email]]"), "{e:#}");
}

fn a_bulk_patch_of_pools_takes_only_notification_email(w: &mut Primary) {
    let (status, _, e) = call(
        w.admin,
        WRITE,
        "PATCH",
        POOLS,
        Some(r#"{"enabled": false}"#),
        &[],
    );
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(
        e["errors"][0]["source"]["pointer"],
        json!("/enabled"),
        "{e:#}"
    );
    let before = w.generation();
    let clear = r#"{"notification_email": ""}"#;
    let (status, _, e) = call(w.admin, WRITE, "PATCH", POOLS, Some(clear), &[]);
    assert_eq!(status, 200, "{e:#}");
    assert!(
        e["result"].as_array().is_some_and(|p| p.len() >= 2),
        "{e:#}"
    );
    assert_eq!(
        w.generation(),
        before,
        "clearing what no pool has changes nothing"
    );
}

/// Whether `refs` (a references answer's `result`) holds one of that direction, type and id.
fn has_reference(refs: &Value, direction: &str, kind: &str, id: &str) -> bool {
    refs.as_array().into_iter().flatten().any(|r| {
        r["reference_type"] == json!(direction)
            && r["resource_type"] == json!(kind)
            && r["resource_id"] == json!(id)
    })
}

fn a_monitor_lists_the_pools_that_use_it_as_referrers(w: &mut Primary) {
    let path = format!("{MONITORS}/{}/references", w.monitor_id());
    let (status, _, e) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{e:#}");
    for pool in ["primary-dc-1", "fallback"] {
        assert!(
            has_reference(&e["result"], "referrer", "pool", pool),
            "{pool}: {e:#}"
        );
    }
}

fn a_pool_lists_its_load_balancer_and_its_monitor(w: &mut Primary) {
    let path = format!("{POOLS}/primary-dc-1/references");
    let (status, _, e) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{e:#}");
    let refs = &e["result"];
    assert!(
        has_reference(refs, "referrer", "load_balancer", "www.example.com"),
        "{e:#}"
    );
    assert!(
        has_reference(refs, "referral", "monitor", &w.monitor_id()),
        "{e:#}"
    );
}

fn pools_filtered_by_a_monitor_are_the_ones_that_use_it(w: &mut Primary) {
    let path = format!("{POOLS}?monitor={}", w.monitor_id());
    let (status, _, e) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{e:#}");
    let pools = e["result"].as_array().cloned().unwrap_or_default();
    assert!(pools.len() >= 2, "both pools use it: {e:#}");
    assert!(
        pools.iter().all(|p| p["monitor"] == json!(w.monitor_id())),
        "{e:#}"
    );
    let path = format!("{POOLS}?monitor=no-such-monitor");
    let (_, _, none) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(none["result"], json!([]), "{none:#}");
}

fn a_pool_in_use_cannot_be_deleted_and_the_error_names_the_reference(w: &mut Primary) {
    let path = format!("{POOLS}/primary-dc-1");
    let (status, _, e) = call(w.admin, WRITE, "DELETE", &path, None, &[]);
    assert_eq!(status, 400, "{e:#}");
    let names_the_lb = e["errors"].as_array().expect("errors").iter().any(|x| {
        x["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("load_balancers[0]")
    });
    assert!(names_the_lb, "{e:#}");
}

fn a_resource_read_can_be_written_back_unchanged_making_no_generation(w: &mut Primary) {
    let path = format!("{LBS}/www.example.com");
    let (status, _, got) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{got:#}");
    let before = w.generation();
    let body = got["result"].to_string();
    let (status, _, put) = call(w.admin, WRITE, "PUT", &path, Some(&body), &[]);
    assert_eq!(status, 200, "{put:#}");
    assert_eq!(
        w.generation(),
        before,
        "the unchanged PUT made no generation"
    );
}

fn a_put_that_renames_is_refused(w: &mut Primary) {
    let path = format!("{LBS}/www.example.com");
    let other = cloudflare_lb("other.example.com", &["fallback"], "fallback");
    let (status, _, e) = call(w.admin, WRITE, "PUT", &path, Some(&other), &[]);
    assert_eq!(status, 400, "{e:#}");
}

fn pool_health_answers_in_cloudflare_shape(w: &mut Primary) {
    let path = format!("{POOLS}/primary-dc-1/health");
    let (status, _, h) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{h:#}");
    assert_eq!(h["result"]["pool_id"], json!("primary-dc-1"));
    let origin = &h["result"]["pop_health"]["WEU"]["origins"][0]["127.0.0.1"];
    assert!(origin.is_object(), "{h:#}");
}

fn the_analytics_events_view_answers(w: &mut Primary) {
    let path = "/client/v4/user/load_balancing_analytics/events";
    let (status, _, ev) = call(w.admin, READ, "GET", path, None, &[]);
    assert_eq!(
        (status, ev["success"].clone()),
        (200, json!(true)),
        "{ev:#}"
    );
}

fn the_file_holds_the_generation_in_force_and_keeps_the_one_before(w: &mut Primary) {
    let text = std::fs::read_to_string(&w.config).expect("config");
    assert!(text.contains("www.example.com"), "{text}");
    assert!(w.dir.path().join("meshlb.toml.previous").exists());
    let sidecar = w.dir.path().join("meshlb.toml.generation");
    let sidecar: Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar).expect("generation")).expect("json");
    assert_eq!(sidecar["generation"], json!(w.generation()), "{sidecar:#}");
}

fn the_written_file_passes_meshlb_check(w: &mut Primary) {
    let check = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["check", w.config.to_str().unwrap()])
        .output()
        .expect("check");
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
}

fn meshlb_pools_list_shows_each_pool_with_its_description(w: &mut Primary) {
    let (code, out, err) = w.cli(&["pools", "list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("primary-dc-1\tPrimary data center"), "{out}");
}

fn meshlb_pools_apply_creates_then_replaces_and_get_and_delete_work(w: &mut Primary) {
    let file = w.dir.path().join("pool.json");
    let pool = cloudflare_pool("from-cli", &w.monitor_id(), &[("c", "127.0.0.1", 1.0)]);
    std::fs::write(&file, pool).expect("pool file");
    let file = file.to_str().unwrap();
    let (code, out, err) = w.cli(&["pools", "apply", "-f", file]);
    assert_eq!((code, out.trim()), (Some(0), "created from-cli"), "{err}");
    let (code, out, err) = w.cli(&["pools", "apply", "-f", file]);
    assert_eq!((code, out.trim()), (Some(0), "replaced from-cli"), "{err}");
    let (code, out, err) = w.cli(&["pools", "get", "from-cli", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let got: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(got["result"]["id"], json!("from-cli"));
    let (code, _, err) = w.cli(&["pools", "delete", "from-cli"]);
    assert_eq!(code, Some(0), "{err}");
}

fn meshlb_monitor_groups_apply_creates_a_group_that_list_shows_and_delete_removes(w: &mut Primary) {
    let file = w.dir.path().join("group.json");
    let group = json!({
        "description": "Group from the CLI",
        "members": [{
            "monitor_id": w.monitor_id(),
            "enabled": true,
            "monitoring_only": false,
            "must_be_healthy": true,
        }],
    });
    std::fs::write(&file, group.to_string()).expect("group file");
    let (code, out, err) = w.cli(&["monitor-groups", "apply", "-f", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    // A monitor group's id is made by the API, as a monitor's is.
    let id = out
        .trim()
        .strip_prefix("created ")
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    let (code, out, err) = w.cli(&["monitor-groups", "list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&format!("{id}\tGroup from the CLI")), "{out}");
    let (code, _, err) = w.cli(&["monitor-groups", "delete", &id]);
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = w.cli(&["monitor-groups", "list"]);
    assert!(!out.contains(&id), "{out}");
}

fn meshlb_config_diff_shows_what_a_push_would_change(w: &mut Primary) {
    let (next, _) = w.edited_config();
    let (code, out, _) = w.cli(&["config", "diff", next.to_str().unwrap()]);
    assert_eq!(code, Some(1), "a difference: {out}");
    assert!(out.contains("+description = \"Edited monitor\""), "{out}");
}

fn a_config_push_based_on_a_stale_generation_is_refused_409(w: &mut Primary) {
    let (next, _) = w.edited_config();
    let next = next.to_str().unwrap();
    let (code, out, err) = w.cli(&["config", "push", next, "--if-match", "1"]);
    assert_ne!(code, Some(0), "a stale push is refused: {out}");
    assert!(err.contains("409"), "{err}");
}

fn meshlb_config_push_writes_the_file_verbatim(w: &mut Primary) {
    let original = w.dir.path().join("original.toml");
    std::fs::copy(&w.config, &original).expect("copy");
    let (next, edited) = w.edited_config();
    let next = next.to_str().unwrap();
    let (code, out, err) = w.cli(&["config", "push", next]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("pushed: generation"), "{out}");
    let text = std::fs::read_to_string(&w.config).expect("config");
    assert_eq!(text, edited, "pushed verbatim");
    assert_eq!(
        w.cli(&["config", "diff", next]).0,
        Some(0),
        "nothing left to push"
    );
    // Put the monitor's description back for the trials after this one.
    let (code, _, err) = w.cli(&["config", "push", original.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

fn members_at(admin: SocketAddr, generation: u64) -> (usize, usize) {
    let Some(members) = get(admin, "/members") else {
        return (0, 0);
    };
    let members = members.as_array().cloned().unwrap_or_default();
    let live: Vec<&Value> = members
        .iter()
        .filter(|m| m["alive"] == json!(true))
        .collect();
    let at = live
        .iter()
        .filter(|m| m["config_generation"] == json!(generation))
        .count();
    (live.len(), at)
}

fn dig(dns: SocketAddr, name: &str) -> Vec<String> {
    let mut lines = dig_short(dns, name);
    lines.sort();
    lines
}

fn node(args: &[String]) -> Child {
    spawn_logged(
        Command::new(env!("CARGO_BIN_EXE_meshlb")).args(args),
        "node",
    )
}

/// A mesh whose config comes from one primary: the primary aggregator, a second aggregator
/// (with DNS) and four probers started with `--config-from-mesh`, one of them with a regions
/// table without France. The primary has written a monitor, pool `eu` over origins `a`
/// (127.0.0.2) and `b` (127.0.0.3, which answers 404 on `/missing`), and `www.example.com`
/// over it.
struct Mesh {
    dir: tempfile::TempDir,
    key: std::path::PathBuf,
    primary: SocketAddr,
    secondary: SocketAddr,
    dns: SocketAddr,
    seed: SocketAddr,
    a: Origin,
    b: Origin,
    /// The primary, then the follower aggregator, then the probers `prober-0` to `prober-3`.
    procs: Procs,
}

/// The gossip arguments of a node listening on `listen`.
fn mesh_args(listen: SocketAddr, seed: SocketAddr, key: &std::path::Path) -> Vec<String> {
    let (listen, seed, key) = (
        listen.to_string(),
        seed.to_string(),
        key.display().to_string(),
    );
    ["--listen", &listen, "--seed", &seed, "--key-file", &key]
        .into_iter()
        .chain(["--gossip-interval-ms", "100"])
        .map(String::from)
        .collect()
}

/// The config primary's command line (its gossip address is the mesh's seed).
fn primary_args(
    dir: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    seed: SocketAddr,
) -> Vec<String> {
    let config = dir.join("primary.toml").display().to_string();
    let mut args: Vec<String> = ["aggregator", "--config", &config, "--region", "WEU"]
        .into_iter()
        .chain(["--admin", &admin.to_string(), "--config-primary"])
        .map(String::from)
        .collect();
    args.extend(admin_token_args(dir));
    args.extend(mesh_args(seed, seed, key));
    args
}

/// A prober following the mesh's config; `prober-3` has a regions table without France.
fn prober_args(
    dir: &std::path::Path,
    key: &std::path::Path,
    seed: SocketAddr,
    i: usize,
) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if i == 3 {
        let regions = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
            .expect("regions");
        let no_france: String = regions
            .lines()
            .filter(|l| !l.starts_with("FR "))
            .map(|l| format!("{l}\n"))
            .collect();
        let file = dir.join("regions-no-fr.toml");
        std::fs::write(&file, no_france).expect("regions");
        args.extend(["--regions".into(), file.display().to_string()]);
    }
    let config = dir.join(format!("prober-{i}.toml")).display().to_string();
    let dc = ["ams", "fra", "lhr", "ams"][i];
    let id = format!("prober-{i}");
    args.extend(
        ["prober", "--config", &config, "--region", "WEU", "--dc", dc]
            .into_iter()
            .chain(["--config-from-mesh", "--node-id", &id])
            .map(String::from),
    );
    args.extend(mesh_args(free_udp(), seed, key));
    args
}

fn start_mesh_world() -> Mesh {
    let (dir, key) = scratch_dir_with_key("api-mesh");
    std::fs::write(dir.path().join("primary.toml"), "").expect("config");
    // `b` answers 404 on `/missing`: a preview of that path fails there alone.
    let (a, b) = (
        origin_on("127.0.0.2"),
        origin_missing("127.0.0.3", "/missing"),
    );
    let (primary, secondary, dns) = (free_tcp(), free_tcp(), free_tcp_and_udp());
    let seed = free_udp();
    let mut procs = Procs(vec![node(&primary_args(dir.path(), &key, primary, seed))]);
    let config = dir.path().join("secondary.toml").display().to_string();
    let mut args: Vec<String> = ["aggregator", "--config", &config, "--region", "WEU"]
        .into_iter()
        .chain(["--admin", &secondary.to_string(), "--config-from-mesh"])
        .chain(["--dns", &dns.to_string()])
        .map(String::from)
        .collect();
    args.extend(admin_token_args(dir.path()));
    args.extend(mesh_args(free_udp(), seed, &key));
    procs.0.push(node(&args));
    for i in 0..4 {
        procs.0.push(node(&prober_args(dir.path(), &key, seed, i)));
    }
    wait_up(primary);
    wait_up(secondary);
    wait_for("every node in the mesh", Duration::from_secs(60), || {
        members_at(primary, 1) == (6, 6)
    });
    let monitor = json!({ "name": "web", "type": "http", "interval": 2, "timeout": 1, "retries": 0, "path": "/" });
    let (status, _, e) = call(
        primary,
        WRITE,
        "POST",
        MONITORS,
        Some(&monitor.to_string()),
        &[],
    );
    assert_eq!(status, 200, "the monitor: {e:#}");
    let mut pool: Value = serde_json::from_str(&cloudflare_pool(
        "eu",
        "web",
        &[("a", "127.0.0.2", 1.0), ("b", "127.0.0.3", 1.0)],
    ))
    .expect("pool");
    pool["origins"][0]["port"] = json!(a.port);
    pool["origins"][1]["port"] = json!(b.port);
    let (status, _, e) = call(primary, WRITE, "POST", POOLS, Some(&pool.to_string()), &[]);
    assert_eq!(status, 200, "the pool: {e:#}");
    let lb = json!({ "name": "www.example.com", "default_pools": ["eu"], "fallback_pool": "eu", "ttl": 30 });
    let (status, _, e) = call(primary, WRITE, "POST", LBS, Some(&lb.to_string()), &[]);
    assert_eq!(status, 200, "the load balancer: {e:#}");
    Mesh {
        dir,
        key,
        primary,
        secondary,
        dns,
        seed,
        a,
        b,
        procs,
    }
}

static MESH: Shared<Mesh> = Shared::new(start_mesh_world);

impl Mesh {
    /// Waits until every node (six, all alive) is at `generation`.
    fn wait_everywhere(&self, generation: u64, what: &str) {
        wait_for(what, Duration::from_secs(60), || {
            members_at(self.primary, generation) == (6, 6)
        });
    }

    /// Writes `body` to `path` on the primary with `method`: the generation written.
    fn write(&self, method: &str, path: &str, body: &str) -> u64 {
        let (status, etag, e) = call(self.primary, WRITE, method, path, Some(body), &[]);
        assert_eq!(status, 200, "{e:#}");
        etag.parse().expect("generation")
    }

    /// Makes pool `eu`'s origins `a` alone, or `a` and `b`: returns the generation written.
    fn write_origins(&self, with_b: bool) -> u64 {
        let mut origins = vec![json!({ "name": "a", "address": "127.0.0.2", "port": self.a.port })];
        if with_b {
            origins.push(json!({ "name": "b", "address": "127.0.0.3", "port": self.b.port }));
        }
        let patch = json!({ "origins": origins }).to_string();
        self.write("PATCH", &format!("{POOLS}/eu"), &patch)
    }

    /// Pool `eu` with both origins, at every node, both answered by the follower's DNS.
    fn serve_both(&self) {
        let generation = self.write_origins(true);
        self.wait_everywhere(generation, "every node at the generation with a and b");
        let both = vec!["127.0.0.2".to_string(), "127.0.0.3".to_string()];
        wait_for(
            "DNS answers both endpoints",
            Duration::from_secs(60),
            || dig(self.dns, "www.example.com") == both,
        );
    }

    /// The primary's generation in force.
    fn generation(&self) -> u64 {
        let (_, _, state) = call(self.primary, WRITE, "GET", "/config", None, &[]);
        state["result"]["generation"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generation in {state:#}"))
    }
}

fn a_write_reaches_every_node_at_its_generation(w: &mut Mesh) {
    let path = format!("{POOLS}/eu");
    let patch = json!({ "description": format!("written at {:?}", std::time::SystemTime::now()) });
    let generation = w.write("PATCH", &path, &patch.to_string());
    w.wait_everywhere(generation, "every node at the new generation");
}

fn a_follower_aggregator_serves_what_the_primary_wrote(w: &mut Mesh) {
    // Both endpoints, once the probers' votes are in.
    w.serve_both();
}

fn a_write_on_a_follower_is_refused_421_naming_the_primary(w: &mut Mesh) {
    let path = format!("{POOLS}/eu");
    let (status, _, e) = call(w.secondary, WRITE, "DELETE", &path, None, &[]);
    assert_eq!(status, 421, "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("aggregator-weu-pop"), "{e:#}");
}

/// Sends `signal` (`STOP`, `CONT`) to a process.
/// The preview `id` read at `admin` once the four probers' outcomes of both origins of pool
/// `eu` are in (30 s at most), and how long that took.
fn preview_of_both(admin: SocketAddr, id: &str) -> (Value, Duration) {
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
fn preview_web(w: &Mesh, path: &str) -> String {
    let (status, e) = start_preview(w.primary, WRITE, "monitors/web", &preview_monitor(path));
    assert_eq!(status, 200, "{e:#}");
    assert_eq!(e["result"]["pools"], json!({ "eu": "eu" }), "{e:#}");
    e["result"]["preview_id"]
        .as_str()
        .expect("preview_id")
        .to_string()
}

fn a_preview_reports_the_origin_its_path_fails_on_unhealthy_per_region(w: &mut Mesh) {
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

fn a_preview_changes_no_config(w: &mut Mesh) {
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

fn a_preview_is_read_on_any_aggregator(w: &mut Mesh) {
    w.write_origins(true);
    let id = preview_web(w, "/");
    let (got, _) = preview_of_both(w.secondary, &id);
    assert_eq!(got["eu"]["healthy"], json!(true), "{got:#}");
}

fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// Continues a stopped process when dropped, so a failing trial leaves none stopped.
struct Paused(u32);

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

fn a_paused_prober_catches_up_on_a_write_it_missed(w: &mut Mesh) {
    w.serve_both();
    let paused = Paused(w.procs.0[2].id());
    signal(paused.0, "STOP");
    let generation = w.write_origins(false);
    wait_for(
        "DNS drops the deleted endpoint",
        Duration::from_secs(30),
        || dig(w.dns, "www.example.com") == vec!["127.0.0.2".to_string()],
    );
    drop(paused);
    w.wait_everywhere(
        generation,
        "every node, the paused one too, at the generation",
    );
}

fn a_document_one_node_cannot_validate_is_refused_there_and_reported(w: &mut Mesh) {
    let before = w.generation();
    w.wait_everywhere(before, "every node at the generation in force");
    let path = format!("{LBS}/www.example.com");
    let (status, _, lb) = call(w.primary, WRITE, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{lb:#}");
    let france = r#"{"country_pools": {"FR": ["eu"]}}"#;
    let (status, etag, e) = call(w.primary, WRITE, "PATCH", &path, Some(france), &[]);
    assert_eq!(status, 200, "{e:#}");
    let refused_at: u64 = etag.parse().expect("generation");
    wait_for(
        "five nodes take it and one refuses it",
        Duration::from_secs(60),
        || {
            let members = get(w.primary, "/members")
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default();
            let took = members
                .iter()
                .filter(|m| m["config_generation"] == json!(refused_at))
                .count();
            let refused = members.iter().find(|m| m["node_id"] == json!("prober-3"));
            took == 5
                && refused.is_some_and(|m| {
                    m["config_generation"] == json!(before)
                        && m["config_refused"]
                            .as_str()
                            .unwrap_or("")
                            .starts_with(&refused_at.to_string())
                })
        },
    );
    // The load balancer as it was, which every node takes.
    let generation = w.write("PUT", &path, &lb["result"].to_string());
    w.wait_everywhere(generation, "every node at the generation without France");
}

fn without_the_primary_a_follower_keeps_serving_and_writes_wait(w: &mut Mesh) {
    w.serve_both();
    let generation = w.generation();
    let served = dig(w.dns, "www.example.com");
    let mut primary = w.procs.0.remove(0);
    let _ = primary.kill();
    let _ = primary.wait();
    // Started again when the trial ends, passed or failed.
    let restart = primary_args(w.dir.path(), &w.key, w.primary, w.seed);
    let back = Restart(w, restart);
    let m = &back.0;
    wait_for(
        "the follower sees no primary",
        Duration::from_secs(60),
        || call(m.secondary, WRITE, "GET", "/config", None, &[]).2["result"]["primary"].is_null(),
    );
    let (_, _, state) = call(m.secondary, WRITE, "GET", "/config", None, &[]);
    assert_eq!(
        state["result"]["generation"],
        json!(generation),
        "{state:#}"
    );
    assert_eq!(dig(m.dns, "www.example.com"), served);
    let (status, _, e, head) = call_with_head(m.secondary, WRITE, "POST", POOLS, Some("{}"), &[]);
    assert_eq!(status, 503, "{e:#}");
    assert!(
        head.contains("\r\nretry-after: 5"),
        "says when to try again: {head}"
    );
}

/// Starts the primary again (with `args`) when dropped, and waits (without failing: the trial
/// that dropped it says what broke) for the follower and every node to see it.
struct Restart<'a>(&'a mut Mesh, Vec<String>);

impl Drop for Restart<'_> {
    fn drop(&mut self) {
        let m = &mut self.0;
        m.procs.0.insert(0, node(&self.1));
        let within = Duration::from_secs(60);
        wait_until(within, || TcpStream::connect(m.primary).is_ok());
        wait_until(within, || {
            !call(m.secondary, WRITE, "GET", "/config", None, &[]).2["result"]["primary"].is_null()
        });
        let (_, _, state) = call(m.primary, WRITE, "GET", "/config", None, &[]);
        let generation = state["result"]["generation"].as_u64().unwrap_or(0);
        wait_until(within, || members_at(m.primary, generation) == (6, 6));
    }
}

fn every_control_plane_flag_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .expect("docs/api.md");
    for role in ["aggregator", "prober"] {
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args([role, "--help"])
            .output()
            .expect("help");
        let help = String::from_utf8_lossy(&out.stdout);
        let flags: Vec<&str> = help
            .split_whitespace()
            .filter(|w| {
                w.starts_with("--config-")
                    || *w == "--admin-read-token-file"
                    || *w == "--admin-body-timeout-ms"
            })
            .collect();
        assert!(flags.len() >= 3, "{role}: {help}");
        for flag in flags {
            let flag = flag.trim_end_matches(',');
            assert!(
                doc.contains(&format!("`{flag}")),
                "docs/api.md lacks {flag} ({role})"
            );
        }
    }
}

fn request_bodies_are_bounded_in_size_and_time_and_fetches_need_the_cluster_key() {
    let (dir, key) = scratch_dir_with_key("api-limits");
    let config = dir.path().join("meshlb.toml");
    let admin = free_tcp();
    let mut args = admin_token_args(dir.path());
    args.extend(
        [
            "--config-max-bytes",
            "2000",
            "--admin-body-timeout-ms",
            "300",
        ]
        .map(String::from),
    );
    let _procs = start_primary(&config, &key, admin, args);
    let big = format!(r#"{{"name": "p", "description": "{}"}}"#, "x".repeat(4000));
    let (status, _, e) = call(admin, WRITE, "POST", POOLS, Some(&big), &[]);
    assert_eq!(
        (status, e["errors"][0]["code"].clone()),
        (413, json!(1008)),
        "{e:#}"
    );
    // A body that stops short of its Content-Length is cut after the body timeout.
    let mut s = TcpStream::connect(admin).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        s,
        "POST {POOLS} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer secret-token\r\nContent-Length: 100\r\n\r\n{{\"name\""
    )
    .expect("write");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // The mesh's document is for members of the cluster only.
    let (status, _, e) = call(admin, None, "GET", "/-/config/document", None, &[]);
    assert_eq!(status, 401, "{e:#}");
    let (status, _, _) = call(
        admin,
        None,
        "GET",
        "/-/config/document",
        None,
        &[
            ("X-Meshlb-Node", "intruder"),
            ("X-Meshlb-Time", &lb_now().to_string()),
            ("Authorization", "Meshlb-Cluster 00"),
        ],
    );
    assert_eq!(status, 401);
    let metrics = scrape(admin);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("meshlb_config_fetches_refused_total") && l.ends_with(" 2")),
        "{metrics}"
    );
}

fn lb_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn main() {
    let primary = trials![PRIMARY =>
        a_cloudflare_monitor_body_is_accepted_with_a_generated_id,
        cloudflare_pool_bodies_are_accepted_with_their_name_as_id,
        a_cloudflare_load_balancer_body_is_accepted_with_its_steering,
        each_write_answers_the_next_generation_as_its_etag,
        fields_meshlb_lacks_are_refused_each_with_its_path_and_nothing_is_written,
        a_value_of_the_wrong_type_is_refused_with_its_path,
        lists_carry_result_info_and_the_read_token_reads_them,
        the_read_token_cannot_write,
        a_request_without_a_token_is_refused_401,
        a_write_from_another_site_is_refused_403,
        a_second_write_based_on_the_same_generation_is_a_conflict,
        a_conflict_tells_the_client_not_to_retry,
        a_monitor_lists_the_pools_that_use_it_as_referrers,
        a_pool_lists_its_load_balancer_and_its_monitor,
        pools_filtered_by_a_monitor_are_the_ones_that_use_it,
        a_path_the_api_does_not_serve_answers_an_envelope_naming_what_it_serves,
        a_pool_in_use_cannot_be_deleted_and_the_error_names_the_reference,
        a_resource_read_can_be_written_back_unchanged_making_no_generation,
        a_put_that_renames_is_refused,
        pool_health_answers_in_cloudflare_shape,
        the_analytics_events_view_answers,
        the_file_holds_the_generation_in_force_and_keeps_the_one_before,
        the_written_file_passes_meshlb_check,
        meshlb_pools_list_shows_each_pool_with_its_description,
        meshlb_pools_apply_creates_then_replaces_and_get_and_delete_work,
        meshlb_monitor_groups_apply_creates_a_group_that_list_shows_and_delete_removes,
        meshlb_config_diff_shows_what_a_push_would_change,
        a_config_push_based_on_a_stale_generation_is_refused_409,
        meshlb_config_push_writes_the_file_verbatim,
        previews_beyond_the_limit_are_refused_429_and_counted,
        a_preview_no_live_prober_can_run_is_refused_at_once_naming_the_regions,
        a_preview_probing_more_origins_than_allowed_is_refused,
        a_preview_needs_the_write_token,
        an_invalid_preview_monitor_is_refused_with_its_field,
        an_unknown_preview_is_a_404_envelope,
        the_user_level_paths_serve_the_same_resources,
        an_api_version_header_is_accepted,
        search_finds_a_resource_by_its_description,
        a_pool_notification_email_without_an_email_channel_is_refused,
        a_bulk_patch_of_pools_takes_only_notification_email,
    ];
    let mesh = trials![MESH =>
        a_write_reaches_every_node_at_its_generation,
        a_follower_aggregator_serves_what_the_primary_wrote,
        a_write_on_a_follower_is_refused_421_naming_the_primary,
        a_paused_prober_catches_up_on_a_write_it_missed,
        a_document_one_node_cannot_validate_is_refused_there_and_reported,
        without_the_primary_a_follower_keeps_serving_and_writes_wait,
        a_preview_reports_the_origin_its_path_fails_on_unhealthy_per_region,
        a_preview_changes_no_config,
        a_preview_is_read_on_any_aggregator,
    ];
    let alone = trials![
        every_control_plane_flag_is_documented,
        request_bodies_are_bounded_in_size_and_time_and_fetches_need_the_cluster_key,
    ];
    let all = [primary, mesh, alone].into_iter().flatten().collect();
    // The two worlds and the limits' primary are light enough to run side by side, as the
    // tests of this file always did.
    trials::run(all, Threads::Cores);
}
