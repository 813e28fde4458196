//! Memory of the aggregator's state at scale: 10,000 endpoints x 39 probers' ballots, the
//! tally state, the snapshot and the per-endpoint vote details of `/status`. Prints RSS.
//! `cargo run --release -p aggregator --example memory`

use std::time::{Duration, Instant};

use aggregator::tally::{tally, Ballot, ProberId, TallySettings, TallyState, Vote};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn main() {
    let base = rss_mib();
    let mut toml = String::from("[[monitors]]\nname = \"m\"\ninterval = 10\n");
    for p in 0..100 {
        toml.push_str(&format!(
            "[[pools]]\nname = \"pool{p}\"\nmonitor = \"m\"\norigins = [\n"
        ));
        for e in 0..100 {
            toml.push_str(&format!(
                "{{ name = \"endpoint-{e}\", address = \"10.{p}.{}.{}\" }},\n",
                e / 250,
                e % 250
            ));
        }
        toml.push_str("]\n");
    }
    let regions = RegionsTable::embedded().expect("regions");
    let config = Config::parse("m.toml", &toml, &regions).expect("config");
    let after_config = rss_mib();
    let ballots: Vec<Ballot> = Region::ALL
        .iter()
        .flat_map(|&r| (0..3).map(move |dc| (r, dc)))
        .map(|(region, dc)| Ballot {
            prober: ProberId {
                region,
                datacenter: format!("{region}-{dc}"),
                node: format!("prober-{region}-{dc}"),
            },
            alive: true,
            votes: config
                .pools
                .iter()
                .map(|pool| {
                    (0..pool.endpoints.len())
                        .map(|e| {
                            Some(Vote {
                                healthy: e % 7 != 0,
                                rtt_ms: Some(12.5),
                                code: Some(200),
                                reason: (e % 7 == 0).then(|| "connection refused".to_string()),
                                age: Duration::from_secs(1),
                            })
                        })
                        .collect()
                })
                .collect(),
        })
        .collect();
    let after_ballots = rss_mib();
    let outcome = tally(
        &config,
        &ballots,
        &TallyState::new(&config),
        &TallySettings::default(),
        Instant::now(),
    );
    let again = tally(
        &config,
        &ballots,
        &outcome.state,
        &TallySettings::default(),
        Instant::now(),
    );
    let after_tally = rss_mib();
    println!(
        "{{\"endpoints\":10000,\"probers\":39,\"rss_base_mib\":{base:.1},\"config_mib\":{:.1},\"ballots_mib\":{:.1},\"tally_and_snapshot_mib\":{:.1},\"total_rss_mib\":{after_tally:.1},\"changes\":{}}}",
        after_config - base,
        after_ballots - after_config,
        after_tally - after_ballots,
        outcome.changes.len() + again.changes.len(),
    );
}
