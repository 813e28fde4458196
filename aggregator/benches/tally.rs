//! The tally of 10,000 endpoints x 39 probers (13 regions x 3 datacenters): target < 50 ms.
//! `cargo bench -p aggregator --bench tally`

use std::time::{Duration, Instant};

use aggregator::tally::{tally, Ballot, ProberId, TallySettings, TallyState, Vote};
use criterion::{criterion_group, criterion_main, Criterion};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};

fn world() -> (Config, Vec<Ballot>) {
    let mut toml = String::from("[[monitors]]\nname = \"m\"\ninterval = 10\n");
    for p in 0..100 {
        toml.push_str(&format!(
            "[[pools]]\nname = \"pool{p}\"\nmonitor = \"m\"\norigins = [\n"
        ));
        for e in 0..100 {
            toml.push_str(&format!(
                "{{ name = \"e{e}\", address = \"10.{p}.{}.{}\" }},\n",
                e / 250,
                e % 250
            ));
        }
        toml.push_str("]\n");
    }
    let regions = RegionsTable::embedded().expect("regions");
    let config = Config::parse("bench.toml", &toml, &regions).expect("config");
    let ballots = Region::ALL
        .iter()
        .flat_map(|&r| (0..3).map(move |dc| (r, dc)))
        .map(|(region, dc)| Ballot {
            prober: ProberId {
                region,
                datacenter: format!("{region}-{dc}"),
                node: format!("{region}-{dc}"),
            },
            alive: true,
            votes: config
                .pools
                .iter()
                .enumerate()
                .map(|(p, pool)| {
                    (0..pool.endpoints.len())
                        .map(|e| {
                            Some(Vote {
                                healthy: (p + e + dc) % 17 != 0,
                                rtt_ms: Some(10.0 + (e % 50) as f64),
                                code: Some(200),
                                reason: None,
                                age: Duration::from_secs(2),
                            })
                        })
                        .collect()
                })
                .collect(),
        })
        .collect();
    (config, ballots)
}

fn bench(c: &mut Criterion) {
    let (config, ballots) = world();
    let settings = TallySettings::default();
    let first = tally(
        &config,
        &ballots,
        &TallyState::new(&config),
        &settings,
        Instant::now(),
    );
    assert_eq!(
        first.snapshot.endpoints.iter().map(Vec::len).sum::<usize>(),
        10_000
    );
    c.bench_function("tally/10000_endpoints_x_39_probers", |b| {
        b.iter(|| tally(&config, &ballots, &first.state, &settings, Instant::now()))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
