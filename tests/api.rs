//! The control plane (docs/api.md): Cloudflare-shaped bodies for monitors, pools and load
//! balancers written through the primary's API, refused field by field where meshlb lacks a
//! field; `If-Match` conflicts; tokens and their scopes; and one write reaching every node of a
//! mesh — probers and a second aggregator started with `--config-from-mesh` — which then serve
//! it, catch up after a pause, refuse what does not validate on their side, and keep serving
//! when the primary is gone.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

mod support;
use support::*;

/// One API call: (status, ETag, JSON body or the text as a string).
fn call(
    admin: SocketAddr,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&str>,
    headers: &[(&str, &str)],
) -> (u16, String, Value) {
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
    (status, etag, value)
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
    mut args: Vec<String>,
) -> Procs {
    std::fs::write(config, "").expect("empty config");
    args.push("--config-primary".into());
    let procs = Procs(vec![start_aggregator(
        config,
        key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_up(admin);
    procs
}

fn wait_up(admin: SocketAddr) {
    wait_for("the admin API", Duration::from_secs(30), || {
        TcpStream::connect(admin).is_ok()
    });
}

#[test]
fn cloudflare_bodies_are_accepted_unchanged_and_refused_field_by_field() {
    let (dir, key) = scratch_dir_with_key("api");
    let config = dir.path().join("meshlb.toml");
    let admin = free_tcp();
    let args = tokens(dir.path());
    let _procs = start_primary(&config, &key, admin, args);
    let origin = origin();

    let (status, etag, m) = call(
        admin,
        WRITE,
        "POST",
        MONITORS,
        Some(&cloudflare_monitor(origin.port)),
        &[],
    );
    assert_eq!(status, 200, "{m:#}");
    assert_eq!(
        (
            m["success"].clone(),
            m["errors"].clone(),
            m["messages"].clone()
        ),
        (json!(true), json!([]), json!([]))
    );
    let monitor = m["result"]["id"].as_str().expect("id").to_string();
    assert_eq!(
        monitor.len(),
        32,
        "a Cloudflare-like generated id: {monitor}"
    );
    assert_eq!(m["result"]["header"]["X-App-ID"], json!(["abc123"]));
    assert_eq!(etag, "2", "the empty file was generation 1");

    let pool = cloudflare_pool(
        "primary-dc-1",
        &monitor,
        &[("app-server-1", "127.0.0.1", 0.6)],
    );
    let (status, _, p) = call(admin, WRITE, "POST", POOLS, Some(&pool), &[]);
    assert_eq!(status, 200, "{p:#}");
    assert_eq!(p["result"]["id"], json!("primary-dc-1"));
    let fallback = cloudflare_pool("fallback", &monitor, &[("b", "127.0.0.1", 1.0)]);
    assert_eq!(
        call(admin, WRITE, "POST", POOLS, Some(&fallback), &[]).0,
        200
    );
    let lb = cloudflare_lb("www.example.com", &["primary-dc-1"], "fallback");
    let (status, etag, l) = call(admin, WRITE, "POST", LBS, Some(&lb), &[]);
    assert_eq!(status, 200, "{l:#}");
    assert_eq!(l["result"]["steering_policy"], json!("dynamic_latency"));
    assert_eq!(etag, "5");

    // What meshlb lacks is refused with its path; nothing changes.
    let mut unsupported: Value =
        serde_json::from_str(&cloudflare_pool("p2", &monitor, &[("a", "127.0.0.1", 1.0)]))
            .expect("json");
    unsupported["origins"][0]["virtual_network_id"] = json!("a5624d4e-044a-4ff0-b3e1-e2465353d4b4");
    unsupported["notification_email"] = json!("someone@example.com");
    let (status, etag, e) = call(
        admin,
        WRITE,
        "POST",
        POOLS,
        Some(&unsupported.to_string()),
        &[],
    );
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(e["success"], json!(false));
    assert_eq!(etag, "5", "nothing was written");
    let pointers: Vec<&str> = e["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|x| x["source"]["pointer"].as_str())
        .collect();
    assert!(pointers.contains(&"/origins/0/virtual_network_id"), "{e:#}");
    assert!(pointers.contains(&"/notification_email"), "{e:#}");
    assert!(
        e["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("unknown field"),
        "{e:#}"
    );

    // A value out of range, with its path, as `meshlb check` says it.
    let (status, _, e) = call(
        admin,
        WRITE,
        "PATCH",
        &format!("{POOLS}/primary-dc-1"),
        Some(r#"{"minimum_origins": "two"}"#),
        &[],
    );
    assert_eq!(status, 400, "{e:#}");
    assert_eq!(
        e["errors"][0]["source"]["pointer"],
        json!("/minimum_origins"),
        "{e:#}"
    );

    // Lists carry result_info; reads work with the read token, writes do not.
    let (status, _, list) = call(admin, READ, "GET", POOLS, None, &[]);
    assert_eq!(status, 200);
    assert_eq!(list["result_info"]["count"], json!(2));
    assert_eq!(list["result_info"]["total_count"], json!(2));
    let (status, _, e) = call(
        admin,
        READ,
        "DELETE",
        &format!("{POOLS}/fallback"),
        None,
        &[],
    );
    assert_eq!((status, e["errors"][0]["code"].clone()), (403, json!(1005)));
    assert_eq!(call(admin, None, "GET", POOLS, None, &[]).0, 401);
    assert_eq!(
        call(
            admin,
            WRITE,
            "POST",
            POOLS,
            Some("{}"),
            &[("Origin", "https://evil.example")]
        )
        .0,
        403
    );

    // Two writes based on one generation: the first lands, the second is a conflict.
    let patch = r#"{"description": "edited"}"#;
    let (first, etag, _) = call(
        admin,
        WRITE,
        "PATCH",
        &format!("{POOLS}/fallback"),
        Some(patch),
        &[("If-Match", "\"5\"")],
    );
    assert_eq!((first, etag.as_str()), (200, "6"));
    let (second, _, e) = call(
        admin,
        WRITE,
        "PATCH",
        &format!("{POOLS}/fallback"),
        Some(r#"{"description": "again"}"#),
        &[("If-Match", "\"5\"")],
    );
    assert_eq!(second, 409, "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1003));

    // A pool in use cannot go: the error is the load balancer's reference, in the document.
    let (status, _, e) = call(
        admin,
        WRITE,
        "DELETE",
        &format!("{POOLS}/primary-dc-1"),
        None,
        &[],
    );
    assert_eq!(status, 400, "{e:#}");
    assert!(
        e["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .any(|x| x["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("load_balancers[0]")),
        "{e:#}"
    );

    // PUT replaces whole; a rename is refused; GET gives back what PUT took.
    let (status, _, got) = call(
        admin,
        READ,
        "GET",
        &format!("{LBS}/www.example.com"),
        None,
        &[],
    );
    assert_eq!(status, 200);
    let (status, _, put) = call(
        admin,
        WRITE,
        "PUT",
        &format!("{LBS}/www.example.com"),
        Some(&got["result"].to_string()),
        &[],
    );
    assert_eq!(
        status, 200,
        "a resource read can be written back unchanged: {put:#}"
    );
    let (status, _, _) = call(
        admin,
        WRITE,
        "PUT",
        &format!("{LBS}/www.example.com"),
        Some(&cloudflare_lb(
            "other.example.com",
            &["fallback"],
            "fallback",
        )),
        &[],
    );
    assert_eq!(status, 400);

    // The health views answer in Cloudflare's shapes.
    let (status, _, h) = call(
        admin,
        READ,
        "GET",
        &format!("{POOLS}/primary-dc-1/health"),
        None,
        &[],
    );
    assert_eq!(status, 200, "{h:#}");
    assert_eq!(h["result"]["pool_id"], json!("primary-dc-1"));
    assert!(
        h["result"]["pop_health"]["WEU"]["origins"][0]["127.0.0.1"].is_object(),
        "{h:#}"
    );
    let (status, _, ev) = call(
        admin,
        READ,
        "GET",
        "/client/v4/user/load_balancing_analytics/events",
        None,
        &[],
    );
    assert_eq!((status, ev["success"].clone()), (200, json!(true)));

    // The file holds the generation; the one before is kept.
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(text.contains("www.example.com"));
    assert!(dir.path().join("meshlb.toml.previous").exists());
    let sidecar: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("meshlb.toml.generation")).expect("generation"),
    )
    .expect("json");
    assert_eq!(
        sidecar["generation"],
        json!(6),
        "the unchanged PUT made no generation"
    );
    // The file checks as the API checked it.
    let check = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["check", config.to_str().unwrap()])
        .output()
        .expect("check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    // The CLI verbs over the same API.
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(args)
            .args([
                "--admin",
                &admin.to_string(),
                "--token-file",
                dir.path().join("admin-token").to_str().unwrap(),
            ])
            .output()
            .expect("meshlb");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, out, err) = cli(&["pools", "list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("primary-dc-1\tPrimary data center"), "{out}");
    let file = dir.path().join("pool.json");
    std::fs::write(
        &file,
        cloudflare_pool("from-cli", &monitor, &[("c", "127.0.0.1", 1.0)]),
    )
    .expect("pool file");
    let (code, out, err) = cli(&["pools", "apply", "-f", file.to_str().unwrap()]);
    assert_eq!((code, out.trim()), (Some(0), "created from-cli"), "{err}");
    let (code, out, _) = cli(&["pools", "apply", "-f", file.to_str().unwrap()]);
    assert_eq!((code, out.trim()), (Some(0), "replaced from-cli"));
    let (code, out, _) = cli(&["pools", "get", "from-cli", "--json"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<Value>(&out).expect("json")["result"]["id"],
        json!("from-cli")
    );
    let edited = std::fs::read_to_string(&config)
        .expect("config")
        .replace("Login page monitor", "Edited monitor");
    let next = dir.path().join("next.toml");
    std::fs::write(&next, &edited).expect("next");
    let (code, out, _) = cli(&["config", "diff", next.to_str().unwrap()]);
    assert_eq!(code, Some(1), "a difference: {out}");
    assert!(out.contains("+description = \"Edited monitor\""), "{out}");
    let (code, out, err) = cli(&["config", "push", next.to_str().unwrap(), "--if-match", "1"]);
    assert_ne!(code, Some(0), "a stale push is refused: {out}");
    assert!(err.contains("409"), "{err}");
    let (code, out, err) = cli(&["config", "push", next.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("pushed: generation"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&config).expect("config"),
        edited,
        "pushed verbatim"
    );
    assert_eq!(cli(&["config", "diff", next.to_str().unwrap()]).0, Some(0));
    assert_eq!(cli(&["pools", "delete", "from-cli"]).0, Some(0));
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
    Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node")
}

#[test]
fn one_write_reaches_every_node_which_serves_it() {
    let (dir, key) = scratch_dir_with_key("api-mesh");
    let primary_config = dir.path().join("primary.toml");
    std::fs::write(&primary_config, "").expect("config");
    let (a, b) = (origin_on("127.0.0.2"), origin_on("127.0.0.3"));
    let (primary, secondary, dns) = (free_tcp(), free_tcp(), free_tcp_and_udp());
    let seed = free_udp();
    let mesh = |listen: SocketAddr| -> Vec<String> {
        [
            "--listen",
            &listen.to_string(),
            "--seed",
            &seed.to_string(),
            "--key-file",
            &key.display().to_string(),
            "--gossip-interval-ms",
            "100",
        ]
        .map(String::from)
        .to_vec()
    };
    let mut args: Vec<String> = [
        "aggregator",
        "--config",
        primary_config.to_str().unwrap(),
        "--region",
        "WEU",
        "--admin",
        &primary.to_string(),
        "--config-primary",
    ]
    .map(String::from)
    .to_vec();
    args.extend(admin_token_args(dir.path()));
    args.extend(mesh(seed));
    let mut procs = Procs(vec![node(&args)]);
    let mut args: Vec<String> = [
        "aggregator",
        "--config",
        dir.path().join("secondary.toml").to_str().unwrap(),
        "--region",
        "WEU",
        "--admin",
        &secondary.to_string(),
        "--config-from-mesh",
        "--dns",
        &dns.to_string(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(admin_token_args(dir.path()));
    args.extend(mesh(free_udp()));
    procs.0.push(node(&args));
    // One prober's regions table has no France: a load balancer steering France does not
    // validate there.
    let regions = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
        .expect("regions");
    let no_france: String = regions
        .lines()
        .filter(|l| !l.starts_with("FR "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("regions-no-fr.toml"), no_france).expect("regions");
    for (i, dc) in ["ams", "fra", "lhr", "ams"].iter().enumerate() {
        let mut args: Vec<String> = Vec::new();
        if i == 3 {
            args.extend([
                "--regions".into(),
                dir.path().join("regions-no-fr.toml").display().to_string(),
            ]);
        }
        args.extend(
            [
                "prober",
                "--config",
                dir.path()
                    .join(format!("prober-{i}.toml"))
                    .to_str()
                    .unwrap(),
                "--region",
                "WEU",
                "--dc",
                dc,
                "--config-from-mesh",
                "--node-id",
                &format!("prober-{i}"),
            ]
            .map(String::from),
        );
        args.extend(mesh(free_udp()));
        procs.0.push(node(&args));
    }
    wait_up(primary);
    wait_up(secondary);
    wait_for("every node in the mesh", Duration::from_secs(60), || {
        members_at(primary, 1) == (6, 6)
    });

    let monitor = json!({ "name": "web", "type": "http", "interval": 2, "timeout": 1, "retries": 0, "path": "/" }).to_string();
    assert_eq!(
        call(primary, WRITE, "POST", MONITORS, Some(&monitor), &[]).0,
        200
    );
    let mut pool: Value = serde_json::from_str(&cloudflare_pool(
        "eu",
        "web",
        &[("a", "127.0.0.2", 1.0), ("b", "127.0.0.3", 1.0)],
    ))
    .expect("pool");
    pool["origins"][0]["port"] = json!(a.port);
    pool["origins"][1]["port"] = json!(b.port);
    assert_eq!(
        call(primary, WRITE, "POST", POOLS, Some(&pool.to_string()), &[]).0,
        200
    );
    let lb = json!({ "name": "www.example.com", "default_pools": ["eu"], "fallback_pool": "eu", "ttl": 30 }).to_string();
    let (status, etag, _) = call(primary, WRITE, "POST", LBS, Some(&lb), &[]);
    assert_eq!(status, 200);
    let generation: u64 = etag.parse().expect("generation");
    wait_for(
        "every node at the new generation",
        Duration::from_secs(60),
        || members_at(primary, generation) == (6, 6),
    );

    // The follower aggregator serves it: both endpoints once the probers' votes are in.
    let both = vec!["127.0.0.2".to_string(), "127.0.0.3".to_string()];
    wait_for(
        "DNS answers both endpoints",
        Duration::from_secs(60),
        || dig(dns, "www.example.com") == both,
    );

    // A write on the follower names the primary.
    let (status, _, e) = call(
        secondary,
        WRITE,
        "DELETE",
        &format!("{POOLS}/eu"),
        None,
        &[],
    );
    assert_eq!(status, 421, "{e:#}");
    assert!(
        e["errors"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("aggregator-weu-pop"),
        "{e:#}"
    );

    // A paused prober misses a write and catches up when it runs again.
    let paused = procs.0[2].id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &paused])
        .status()
        .expect("kill")
        .success());
    let (status, etag, e) = call(
        primary,
        WRITE,
        "PATCH",
        &format!("{POOLS}/eu"),
        Some(
            &json!({ "origins": [{ "name": "a", "address": "127.0.0.2", "port": a.port }] })
                .to_string(),
        ),
        &[],
    );
    assert_eq!(status, 200, "{e:#}");
    let generation: u64 = etag.parse().expect("generation");
    wait_for(
        "DNS drops the deleted endpoint",
        Duration::from_secs(30),
        || dig(dns, "www.example.com") == vec!["127.0.0.2".to_string()],
    );
    assert!(Command::new("kill")
        .args(["-CONT", &paused])
        .status()
        .expect("kill")
        .success());
    wait_for(
        "every node, the paused one too, at the generation",
        Duration::from_secs(60),
        || members_at(primary, generation) == (6, 6),
    );

    // A document that does not validate on one node is refused there, and said so.
    let (status, etag, e) = call(
        primary,
        WRITE,
        "PATCH",
        &format!("{LBS}/www.example.com"),
        Some(r#"{"country_pools": {"FR": ["eu"]}}"#),
        &[],
    );
    assert_eq!(status, 200, "{e:#}");
    let refused_at: u64 = etag.parse().expect("generation");
    wait_for(
        "five nodes take it and one refuses it",
        Duration::from_secs(60),
        || {
            let members = get(primary, "/members")
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default();
            let took = members
                .iter()
                .filter(|m| m["config_generation"] == json!(refused_at))
                .count();
            let refused = members.iter().find(|m| m["node_id"] == json!("prober-3"));
            took == 5
                && refused.is_some_and(|m| {
                    m["config_generation"] == json!(generation)
                        && m["config_refused"]
                            .as_str()
                            .unwrap_or("")
                            .starts_with(&refused_at.to_string())
                })
        },
    );

    // With the primary gone, the follower keeps serving its generation and says the primary
    // is missing; writes wait.
    let mut primary_proc = procs.0.remove(0);
    let _ = primary_proc.kill();
    let _ = primary_proc.wait();
    wait_for(
        "the follower sees no primary",
        Duration::from_secs(60),
        || call(secondary, WRITE, "GET", "/config", None, &[]).2["result"]["primary"].is_null(),
    );
    let (_, _, state) = call(secondary, WRITE, "GET", "/config", None, &[]);
    assert_eq!(
        state["result"]["generation"],
        json!(refused_at),
        "{state:#}"
    );
    assert_eq!(dig(dns, "www.example.com"), vec!["127.0.0.2".to_string()]);
    let (status, _, e) = call(secondary, WRITE, "POST", POOLS, Some("{}"), &[]);
    assert_eq!(status, 503, "{e:#}");
}

#[test]
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

#[test]
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
