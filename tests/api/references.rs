//! References between resources: a monitor's referrers, a pool's load balancer and monitor,
//! pools filtered by their monitor, a pool in use that cannot be deleted, and search.

use serde_json::{json, Value};

use super::world::Primary;
use crate::{call, MONITORS, POOLS, READ, WRITE};

/// Whether `refs` (a references answer's `result`) holds one of that direction, type and id.
pub fn has_reference(refs: &Value, direction: &str, kind: &str, id: &str) -> bool {
    refs.as_array().into_iter().flatten().any(|r| {
        r["reference_type"] == json!(direction)
            && r["resource_type"] == json!(kind)
            && r["resource_id"] == json!(id)
    })
}

pub fn a_monitor_lists_the_pools_that_use_it_as_referrers(w: &mut Primary) {
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

pub fn a_pool_lists_its_load_balancer_and_its_monitor(w: &mut Primary) {
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

pub fn pools_filtered_by_a_monitor_are_the_ones_that_use_it(w: &mut Primary) {
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

pub fn a_pool_in_use_cannot_be_deleted_and_the_error_names_the_reference(w: &mut Primary) {
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

pub fn search_finds_a_resource_by_its_description(w: &mut Primary) {
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
