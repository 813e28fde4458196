//! The CLI's verbs against the primary: `meshlb pools` (list, apply -f, get, delete) and
//! `meshlb monitor-groups` as for pools.

use serde_json::{json, Value};

use super::world::{cloudflare_pool, Primary};

pub fn meshlb_pools_list_shows_each_pool_with_its_description(w: &mut Primary) {
    let (code, out, err) = w.cli(&["pools", "list"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("primary-dc-1\tPrimary data center"), "{out}");
}

pub fn meshlb_pools_apply_creates_then_replaces_and_get_and_delete_work(w: &mut Primary) {
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

pub fn meshlb_monitor_groups_apply_creates_a_group_that_list_shows_and_delete_removes(
    w: &mut Primary,
) {
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
