//! The large world shared by the tally benchmark and the memory example: 100 pools of 100
//! endpoints, and a ballot from each of 39 probers (13 regions x 3 datacenters) for all of them.

use std::time::Duration;

use aggregator::tally::{Ballot, ProberId, Vote};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};

pub fn config() -> Config {
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
    Config::parse("world.toml", &toml, &regions).expect("config")
}

/// One ballot per prober; about one endpoint in seventeen is voted down by each.
pub fn ballots(config: &Config) -> Vec<Ballot> {
    Region::ALL
        .iter()
        .flat_map(|&r| (0..3).map(move |dc| (r, dc)))
        .map(|(region, dc)| Ballot {
            prober: ProberId {
                region,
                datacenter: format!("{region}-{dc}"),
                node: format!("prober-{region}-{dc}"),
            },
            alive: true,
            age: Duration::from_secs(2),
            votes: config
                .pools
                .iter()
                .enumerate()
                .map(|(p, pool)| {
                    pool.checks
                        .iter()
                        .map(|_| {
                            (0..pool.endpoints.len())
                                .map(|e| {
                                    let healthy = (p + e + dc) % 17 != 0;
                                    Some(Vote {
                                        healthy,
                                        rtt_ms: Some(10.0 + (e % 50) as f64),
                                        code: Some(200),
                                        reason: (!healthy).then(|| "connection refused".into()),
                                    })
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect(),
        })
        .collect()
}
