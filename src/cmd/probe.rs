//! `meshlb probe`: run each selected monitor once, now, and print what it found — the
//! operator's preview before trusting a monitor with traffic. For a pool with a monitor group
//! it probes every enabled member and also prints the verdict the group would give each
//! endpoint if those results were everyone's (`lb_core::group_verdict`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Context};
use lb_core::config::{Config, MemberRole};
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
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    /// The member's role in its group: decides, must_be_healthy or monitoring_only.
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip)]
    member_role: Option<MemberRole>,
    #[serde(flatten)]
    result: &'a ProbeResult,
}

/// What a monitor group makes of one endpoint's member results.
#[derive(Serialize)]
struct GroupRow<'a> {
    pool: &'a str,
    endpoint: &'a str,
    group: &'a str,
    group_verdict: &'static str,
}

/// The role of `t`'s monitor in its pool's group, when the pool has one.
fn role(config: &Config, t: &ProbeTarget) -> Option<MemberRole> {
    t.group.as_ref()?;
    let pool = config.pool(config.pool_by_name(&t.key.pool)?);
    pool.checks
        .iter()
        .find(|c| config.check_monitor(c).name == t.monitor.name)
        .map(|c| c.role)
}

/// One row per endpoint of a group pool: the group's verdict over the members' results.
fn group_rows<'a>(rows: &[Row<'a>]) -> Vec<GroupRow<'a>> {
    let mut out: Vec<GroupRow> = Vec::new();
    for r in rows {
        let Some(group) = r.group else { continue };
        if out
            .iter()
            .any(|g| g.pool == r.pool && g.endpoint == r.endpoint)
        {
            continue;
        }
        let members = rows
            .iter()
            .filter(|o| o.pool == r.pool && o.endpoint == r.endpoint)
            .filter_map(|o| Some((o.member_role?, Some(o.result.attempt.passed))));
        out.push(GroupRow {
            pool: r.pool,
            endpoint: r.endpoint,
            group,
            group_verdict: match lb_core::group_verdict::group_verdict(members) {
                Some(true) => "healthy",
                Some(false) => "unhealthy",
                None => "unknown",
            },
        });
    }
    out
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
            group: t.group.as_deref(),
            role: role(&config, t).map(MemberRole::name),
            member_role: role(&config, t),
            result: r,
        })
        .collect();
    let groups = group_rows(&rows);
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
                    Some(role) if role != "decides" => format!("{} ({role})", r.monitor),
                    _ => r.monitor.to_string(),
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
    let failed = results.iter().filter(|r| !r.attempt.passed).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
