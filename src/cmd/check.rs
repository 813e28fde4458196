//! `meshlb check FILE`.

use std::path::PathBuf;
use std::process::ExitCode;

use lb_core::config::Config;
use lb_core::RegionsTable;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file (meshlb.toml).
    file: PathBuf,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    match Config::load(&args.file, regions) {
        Ok(config) => {
            print!("{}", summary(&args.file.display().to_string(), &config));
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            for e in &errors.0 {
                eprintln!("{e}");
            }
            eprintln!(
                "{}: {} error{} found",
                args.file.display(),
                errors.0.len(),
                if errors.0.len() == 1 { "" } else { "s" }
            );
            Ok(ExitCode::from(1))
        }
    }
}

fn summary(file: &str, c: &Config) -> String {
    let mut out = format!(
        "{file}: OK — {} monitor(s), {} pool(s) with {} endpoint(s), {} load balancer(s)\n",
        c.monitors.len(),
        c.pools.len(),
        c.endpoint_count(),
        c.load_balancers.len()
    );
    for m in &c.monitors {
        out.push_str(&format!(
            "  monitor {}: {} every {}s, timeout {}s, retries {}, up/down {}/{}\n",
            m.name,
            m.kind.type_name(),
            m.interval.as_secs(),
            m.timeout.as_secs(),
            m.retries,
            m.consecutive_up,
            m.consecutive_down
        ));
    }
    for p in &c.pools {
        let monitor = match (
            p.monitor_group.and_then(|g| c.monitor_groups.get(g)),
            p.checks.first(),
        ) {
            (Some(g), _) => {
                let members: Vec<String> = p
                    .checks
                    .iter()
                    .map(|ch| match ch.role {
                        lb_core::config::MemberRole::Decides => c.check_monitor(ch).name.clone(),
                        role => format!("{} ({})", c.check_monitor(ch).name, role.name()),
                    })
                    .collect();
                format!("group {} [{}]", g.name, members.join(", "))
            }
            (None, Some(ch)) => c.check_monitor(ch).name.clone(),
            (None, None) => "none (always healthy)".to_string(),
        };
        out.push_str(&format!(
            "  pool {}: {} endpoint(s), minimum_origins {}, monitor {}, origin steering {}{}\n",
            p.name,
            p.endpoints.len(),
            p.minimum_origins,
            monitor,
            p.origin_steering.policy.name(),
            if p.enabled { "" } else { ", DISABLED" }
        ));
    }
    for lb in &c.load_balancers {
        let s = &lb.settings;
        let names = |ids: &[lb_core::config::PoolId]| {
            ids.iter()
                .map(|&p| c.pool(p).name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "  load balancer {} ({}): steering {}, pools [{}], fallback {}, affinity {}, ttl {}s, {} rule(s)\n",
            lb.name,
            match (&lb.layer4, lb.proxied) {
                (Some(l4), _) => format!(
                    "layer 4 {}, {} port(s) from {}, PROXY {}",
                    l4.transport.name(),
                    l4.ports.len(),
                    l4.ports.first().map_or(0, |p| p.listen),
                    l4.proxy_protocol.name()
                ),
                (None, true) => "proxied".to_string(),
                (None, false) => "DNS-only".to_string(),
            },
            s.steering_policy.name(),
            names(&s.default_pools),
            s.fallback_pool.map_or("none".to_string(), |p| c.pool(p).name.clone()),
            s.session_affinity.kind.name(),
            s.ttl,
            lb.rules.len()
        ));
    }
    out
}
