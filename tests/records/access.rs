//! The proxy's access log: one record per request with the decision behind it, the request
//! id, the combined format, and the reopen on SIGUSR1.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use test_support::wait_for;

use super::world::{Combined, World, ENAM_CLIENT};

/// An id of this trial's own, to find its records by.
pub fn unique_id(trial: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{trial}-{nanos}")
}

/// A request through the proxy with curl; `extra` are more curl arguments. Status, response
/// head (lower-case names) and body.
pub fn request(
    proxy: std::net::SocketAddr,
    host: &str,
    path: &str,
    extra: &[&str],
) -> (u16, String, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-i",
            "--max-time",
            "10",
            "-H",
            &format!("Host: {host}"),
        ])
        .args(extra)
        .arg(format!("http://{proxy}{path}"))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// A field of a response head, by its name in any case.
pub fn field<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The JSON records of the access log at `path` now.
fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The record of the request with id `id`, once written.
pub fn record_of(path: &Path, id: &str) -> Value {
    let mut found = None;
    wait_for(
        "the request's access record",
        Duration::from_secs(10),
        || {
            found = records(path).into_iter().find(|r| r["request_id"] == id);
            found.is_some()
        },
    );
    found.expect("found")
}

/// A request with id `id` from the default source address.
fn sent(w: &World, host: &str, id: &str) -> Value {
    let (status, _, _) = request(
        w.node.proxy,
        host,
        "/",
        &["-H", &format!("X-Request-Id: {id}")],
    );
    assert_ne!(status, 0, "no answer");
    record_of(&w.access_log, id)
}

pub fn a_geo_steered_request_is_recorded_with_its_pool_region_and_reason(w: &mut World) {
    let id = unique_id("geo");
    let (status, _, body) = request(
        w.node.proxy,
        "geo.example.test",
        "/a/path?secret=1",
        &[
            "--interface",
            ENAM_CLIENT,
            "-H",
            &format!("X-Request-Id: {id}"),
        ],
    );
    assert_eq!((status, body.lines().next()), (200, Some("us1")));
    let r = record_of(&w.access_log, &id);
    for (field, want) in [
        ("client_ip", ENAM_CLIENT),
        ("method", "GET"),
        ("host", "geo.example.test"),
        ("path", "/a/path"),
        ("protocol", "HTTP/1.1"),
        ("load_balancer", "geo.example.test"),
        ("pool", "us"),
        ("endpoint", "us1"),
        ("steering_policy", "geo"),
        ("reason", "steering"),
        ("client_region", "ENAM"),
        ("location_source", "resolver"),
    ] {
        assert_eq!(r[field], want, "{field} in {r}");
    }
    assert_eq!(r["status"], 200);
    assert!(
        r.get("query").is_none(),
        "query strings are left out by default: {r}"
    );
    assert!(r["bytes_out"].as_u64().is_some_and(|n| n > 0), "{r}");
    assert!(r["duration_ms"].as_f64().is_some_and(|d| d > 0.0), "{r}");
    assert!(r["origin_first_byte_ms"].as_f64().is_some(), "{r}");
    assert!(r["time"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
    assert!(r["client_port"].as_u64().is_some_and(|p| p > 0), "{r}");
    assert!(r["error"].is_null() && r["retried_from"].is_null(), "{r}");
    assert_eq!(
        r["endpoint_address"]
            .as_str()
            .map(|a| a.starts_with("127.0.0.62:")),
        Some(true)
    );
}

pub fn an_affinity_hit_is_recorded_as_one(w: &mut World) {
    let first = unique_id("sticky-new");
    let (_, head, _) = request(
        w.node.proxy,
        "sticky.example.test",
        "/",
        &["-H", &format!("X-Request-Id: {first}")],
    );
    let cookie = field(&head, "set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("an affinity cookie")
        .to_string();
    let new = record_of(&w.access_log, &first);
    assert_eq!(
        (&new["reason"], &new["affinity_hit"]),
        (&"steering".into(), &false.into()),
        "{new}"
    );
    let second = unique_id("sticky-hit");
    let (status, _, _) = request(
        w.node.proxy,
        "sticky.example.test",
        "/",
        &[
            "-H",
            &format!("Cookie: {cookie}"),
            "-H",
            &format!("X-Request-Id: {second}"),
        ],
    );
    assert_eq!(status, 200);
    let hit = record_of(&w.access_log, &second);
    assert_eq!(hit["reason"], "affinity", "{hit}");
    assert_eq!(hit["affinity_hit"], true, "{hit}");
    assert_eq!(hit["pool"], "eu", "{hit}");
}

pub fn a_fallback_is_recorded_as_the_reason(w: &mut World) {
    let r = sent(w, "fallback.example.test", &unique_id("fallback"));
    assert_eq!(
        (&r["status"], &r["pool"], &r["reason"]),
        (&200.into(), &"fb".into(), &"fallback".into()),
        "{r}"
    );
}

pub fn a_refused_origin_is_a_521_recorded_with_cloudflares_class(w: &mut World) {
    let r = sent(w, "dead.example.test", &unique_id("dead"));
    assert_eq!(r["status"], 521, "{r}");
    assert_eq!(r["error"], "origin_refused", "{r}");
    assert_eq!(
        (&r["pool"], &r["endpoint"]),
        (&"dead".into(), &"gone".into()),
        "{r}"
    );
}

pub fn a_zero_downtime_retry_is_recorded_with_the_endpoint_it_left(w: &mut World) {
    // Each request goes to z1 (refused) or z2 at random: at most 40 tries to see a retry.
    for _ in 0..40 {
        let r = sent(w, "zdt.example.test", &unique_id("zdt"));
        assert_eq!(r["status"], 200, "{r}");
        if !r["retried_from"].is_null() {
            assert_eq!(r["retried_from"]["endpoint"], "z1", "{r}");
            assert_eq!(r["retried_from"]["pool"], "zdt", "{r}");
            assert_eq!(r["endpoint"], "z2", "{r}");
            return;
        }
        assert_eq!(r["endpoint"], "z2", "{r}");
    }
    panic!("40 requests and not one went to z1 first");
}

pub fn a_clients_request_id_is_kept_passed_on_and_returned(w: &mut World) {
    let id = unique_id("kept");
    let (_, head, body) = request(
        w.node.proxy,
        "geo.example.test",
        "/",
        &["-H", &format!("X-Request-Id: {id}")],
    );
    assert_eq!(field(&head, "x-request-id"), Some(id.as_str()), "{head}");
    assert!(
        body.contains(&format!("request_id={id}")),
        "the origin got it: {body}"
    );
    record_of(&w.access_log, &id);
}

pub fn a_malformed_request_id_is_replaced_by_a_new_one(w: &mut World) {
    let (_, head, body) = request(
        w.node.proxy,
        "geo.example.test",
        "/",
        &["-H", "X-Request-Id: not an id\""],
    );
    let given = field(&head, "x-request-id")
        .expect("an id returned")
        .to_string();
    assert_eq!(given.len(), 32, "{given}");
    assert!(given.chars().all(|c| c.is_ascii_hexdigit()), "{given}");
    assert!(body.contains(&format!("request_id={given}")), "{body}");
    record_of(&w.access_log, &given);
}

pub fn sigusr1_reopens_the_access_log_after_a_rename(w: &mut World) {
    let rotated = w.dir.path().join("access.log.1");
    let before = unique_id("before-rotation");
    sent(w, "geo.example.test", &before);
    std::fs::rename(&w.access_log, &rotated).expect("rotate");
    let pid = w.node.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-USR1", &pid])
        .status()
        .expect("kill")
        .success());
    // The reopen is asynchronous; requests go on meanwhile and land in one file or the other.
    let after = unique_id("after-rotation");
    wait_for("a record in the new file", Duration::from_secs(10), || {
        request(
            w.node.proxy,
            "geo.example.test",
            "/",
            &["-H", &format!("X-Request-Id: {after}")],
        );
        records(&w.access_log)
            .iter()
            .any(|r| r["request_id"] == after.as_str())
    });
    assert!(
        records(&rotated)
            .iter()
            .any(|r| r["request_id"] == before.as_str()),
        "the rotated file keeps what was written before"
    );
    let _ = std::fs::remove_file(&rotated);
}

/// `%h %l %u [%t] "%r" %>s %b "%{Referer}i" "%{User-agent}i"`, the regex log tools use.
const COMBINED: &str = r#"^(\S+) (\S+) (\S+) \[([\w:/]+\s[+\-]\d{4})\] "(\S+) (\S+)\s*(\S*)" (\d{3}) (\d+|-) "([^"]*)" "([^"]*)"$"#;

pub fn the_combined_format_parses_with_the_common_regex(w: &mut Combined) {
    let agent = unique_id("agent \"quoted\"");
    let (status, _, _) = request(
        w.node.proxy,
        "www.example.test",
        "/p?q=1",
        &["-A", &agent, "-e", "http://ref.example/"],
    );
    assert_eq!(status, 200);
    let re = regex::Regex::new(COMBINED).expect("regex");
    let escaped = agent.replace('"', "\\x22");
    let mut line = None;
    wait_for("the combined record", Duration::from_secs(10), || {
        line = std::fs::read_to_string(&w.access_log)
            .unwrap_or_default()
            .lines()
            .find(|l| l.contains(&escaped))
            .map(str::to_string);
        line.is_some()
    });
    let line = line.expect("line");
    let c = re
        .captures(&line)
        .unwrap_or_else(|| panic!("not combined: {line}"));
    assert_eq!(&c[1], "127.0.0.1");
    assert_eq!((&c[5], &c[6], &c[7]), ("GET", "/p?q=1", "HTTP/1.1"));
    assert_eq!(&c[8], "200");
    assert!(c[9].parse::<u64>().is_ok_and(|n| n > 0), "{line}");
    assert_eq!(&c[10], "http://ref.example/");
    assert_eq!(&c[11], escaped);
}
