//! `meshlb status`: load balancers, pools and endpoints with the votes behind them, and the
//! configs the mesh's nodes run.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::Value;

use super::admin_client::AdminArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    admin: AdminArgs,
}

/// `3/0/0`: datacenters voting healthy / unhealthy / silent, with the region's verdict mark.
fn region_cell(r: &Value) -> String {
    let mark = match r["verdict"].as_bool() {
        Some(true) => "+",
        Some(false) => "-",
        None => "?",
    };
    format!(
        "{mark}{}/{}/{}",
        r["healthy_dcs"], r["unhealthy_dcs"], r["silent_dcs"]
    )
}

/// Prints the aggregator's `/status` (as JSON with `--json`): fail static, the load
/// balancers, the endpoints pool by pool with their votes, the snapshot; then, from
/// `/members`, the configs the mesh's nodes run.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let status = args.admin.get("/status")?;
    if args.admin.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    if status["fail_static"].as_bool() == Some(true) {
        println!("FAIL STATIC: no votes from any prober; serving the last known health\n");
    }
    print_load_balancers(&status);
    println!();
    print_endpoints(&status);
    println!(
        "\nsnapshot {} — {} votes counted — config generation {} ({})",
        status["snapshot_version"],
        status["votes_counted"],
        status["config_generation"],
        status["config_hash"].as_str().unwrap_or("?")
    );
    let members = args.admin.get("/members")?;
    println!();
    for line in config_lines(&members, lb_core::clock::unix_secs()) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The load balancers' table: name, state, and whether proxied or DNS-only.
fn print_load_balancers(status: &Value) {
    println!("{:<32} {:<10} MODE", "LOAD BALANCER", "STATE");
    for lb in status["load_balancers"].as_array().into_iter().flatten() {
        println!(
            "{:<32} {:<10} {}",
            lb["name"].as_str().unwrap_or(""),
            lb["state"].as_str().unwrap_or(""),
            if lb["proxied"].as_bool() == Some(true) {
                "proxied"
            } else {
                "dns"
            }
        );
    }
}

/// The endpoints' table, pool by pool (the pool's name and state on its first endpoint's
/// line): each endpoint's verdict, address, votes per region and drain, then a monitor
/// group endpoint's members.
fn print_endpoints(status: &Value) {
    println!(
        "{:<20} {:<10} {:<20} {:<10} {:<22} REGIONS (+/-/? verdict, healthy/unhealthy/silent DCs)",
        "POOL", "STATE", "ENDPOINT", "VERDICT", "ADDRESS"
    );
    for pool in status["pools"].as_array().into_iter().flatten() {
        for (i, e) in pool["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (name, state) = if i == 0 {
                (
                    pool["name"].as_str().unwrap_or(""),
                    pool["state"].as_str().unwrap_or(""),
                )
            } else {
                ("", "")
            };
            println!(
                "{:<20} {:<10} {:<20} {:<10} {:<22} {}{}",
                name,
                state,
                e["name"].as_str().unwrap_or(""),
                e["verdict"].as_str().unwrap_or(""),
                e["address"].as_str().unwrap_or(""),
                region_cells(&e["regions"]),
                drain_note(&e["drain"])
            );
            print_members(e);
        }
    }
}

/// A monitor group endpoint's members: one line each, its own verdict and votes.
fn print_members(endpoint: &Value) {
    for m in endpoint["members"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("");
        let label = match role {
            "decides" => m["monitor"].as_str().unwrap_or("").to_string(),
            _ => format!("{} ({role})", m["monitor"].as_str().unwrap_or("")),
        };
        println!(
            "{:<31} └ {:<30} {:<10} {}",
            "",
            label,
            m["verdict"].as_str().unwrap_or(""),
            region_cells(&m["regions"])
        );
    }
}

/// Each region's votes (`WEU +3/0/0`), two spaces apart.
fn region_cells(regions: &Value) -> String {
    let cells: Vec<String> = regions
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("{} {}", r["region"].as_str().unwrap_or(""), region_cell(r)))
        .collect();
    cells.join("  ")
}

/// An endpoint's drain, when it has one: who drains it and how long its sessions hold.
fn drain_note(drain: &Value) -> String {
    if !drain.is_object() {
        return String::new();
    }
    let by: Vec<&str> = drain["by"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    format!(
        "  DRAINING by {} ({} s of sessions left)",
        by.join("+"),
        drain["seconds_left"]
    )
}

/// The live nodes per config they run (by hash), this aggregator's first: how many of each
/// role, and when the newest of them loaded it. A mixed mesh shows as several lines.
fn config_lines(members: &Value, now: u64) -> Vec<String> {
    #[derive(Default)]
    struct Group {
        drift: bool,
        roles: BTreeMap<String, usize>,
        newest: Option<u64>,
    }
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for m in members.as_array().into_iter().flatten() {
        if m["alive"].as_bool() != Some(true) {
            continue;
        }
        let hash = m["config_hash"].as_str().unwrap_or("").to_string();
        let g = groups.entry(hash).or_default();
        g.drift |= m["config_drift"].as_bool() == Some(true);
        *g.roles
            .entry(m["role"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
        if let Some(t) = m["config_loaded_at"].as_u64() {
            g.newest = Some(g.newest.map_or(t, |n| n.max(t)));
        }
    }
    let mut groups: Vec<(String, Group)> = groups.into_iter().collect();
    groups.sort_by_key(|(_, g)| g.drift);
    let mut lines = vec![format!("{:<14} {:<22} NODES", "CONFIG", "NEWEST LOAD")];
    for (hash, g) in groups {
        let nodes: usize = g.roles.values().sum();
        let roles: Vec<String> = g.roles.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let loaded = g.newest.map_or("-".to_string(), |t| {
            format!("{} s ago", now.saturating_sub(t))
        });
        lines.push(format!(
            "{:<14} {:<22} {nodes} ({}){}",
            if hash.is_empty() { "?" } else { &hash },
            loaded,
            roles.join(", "),
            if g.drift {
                "  DRIFT: not this aggregator's"
            } else {
                ""
            }
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mixed_mesh_shows_a_line_per_config() {
        let members = serde_json::json!([
            { "role": "aggregator", "alive": true, "config_hash": "aaaa", "config_drift": false, "config_loaded_at": 900 },
            { "role": "prober", "alive": true, "config_hash": "aaaa", "config_drift": false, "config_loaded_at": 950 },
            { "role": "prober", "alive": true, "config_hash": "bbbb", "config_drift": true, "config_loaded_at": 990 },
            { "role": "prober", "alive": false, "config_hash": "cccc", "config_drift": true },
        ]);
        let lines = config_lines(&members, 1000);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].starts_with("aaaa") && lines[1].contains("50 s ago"));
        assert!(
            lines[1].contains("2 (1 aggregator, 1 prober)"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].starts_with("bbbb") && lines[2].contains("DRIFT"),
            "{}",
            lines[2]
        );
    }
}
