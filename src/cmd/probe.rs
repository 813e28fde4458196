//! `meshlb probe`: run each selected monitor once, now, and print what it found
//! (`prober::once`), as a table or JSON lines.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use lb_core::config::MemberRole;
use lb_core::{Region, RegionsTable};
use prober::ProbeTarget;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Only this pool.
    #[arg(long, value_name = "POOL")]
    pool: Option<String>,
    /// Only this endpoint (by name).
    #[arg(long, value_name = "ENDPOINT")]
    endpoint: Option<String>,
    /// Only what a prober in this region would probe (its pools' check_regions).
    #[arg(long, value_name = "REGION")]
    region: Option<Region>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let Some(config) = super::load_config(&args.config, regions) else {
        return Ok(ExitCode::from(1));
    };
    let targets: Vec<ProbeTarget> = prober::targets(&config, args.region)
        .into_iter()
        .filter(|t| args.pool.as_ref().is_none_or(|p| *p == t.key.pool))
        .filter(|t| args.endpoint.as_ref().is_none_or(|e| *e == t.key.endpoint))
        .collect();
    if targets.is_empty() {
        return Err(anyhow!(
            "nothing to probe: no enabled, monitored endpoint matches"
        ));
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let rows = runtime.block_on(prober::once::probe_once(&config, &targets));
    let groups = prober::once::group_verdicts(&rows);
    if args.json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
        for row in &groups {
            println!("{}", serde_json::to_string(row)?);
        }
    } else {
        println!(
            "{:<16} {:<16} {:<24} {:<16} {:<9} {:<6} {:>9} {:>5} {:>5}  REASON",
            "POOL", "ENDPOINT", "ADDRESS", "MONITOR", "TYPE", "RESULT", "RTT ms", "CODE", "TRIES"
        );
        for r in &rows {
            let a = &r.result.attempt;
            println!(
                "{:<16} {:<16} {:<24} {:<16} {:<9} {:<6} {:>9.2} {:>5} {:>5}  {}",
                r.pool,
                r.endpoint,
                format!("{}:{}", r.address, r.port),
                match r.role {
                    Some(role) if role != MemberRole::Decides => {
                        format!("{} ({})", r.monitor, role.name())
                    }
                    _ => r.monitor.clone(),
                },
                r.kind,
                if a.passed { "pass" } else { "FAIL" },
                a.rtt.as_secs_f64() * 1000.0,
                a.code.map_or("-".to_string(), |c| c.to_string()),
                r.result.tries,
                a.reason
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
            );
        }
    }
    if !args.json && !groups.is_empty() {
        println!();
        for g in &groups {
            println!(
                "group {} on endpoint {} of pool {}: {}",
                g.group, g.endpoint, g.pool, g.group_verdict
            );
        }
    }
    let failed = rows.iter().filter(|r| !r.result.attempt.passed).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
