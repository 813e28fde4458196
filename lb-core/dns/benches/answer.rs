//! One DNS answer, datagram in, datagram out: `cargo bench -p lb-dns --bench answer`.
//!
//! The same two-record failover answer prepared per snapshot (`prepared.rs`) and steered per
//! query (a custom rule that never matches takes its load balancer off the prepared path), a
//! 25/75 weighted pair drawn from prepared records, and a geo-steered name located by its EDNS
//! Client Subnet, prepared per place (two geolocation lookups and a table lookup per query).
//! Every query carries EDNS; the geo one a /24 subnet. The failover and geo answers once more
//! with one thread per core answering at once (wall time divided by the thread count), as the
//! UDP threads of `batch.rs` do.

use std::net::{IpAddr, SocketAddr};

use criterion::{criterion_group, criterion_main, Criterion};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use lb_core::config::Config;
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::RegionsTable;
use lb_dns::Responder;

const CONFIG: &str = r#"
[[monitors]]
name = "http"
[[pools]]
name = "primary"
monitor = "http"
origins = [{ name = "a", address = "192.0.2.11" }, { name = "b", address = "192.0.2.12" }]
[[pools]]
name = "weighted"
monitor = "http"
origins = [{ name = "a", address = "192.0.2.41", weight = 0.25 }, { name = "b", address = "192.0.2.42", weight = 0.75 }]
[[pools]]
name = "us"
monitor = "http"
origins = [{ name = "a", address = "198.51.100.1" }]
[[zones]]
name = "example.test"
[geolocation]
networks = [{ cidr = "10.2.0.0/16", region = "ENAM" }]
[[load_balancers]]
name = "www.example.test"
default_pools = ["primary"]
[[load_balancers]]
name = "steered.example.test"
default_pools = ["primary"]
[[load_balancers.rules]]
name = "never"
condition = 'http.host == "nowhere.test"'
overrides = { default_pools = ["weighted"] }
[[load_balancers]]
name = "weighted.example.test"
default_pools = ["weighted"]
[[load_balancers]]
name = "geo.example.test"
steering_policy = "geo"
default_pools = ["primary"]
region_pools = { ENAM = ["us"] }
location_strategy = { prefer_ecs = "always" }
"#;

#[path = "../src/test_responder.rs"]
mod test_responder;

fn responder() -> Responder {
    let regions = RegionsTable::embedded().expect("regions");
    let config = Config::parse("bench.toml", CONFIG, &regions).expect("config");
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    test_responder::responder_for(config, snapshot)
}

fn query(name: &str, subnet: Option<&str>) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(
            Name::from_ascii(name).expect("name"),
            RecordType::A,
        ));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    if let Some(s) = subnet {
        let ip: IpAddr = s.parse().expect("subnet");
        edns.options_mut()
            .insert(EdnsOption::Subnet(ClientSubnet::new(ip, 24, 0)));
    }
    m.set_edns(edns);
    m.to_vec().expect("query")
}

/// (label, name asked, ECS subnet).
const CASES: [(&str, &str, Option<&str>); 4] = [
    ("prepared/failover", "www.example.test.", None),
    ("per_query/failover", "steered.example.test.", None),
    ("prepared/weighted", "weighted.example.test.", None),
    ("prepared/geo_ecs", "geo.example.test.", Some("10.2.3.0")),
];

fn bench(c: &mut Criterion) {
    let r = responder();
    let src: SocketAddr = "127.0.0.1:5300".parse().expect("addr");
    let mut out = Vec::with_capacity(1232);
    let mut group = c.benchmark_group("dns");
    for (label, name, subnet) in CASES {
        let q = query(name, subnet);
        assert!(r.answer_datagram(&q, src, &mut out), "{label} answers");
        group.bench_function(label, |b| {
            b.iter(|| r.answer_datagram(std::hint::black_box(&q), src, &mut out))
        });
    }
    // The answer threads share one snapshot's prepared answers (`prepared.rs`): the failover
    // and geo answers with every thread answering at once, the wall time per answer.
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    for (label, name, subnet) in [CASES[0], CASES[3]] {
        let q = query(name, subnet);
        group.bench_function(format!("{label}_{threads}_threads"), |b| {
            b.iter_custom(|iters| {
                let start = std::time::Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..threads {
                        s.spawn(|| {
                            let mut out = Vec::with_capacity(1232);
                            for _ in 0..iters {
                                r.answer_datagram(std::hint::black_box(&q), src, &mut out);
                            }
                        });
                    }
                });
                start.elapsed() / u32::try_from(threads).unwrap_or(1)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
