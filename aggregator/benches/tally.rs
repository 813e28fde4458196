//! The tally of 10,000 endpoints x 39 probers (13 regions x 3 datacenters): target < 50 ms.
//! `cargo bench -p aggregator --bench tally`

use std::time::Instant;

use aggregator::tally::{tally, TallySettings, TallyState};
use criterion::{criterion_group, criterion_main, Criterion};

#[path = "support/world.rs"]
mod world;

fn bench(c: &mut Criterion) {
    let config = world::config();
    let ballots = world::ballots(&config);
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
