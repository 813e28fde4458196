//! The fast path (`fast.rs`) against hickory's full path: on random queries, random mutations
//! of them and random snapshots, every datagram gets byte for byte the answer the full path
//! gives, and the fast shape's parser reads what hickory reads. Both paths start from the same
//! RNG state, so where an answer is drawn by weight, they draw the same; answers prepared per
//! snapshot (`prepared.rs`) are compared the same way.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable};
use hickory_server::authority::MessageRequest;
use proptest::prelude::*;

use super::fast;
use super::Responder;
use lb_core::config::Config;
use lb_core::health::{EndpointHealth, HealthSnapshot, Verdict};
use lb_core::regions_table::RegionsTable;

const NAMES: [&str; 11] = [
    "big.example.test.",
    "weighted.example.test.",
    "ruled.example.test.",
    "geo.example.test.",
    "mixed.example.test.",
    "host.example.test.",
    "proxied.example.test.",
    "fallback.example.test.",
    "example.test.",
    "nope.example.test.",
    "elsewhere.test.",
];

fn config() -> Config {
    let regions = RegionsTable::embedded().expect("regions");
    let big: Vec<String> = (0..60)
        .map(|i| format!("{{ name = \"e{i}\", address = \"192.0.2.{i}\" }}"))
        .collect();
    let text = format!(
        r#"
[[monitors]]
name = "http"
[[pools]]
name = "weighted"
monitor = "http"
origins = [{{ name = "w1", address = "192.0.2.201", weight = 0.2 }}, {{ name = "w2", address = "192.0.2.202", weight = 0.5 }}, {{ name = "w6", address = "2001:db8::20", weight = 0.7 }}, {{ name = "w7", address = "2001:db8::21", weight = 0.1 }}]
[[pools]]
name = "big"
monitor = "http"
origins = [{}]
[[pools]]
name = "eu"
monitor = "http"
origins = [{{ name = "eu1", address = "198.51.100.1" }}, {{ name = "eu2", address = "198.51.100.3" }}]
[[pools]]
name = "us"
monitor = "http"
origins = [{{ name = "us", address = "198.51.100.2" }}]
[[pools]]
name = "mixed"
monitor = "http"
origins = [{{ name = "m4", address = "203.0.113.9" }}, {{ name = "m6a", address = "2001:db8::1" }}, {{ name = "m6b", address = "2001:db8::2" }}]
[[pools]]
name = "host"
monitor = "http"
origins = [{{ name = "h", address = "cdn.example.net" }}]
[[zones]]
name = "example.test"
[geolocation]
networks = [{{ cidr = "10.2.0.0/16", region = "ENAM" }}, {{ cidr = "2001:db8:2::/48", region = "ENAM" }}]
[[load_balancers]]
name = "big.example.test"
default_pools = ["big"]
ttl = 45
[[load_balancers]]
name = "geo.example.test"
default_pools = ["eu"]
region_pools = {{ ENAM = ["us"] }}
location_strategy = {{ prefer_ecs = "always" }}
[[load_balancers]]
name = "mixed.example.test"
default_pools = ["mixed", "eu"]
[[load_balancers]]
name = "host.example.test"
default_pools = ["host"]
[[load_balancers]]
name = "proxied.example.test"
default_pools = ["eu"]
proxied = true
[[load_balancers]]
name = "fallback.example.test"
default_pools = ["us"]
fallback_pool = "eu"
[[load_balancers]]
name = "weighted.example.test"
default_pools = ["weighted", "eu"]
ttl = 20
[[load_balancers]]
name = "ruled.example.test"
default_pools = ["eu", "weighted"]
[[load_balancers.rules]]
name = "weighted for 10/8"
condition = 'ip.src in {{10.0.0.0/8}}'
overrides = {{ default_pools = ["weighted"] }}
"#,
        big.join(", ")
    );
    Config::parse("t.toml", &text, &regions).expect("config")
}

fn responder(verdicts: &[u8]) -> Responder {
    let config = config();
    let mut snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    let mut i = 0;
    for pool in &mut snapshot.endpoints {
        for e in pool.iter_mut() {
            let verdict = match verdicts.get(i).copied().unwrap_or(0) % 4 {
                0 | 1 => Verdict::Healthy,
                2 => Verdict::Unhealthy,
                _ => Verdict::Unknown,
            };
            *e = EndpointHealth {
                verdict,
                ..Default::default()
            };
            i += 1;
        }
    }
    super::tests::responder_for(config, snapshot)
}

/// A query as a stub resolver or a recursive one sends it, in the fast shape or near it.
#[derive(Debug, Clone)]
struct Asked {
    name: usize,
    /// Which letters of the name are upper case (bit per position).
    case: u64,
    qtype: RecordType,
    id: u16,
    rd: bool,
    cd: bool,
    edns: Option<AskedEdns>,
}

/// The OPT record: payload size, DO, and a Client Subnet (IPv6?, source prefix, address bits).
type AskedEdns = (u16, bool, Option<(bool, u8, u128)>);

fn asked() -> impl Strategy<Value = Asked> {
    let qtype = prop::sample::select(vec![
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::ANY,
        RecordType::TXT,
        RecordType::SOA,
        RecordType::NS,
        RecordType::MX,
    ]);
    let subnet = prop::option::of((any::<bool>(), any::<u8>(), any::<u128>()));
    let edns = prop::option::of((any::<u16>(), any::<bool>(), subnet));
    (
        0..NAMES.len(),
        any::<u64>(),
        qtype,
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        edns,
    )
        .prop_map(|(name, case, qtype, id, rd, cd, edns)| Asked {
            name,
            case,
            qtype,
            id,
            rd,
            cd,
            edns,
        })
}

fn wire(a: &Asked) -> Vec<u8> {
    let name: String = NAMES[a.name]
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if a.case >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    let mut m = Message::new();
    m.set_id(a.id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(a.rd)
        .set_checking_disabled(a.cd)
        .add_query(Query::query(Name::from_ascii(&name).unwrap(), a.qtype));
    if let Some((payload, dnssec_ok, subnet)) = a.edns {
        let mut e = Edns::new();
        e.set_max_payload(payload.max(512));
        e.set_dnssec_ok(dnssec_ok);
        if let Some((v6, prefix, bits)) = subnet {
            let (addr, prefix) = if v6 {
                // Mostly inside the located /48, sometimes anywhere.
                let bits = if prefix % 2 == 0 {
                    (0x2001_0db8_0002u128 << 80) | (bits >> 48)
                } else {
                    bits
                };
                (IpAddr::V6(Ipv6Addr::from(bits)), prefix % 129)
            } else {
                let bits = bits as u32;
                let bits = if prefix % 2 == 0 {
                    0x0a02_0000 | (bits & 0xffff)
                } else {
                    bits
                };
                (IpAddr::V4(Ipv4Addr::from(bits)), prefix % 33)
            };
            e.options_mut()
                .insert(EdnsOption::Subnet(ClientSubnet::new(addr, prefix, 0)));
        }
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

/// The fast path's answer and the full path's, each drawing from an RNG seeded with `seed`.
fn both(r: &Responder, bytes: &[u8], src: &str, seed: u64) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let src: SocketAddr = src.parse().unwrap();
    let (mut fast_out, mut full_out) = (Vec::new(), Vec::new());
    lb_edge::seed_thread_rng(seed);
    let fast = r
        .answer_datagram(bytes, src, &mut fast_out)
        .then_some(fast_out);
    lb_edge::seed_thread_rng(seed);
    let full = r
        .answer_datagram_full(bytes, src, &mut full_out)
        .then_some(full_out);
    (fast, full)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    /// Whatever is asked, in whatever health: the same bytes as the full path. The queries
    /// share one responder, so an answer prepared for one (per place, for geo) serves the
    /// later ones it applies to.
    #[test]
    fn every_query_gets_the_full_paths_bytes(
        verdicts in prop::collection::vec(any::<u8>(), 74),
        asks in prop::collection::vec(
            (
                asked(),
                prop::sample::select(vec!["127.0.0.1:5300", "10.2.3.4:53", "[2001:db8:2::7]:53"]),
                any::<u64>(),
            ),
            6,
        ),
    ) {
        let r = responder(&verdicts);
        for (a, src, seed) in asks {
            let bytes = wire(&a);
            // Twice: the first may prepare the answer, the second is served from it.
            for seed in [seed, seed.rotate_left(17)] {
                let (fast, full) = both(&r, &bytes, src, seed);
                prop_assert_eq!(fast, full);
            }
        }
    }

    /// Geo-steered answers are prepared per place: queries for the geo name from random
    /// subnets, in and out of the located network, each get the full path's bytes, whichever
    /// query prepared the answer they are served from.
    #[test]
    fn geo_answers_prepared_per_place_are_the_full_paths(
        verdicts in prop::collection::vec(any::<u8>(), 74),
        asks in prop::collection::vec(
            (
                any::<bool>(),
                prop::option::of((any::<bool>(), 16u8..=32, any::<u128>())),
                prop::sample::select(vec!["127.0.0.1:5300", "10.2.3.4:53"]),
                any::<u64>(),
            ),
            8,
        ),
    ) {
        let r = responder(&verdicts);
        let geo = NAMES.iter().position(|n| *n == "geo.example.test.").unwrap();
        for (aaaa, subnet, src, seed) in asks {
            let a = Asked {
                name: geo,
                case: 0,
                qtype: if aaaa { RecordType::AAAA } else { RecordType::A },
                id: 1,
                rd: true,
                cd: false,
                // Even prefixes stay inside the located networks (`wire`).
                edns: Some((1232, false, subnet.map(|(v6, p, bits)| (v6, p & !1, bits)))),
            };
            let (fast, full) = both(&r, &wire(&a), src, seed);
            prop_assert_eq!(fast, full);
        }
    }

    /// Broken and unusual variants of real queries (a flipped byte, a cut, junk appended)
    /// get the full path's answer too, or none from either.
    #[test]
    fn mutated_queries_get_the_full_paths_bytes(
        verdicts in prop::collection::vec(any::<u8>(), 74),
        a in asked(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        how in 0..3u8,
    ) {
        let r = responder(&verdicts);
        let mut bytes = wire(&a);
        let i = at.index(bytes.len());
        match how {
            0 => bytes[i] = byte,
            1 => bytes.truncate(i),
            _ => bytes.push(byte),
        }
        let (fast, full) = both(&r, &bytes, "127.0.0.1:5300", 1);
        prop_assert_eq!(fast, full);
    }

    /// What the fast shape's parser accepts, hickory reads the same way.
    #[test]
    fn the_fast_parser_reads_what_hickory_reads(a in asked()) {
        let bytes = wire(&a);
        let Some(q) = fast::parse(&bytes) else {
            // Only a name outside host-name characters may be refused, and there is none.
            prop_assert!(false, "a plain query is in the fast shape: {:?}", a);
            return Ok(());
        };
        let req = MessageRequest::read(&mut BinDecoder::new(&bytes)).expect("hickory parses");
        prop_assert_eq!(q.id, req.id());
        prop_assert_eq!(q.qtype, req.queries()[0].query_type());
        // hickory's name, lower-cased as it keeps queries, in wire form.
        let lower = Name::from(req.queries()[0].name().clone()).to_bytes().unwrap();
        prop_assert_eq!(q.lower_name(), &lower[..]);
        prop_assert_eq!(q.question, &bytes[12..12 + lower.len() + 4]);
        prop_assert_eq!(q.edns.map(|e| e.payload), req.edns().map(|e| e.max_payload()));
        let subnet = req.edns().and_then(|e| e.option(EdnsCode::Subnet)).and_then(|o| match o {
            EdnsOption::Subnet(s) => Some(*s),
            _ => None,
        });
        prop_assert_eq!(q.edns.and_then(|e| e.subnet), subnet);
    }
}

/// The common queries really take the fast path: its encoder writes them (the properties
/// above would hold as well if it wrote none).
#[test]
fn common_queries_are_encoded_by_the_fast_path() {
    let r = responder(&[]);
    for (name, qtype, edns) in [
        (
            "big.example.test.",
            RecordType::A,
            Some((1232, false, None)),
        ),
        ("GEO.example.test.", RecordType::A, None),
        (
            "geo.example.test.",
            RecordType::A,
            Some((4096, true, Some((false, 24, 0x0a02_0300)))),
        ),
        (
            "mixed.example.test.",
            RecordType::AAAA,
            Some((1232, false, Some((true, 56, 1 << 100)))),
        ),
    ] {
        let a = Asked {
            name: NAMES
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name))
                .unwrap(),
            case: if name.starts_with('G') { 0b111 } else { 0 },
            qtype,
            id: 7,
            rd: true,
            cd: false,
            edns,
        };
        let bytes = wire(&a);
        let q = fast::parse(&bytes).expect("the fast shape");
        let (lb, zone) = r
            .fast_names
            .get(q.lower_name())
            .expect("a load-balanced name");
        let subnet = q.edns.and_then(|e| e.subnet);
        let reply = r.steered_reply(lb, zone, qtype, subnet, "127.0.0.1".parse().unwrap());
        let mut out = Vec::new();
        assert!(
            fast::encode(&q, &reply, r.fast_names.owner(lb), q.udp_max(), &mut out),
            "{name} {qtype}"
        );
        let (fast, full) = both(&r, &bytes, "127.0.0.1:5300", 1);
        assert_eq!(fast, full, "{name} {qtype}");
        assert_eq!(fast.as_deref(), Some(&out[..]));
    }
}

/// A query for `name` (A) as the fast path's tests ask it.
fn a_query(name: &str, id: u16) -> Vec<u8> {
    wire(&Asked {
        name: NAMES.iter().position(|n| *n == name).unwrap(),
        case: 0,
        qtype: RecordType::A,
        id,
        rd: true,
        cd: false,
        edns: Some((1232, false, None)),
    })
}

/// Whether the current snapshot has a prepared answer for `name` (A).
fn prepared(r: &Responder, name: &str) -> bool {
    let bytes = a_query(name, 1);
    let q = fast::parse(&bytes).unwrap();
    let (lb, _) = r.fast_names.get(q.lower_name()).unwrap();
    r.prepared
        .load()
        .get_or_prepare(lb, RecordType::A, || None)
        .is_some()
}

fn answered_addresses(r: &Responder, name: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    assert!(r.answer_datagram(
        &a_query(name, 9),
        "127.0.0.1:5300".parse().unwrap(),
        &mut out
    ));
    Message::from_vec(&out)
        .unwrap()
        .answers()
        .iter()
        .filter_map(|a| a.data().ip_addr())
        .collect()
}

#[test]
fn planned_answers_are_prepared_once_per_snapshot_and_follow_a_new_one() {
    let r = responder(&[]);
    for name in NAMES {
        answered_addresses_or_none(&r, name);
    }
    assert!(prepared(&r, "big.example.test."));
    assert!(prepared(&r, "weighted.example.test."));
    // A rule reads the client: steered per query.
    assert!(!prepared(&r, "ruled.example.test."));
    // Geo steering is prepared per place: where the queries above were located (the PoP's
    // region, no subnet), not in the table for every place.
    assert!(!prepared(&r, "geo.example.test."));
    assert_eq!(r.prepared.load().located(), 1);
    assert_eq!(answered_addresses(&r, "big.example.test.").len(), 60);

    // The aggregator publishes a snapshot with big's first ten endpoints down.
    let mut snapshot = (**r.generation.snapshot()).clone();
    snapshot.version += 1;
    for e in &mut snapshot.endpoints[1][..10] {
        e.verdict = Verdict::Unhealthy;
    }
    r.generation.publish(snapshot).expect("publish");
    let answered = answered_addresses(&r, "big.example.test.");
    assert_eq!(answered.len(), 50);
    assert!(!answered.contains(&"192.0.2.0".parse().unwrap()));
    assert!(Arc::ptr_eq(
        r.prepared.load().snapshot(),
        &r.generation.snapshot()
    ));
}

fn answered_addresses_or_none(r: &Responder, name: &str) {
    let mut out = Vec::new();
    r.answer_datagram(
        &a_query(name, 3),
        "127.0.0.1:5300".parse().unwrap(),
        &mut out,
    );
}

#[test]
fn prepared_draws_follow_the_weights() {
    let r = responder(&[]);
    let mut w1 = 0u32;
    const N: u32 = 4000;
    for _ in 0..N {
        let answer = answered_addresses(&r, "weighted.example.test.");
        assert_eq!(answer.len(), 1);
        if answer[0] == "192.0.2.201".parse::<IpAddr>().unwrap() {
            w1 += 1;
        }
    }
    assert!(prepared(&r, "weighted.example.test."));
    // w1 weighs 0.2 against w2's 0.5: 2/7 of the A answers.
    let share = f64::from(w1) / f64::from(N);
    assert!((share - 2.0 / 7.0).abs() < 0.04, "w1's share {share}");
}

/// The table of places is bounded: beyond `--dns-prepared-places` a place's query is steered
/// on its own (with the same bytes), and 0 prepares none.
#[test]
fn prepared_places_stay_within_their_bound() {
    let geo = NAMES
        .iter()
        .position(|n| *n == "geo.example.test.")
        .unwrap();
    // Inside the located /16 (ENAM; `wire` keeps even prefixes there), then outside it (the
    // PoP's place) in IPv4 and in IPv6: two places.
    let subnets = [
        (false, 24, 0x0a02_0300u128),
        (false, 23, 0xc000_0200),
        (true, 47, 0x2001_0db8_9999u128 << 80),
    ];
    for (places, held) in [(1, 1), (0, 0), (16, 2)] {
        let r = responder(&[]).with_prepared_places(places);
        for (i, subnet) in subnets.into_iter().enumerate() {
            let a = Asked {
                name: geo,
                case: 0,
                qtype: RecordType::A,
                id: i as u16,
                rd: true,
                cd: false,
                edns: Some((1232, false, Some(subnet))),
            };
            let (fast, full) = both(&r, &wire(&a), "127.0.0.1:5300", 1);
            assert!(fast.is_some());
            assert_eq!(fast, full, "place {i} with {places} places");
        }
        assert_eq!(r.prepared.load().located(), held, "{places} places");
    }
}

/// Each answer thread keeps its own copy of the places it has looked up: after a new
/// snapshot, the copies on this thread and on another one answer from the new one, with the
/// full path's bytes.
#[test]
fn located_answers_follow_a_new_snapshot_on_every_thread() {
    let r = responder(&[]);
    let geo = NAMES
        .iter()
        .position(|n| *n == "geo.example.test.")
        .unwrap();
    let ask = Asked {
        name: geo,
        case: 0,
        qtype: RecordType::A,
        id: 7,
        rd: true,
        cd: false,
        // Located in ENAM: the `us` pool.
        edns: Some((1232, false, Some((false, 24, 0x0a02_0300)))),
    };
    let bytes = wire(&ask);
    let addresses = |answer: &[u8]| -> Vec<IpAddr> {
        Message::from_vec(answer)
            .unwrap()
            .answers()
            .iter()
            .filter_map(|a| a.data().ip_addr())
            .collect()
    };
    let answer_here = || {
        let (fast, full) = both(&r, &bytes, "127.0.0.1:5300", 1);
        assert_eq!(fast, full);
        addresses(&fast.expect("answered"))
    };
    let answer_there = || std::thread::scope(|s| s.spawn(answer_here).join().unwrap());
    let us: Vec<IpAddr> = vec!["198.51.100.2".parse().unwrap()];
    assert_eq!(answer_here(), us);
    assert_eq!(answer_there(), us);
    assert_eq!(answer_here(), us, "from this thread's copy");

    // The aggregator publishes a snapshot with `us` down: ENAM falls back to `eu`.
    let mut snapshot = (**r.generation.snapshot()).clone();
    snapshot.version += 1;
    snapshot.endpoints[3][0].verdict = Verdict::Unhealthy;
    r.generation.publish(snapshot).expect("publish");
    let eu: Vec<IpAddr> = vec![
        "198.51.100.1".parse().unwrap(),
        "198.51.100.3".parse().unwrap(),
    ];
    assert_eq!(answer_here(), eu);
    assert_eq!(answer_there(), eu);
    assert_eq!(r.prepared.load().located(), 1);
}
