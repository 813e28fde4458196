//! `meshlb probe`: run each selected monitor once, now, and print what it found — the
//! operator's preview before trusting a monitor with traffic.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use lb_core::{Region, RegionsTable};
use prober::monitors::{check_for, probe, IcmpClients};
use prober::{ProbeResult, ProbeTarget};
use serde::Serialize;

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

#[derive(Serialize)]
struct Row<'a> {
    pool: &'a str,
    endpoint: &'a str,
    address: String,
    port: u16,
    monitor: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    result: &'a ProbeResult,
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
    let results: Vec<ProbeResult> = runtime.block_on(async {
        let icmp = IcmpClients::new();
        let probes = targets.iter().map(|t| {
            let check = check_for(&t.monitor.kind, &icmp);
            async move {
                match check {
                    Ok(c) => probe(c.as_ref(), t).await,
                    Err(e) => ProbeResult {
                        attempt: prober::Attempt::fail(
                            std::time::Duration::ZERO,
                            None,
                            prober::Failure::Setup(e.to_string()),
                        ),
                        tries: 0,
                    },
                }
            }
        });
        futures::future::join_all(probes).await
    });
    let rows: Vec<Row> = targets
        .iter()
        .zip(&results)
        .map(|(t, r)| Row {
            pool: &t.key.pool,
            endpoint: &t.key.endpoint,
            address: t.address.to_string(),
            port: t.port,
            monitor: &t.monitor.name,
            kind: t.monitor.kind.type_name(),
            result: r,
        })
        .collect();
    if args.json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
    } else {
        println!(
            "{:<16} {:<16} {:<24} {:<9} {:<6} {:>9} {:>5} {:>5}  REASON",
            "POOL", "ENDPOINT", "ADDRESS", "TYPE", "RESULT", "RTT ms", "CODE", "TRIES"
        );
        for r in &rows {
            let a = &r.result.attempt;
            println!(
                "{:<16} {:<16} {:<24} {:<9} {:<6} {:>9.2} {:>5} {:>5}  {}",
                r.pool,
                r.endpoint,
                format!("{}:{}", r.address, r.port),
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
    let failed = results.iter().filter(|r| !r.attempt.passed).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
