//! `meshlb explain`: why does a query from here go there?

use std::net::IpAddr;
use std::process::ExitCode;

use lb_core::Region;

use super::admin_client::AdminArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The load balancer (hostname).
    #[arg(long)]
    lb: String,
    /// The PoP region to decide from (default: the aggregator's).
    #[arg(long)]
    pop: Option<Region>,
    /// The client address.
    #[arg(long)]
    client: Option<IpAddr>,
    /// dns or proxy (default: by the load balancer).
    #[arg(long)]
    mode: Option<String>,
    #[command(flatten)]
    admin: AdminArgs,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut query = format!("/explain?lb={}", args.lb);
    if let Some(p) = args.pop {
        query.push_str(&format!("&pop={p}"));
    }
    if let Some(c) = args.client {
        query.push_str(&format!("&client={c}"));
    }
    if let Some(m) = &args.mode {
        query.push_str(&format!("&mode={m}"));
    }
    let v = args.admin.get(&query)?;
    if args.admin.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} from {} ({}): {}",
        v["load_balancer"].as_str().unwrap_or(""),
        v["pop"].as_str().unwrap_or(""),
        v["mode"].as_str().unwrap_or(""),
        v["outcome"].as_str().unwrap_or("")
    );
    for (i, step) in v["steps"].as_array().into_iter().flatten().enumerate() {
        println!("  {}. {}", i + 1, step.as_str().unwrap_or(""));
    }
    for (i, p) in v["pops"].as_array().into_iter().flatten().enumerate() {
        let addrs: Vec<&str> = p["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        println!(
            "  PoP {}: {} ({}, {} km): {}",
            i + 1,
            p["node"].as_str().unwrap_or(""),
            p["region"].as_str().unwrap_or(""),
            p["distance_km"],
            addrs.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
