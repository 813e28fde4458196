//! Writes through the primary: Cloudflare's example bodies accepted as they are, and what
//! meshlb lacks or cannot honour refused field by field with its path, nothing written.

use serde_json::{json, Value};

use super::world::{cloudflare_lb, cloudflare_pool, Primary};
use crate::{call, LBS, POOLS, WRITE};

pub fn a_cloudflare_monitor_body_is_accepted_with_a_generated_id(w: &mut Primary) {
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

pub fn cloudflare_pool_bodies_are_accepted_with_their_name_as_id(w: &mut Primary) {
    let (status, _, p) = &w.pool;
    assert_eq!(*status, 200, "{p:#}");
    assert_eq!(p["result"]["id"], json!("primary-dc-1"));
    assert_eq!(w.fallback.0, 200, "{:#}", w.fallback.2);
}

pub fn a_cloudflare_load_balancer_body_is_accepted_with_its_steering(w: &mut Primary) {
    let (status, _, l) = &w.lb;
    assert_eq!(*status, 200, "{l:#}");
    assert_eq!(l["result"]["steering_policy"], json!("dynamic_latency"));
}

/// An endpoint in a virtual network the config lacks, an unknown field and an unusable one
/// are refused together, each with its path, and nothing is written.
pub fn bad_fields_are_refused_each_with_its_path_and_nothing_is_written(w: &mut Primary) {
    let before = w.generation();
    let monitor = w.monitor_id();
    let mut unsupported: Value =
        serde_json::from_str(&cloudflare_pool("p2", &monitor, &[("a", "127.0.0.1", 1.0)]))
            .expect("json");
    unsupported["origins"][0]["virtual_network_id"] = json!("a5624d4e-044a-4ff0-b3e1-e2465353d4b4");
    unsupported["origins"][0]["flux_capacitor"] = json!(true);
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
    assert!(pointers.contains(&"/origins/0/flux_capacitor"), "{e:#}");
    assert!(pointers.contains(&"/notification_email"), "{e:#}");
    let messages: Vec<&str> = e["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|x| x["message"].as_str())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("unknown field")),
        "{e:#}"
    );
    assert!(
        messages.iter().any(|m| m.contains("no virtual network")),
        "{e:#}"
    );
}

pub fn a_value_of_the_wrong_type_is_refused_with_its_path(w: &mut Primary) {
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

pub fn a_put_that_renames_is_refused(w: &mut Primary) {
    let path = format!("{LBS}/www.example.com");
    let other = cloudflare_lb("other.example.com", &["fallback"], "fallback");
    let (status, _, e) = call(w.admin, WRITE, "PUT", &path, Some(&other), &[]);
    assert_eq!(status, 400, "{e:#}");
}

pub fn a_pool_notification_email_without_an_email_channel_is_refused(w: &mut Primary) {
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

pub fn a_bulk_patch_of_pools_takes_only_notification_email(w: &mut Primary) {
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
