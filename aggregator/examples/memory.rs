//! Memory of the aggregator's state at scale: 10,000 endpoints x 39 probers' ballots, the
//! tally state, the snapshot and the per-endpoint vote details of `/status`. Prints RSS.
//! `cargo run --release -p aggregator --example memory`

use std::time::Instant;

use aggregator::tally::{tally, TallySettings, TallyState};

#[path = "../benches/support/world.rs"]
mod world;

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
    let config = world::config();
    let after_config = rss_mib();
    let ballots = world::ballots(&config);
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
