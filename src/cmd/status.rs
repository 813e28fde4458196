//! `meshlb status`: load balancers, pools and endpoints with the votes behind them.

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

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let status = args.admin.get("/status")?;
    if args.admin.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    if status["fail_static"].as_bool() == Some(true) {
        println!("FAIL STATIC: no votes from any prober; serving the last known health\n");
    }
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
    println!();
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
            let regions: Vec<String> = e["regions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| format!("{} {}", r["region"].as_str().unwrap_or(""), region_cell(r)))
                .collect();
            let (name, state) = if i == 0 {
                (
                    pool["name"].as_str().unwrap_or(""),
                    pool["state"].as_str().unwrap_or(""),
                )
            } else {
                ("", "")
            };
            println!(
                "{:<20} {:<10} {:<20} {:<10} {:<22} {}",
                name,
                state,
                e["name"].as_str().unwrap_or(""),
                e["verdict"].as_str().unwrap_or(""),
                e["address"].as_str().unwrap_or(""),
                regions.join("  ")
            );
        }
    }
    println!(
        "\nsnapshot {} — {} votes counted",
        status["snapshot_version"], status["votes_counted"]
    );
    Ok(ExitCode::SUCCESS)
}
