//! Parsing one generation of the mesh's config, as a follower does on every write:
//! `cargo bench -p lb-core --bench config_parse`.
//!
//! The document: 100 pools of 100 endpoints (10,000 endpoints, ~690 KB) rendered as the
//! primary renders it (`document::Document::to_text`), as in `bench/config_sync.sh`. Measured:
//! the whole parse (`Config::parse`), and the next generation — one endpoint's weight changed —
//! through an [`IncrementalParser`] that parsed the one before (generations alternating
//! between the two documents).

use criterion::{criterion_group, criterion_main, Criterion};
use lb_core::config::document::Document;
use lb_core::config::{Config, IncrementalParser};
use lb_core::RegionsTable;

/// The document with every endpoint's weight `weight`, except endpoint 0 of pool 0's.
fn document(first_weight: f64) -> String {
    let mut text = String::new();
    for p in 0..100 {
        text.push_str(&format!("[[pools]]\nname = \"pool-{p}\"\norigins = ["));
        for i in 0..100 {
            let weight = if p == 0 && i == 0 { first_weight } else { 1.0 };
            text.push_str(&format!(
                "{{ name = \"e{i}\", address = \"127.1.{p}.{}\", weight = {weight:?} }},",
                i + 1
            ));
        }
        text.push_str("]\n");
    }
    text.push_str("[[load_balancers]]\nname = \"www.example.com\"\ndefault_pools = [\"pool-0\"]\n");
    Document::parse(&text).expect("document").to_text()
}

fn bench(c: &mut Criterion) {
    let regions = RegionsTable::embedded().expect("regions");
    let (before, after) = (document(1.0), document(0.5));
    let mut group = c.benchmark_group("config_parse_10000_endpoints");
    group.sample_size(20);
    group.bench_function("whole", |b| {
        b.iter(|| Config::parse("bench.toml", &after, &regions).expect("config"))
    });
    // Generations alternate between the two documents: each parse is one endpoint's weight
    // changed from the one before.
    let parser = IncrementalParser::new();
    let mut next = [&before, &after].into_iter().cycle();
    group.bench_function("incremental_one_weight_changed", |b| {
        b.iter(|| {
            let text = next.next().expect("cycle");
            parser.parse("bench.toml", text, &regions).expect("config")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
