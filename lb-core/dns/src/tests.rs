//! The responder on its own: wire bytes in, wire bytes out, no sockets. Truncation, error
//! codes and ECS scope here; arbitrary bytes never panic (the `cargo fuzz` target in `fuzz/`
//! runs the same entry point without bounds).

use std::net::SocketAddr;
use std::sync::Arc;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use proptest::prelude::*;

use super::Responder;
use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::region::Region;
use lb_core::regions_table::RegionsTable;
use lb_edge::{Generation, PopInfo, Pops};

fn responder() -> Responder {
    let regions = RegionsTable::embedded().expect("regions");
    let origins: Vec<String> = (0..50)
        .map(|i| format!("{{ name = \"e{i}\", address = \"192.0.2.{i}\" }}"))
        .collect();
    let text = format!(
        r#"
[[pools]]
name = "big"
origins = [{}]
[[pools]]
name = "eu"
origins = [{{ name = "eu", address = "198.51.100.1" }}]
[[pools]]
name = "us"
origins = [{{ name = "us", address = "198.51.100.2" }}]
[[zones]]
name = "example.test"
[geolocation]
networks = [{{ cidr = "10.2.0.0/16", region = "ENAM" }}]
[[load_balancers]]
name = "big.example.test"
default_pools = ["big"]
[[load_balancers]]
name = "geo.example.test"
default_pools = ["eu"]
region_pools = {{ ENAM = ["us"] }}
location_strategy = {{ prefer_ecs = "always" }}
[[load_balancers]]
name = "plain.example.test"
default_pools = ["eu"]
"#,
        origins.join(", ")
    );
    let config = Config::parse("t.toml", &text, &regions).expect("config");
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    responder_for(config, snapshot)
}

pub(super) use super::test_responder::responder_for;

fn query(name: &str, qtype: RecordType, edns: Option<Edns>) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if let Some(e) = edns {
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

fn ask(r: &Responder, bytes: &[u8]) -> Option<Message> {
    ask_from(r, bytes, "127.0.0.1:5300")
}

fn ask_from(r: &Responder, bytes: &[u8], src: &str) -> Option<Message> {
    let mut out = Vec::new();
    let src: SocketAddr = src.parse().unwrap();
    r.answer_datagram(bytes, src, &mut out)
        .then(|| Message::from_vec(&out).expect("our answer parses"))
}

fn edns(payload: u16) -> Edns {
    let mut e = Edns::new();
    e.set_max_payload(payload);
    e
}

#[test]
fn a_large_answer_goes_whole_over_tcp() {
    let r = responder();
    let mut out = Vec::new();
    let bytes = query("big.example.test.", RecordType::A, None);
    assert!(r.answer_stream(&bytes, "127.0.0.1:5300".parse().unwrap(), &mut out));
    let m = Message::from_vec(&out).expect("parses");
    assert!(!m.truncated(), "TCP has no 512-byte limit");
    assert_eq!(m.answers().len(), 50);
}

#[test]
fn a_large_answer_is_truncated_over_udp_and_fits_with_edns() {
    let r = responder();
    let plain = ask(&r, &query("big.example.test.", RecordType::A, None)).unwrap();
    assert!(plain.truncated(), "50 A records do not fit in 512 bytes");
    assert!(plain.answers().len() < 50, "what fits, with TC set");
    assert_eq!(plain.id(), 4242);
    let with_edns = ask(
        &r,
        &query("big.example.test.", RecordType::A, Some(edns(4096))),
    )
    .unwrap();
    assert!(!with_edns.truncated());
    assert_eq!(with_edns.answers().len(), 50, "1232 bytes hold them all");
    assert_eq!(
        with_edns.extensions().as_ref().map(|e| e.max_payload()),
        Some(super::EDNS_PAYLOAD)
    );
}

#[test]
fn error_codes() {
    let r = responder();
    // A header that parses, then garbage: FORMERR with the same id.
    let mut broken = query("plain.example.test.", RecordType::A, None);
    broken.truncate(16);
    let m = ask(&r, &broken).unwrap();
    assert_eq!((m.id(), m.response_code()), (4242, ResponseCode::FormErr));
    // Too short for a header: dropped.
    assert!(ask(&r, &[1, 2, 3]).is_none());
    // A response is never answered (no reflection loops).
    let mut resp = Message::from_vec(&query("plain.example.test.", RecordType::A, None)).unwrap();
    resp.set_message_type(MessageType::Response);
    assert!(ask(&r, &resp.to_vec().unwrap()).is_none());
    // Another opcode: NOTIMP.
    let mut notify = Message::from_vec(&query("plain.example.test.", RecordType::A, None)).unwrap();
    notify.set_op_code(OpCode::Notify);
    let m = ask(&r, &notify.to_vec().unwrap()).unwrap();
    assert_eq!(m.response_code(), ResponseCode::NotImp);
    // Outside the zones: REFUSED, not authoritative.
    let m = ask(&r, &query("www.example.org.", RecordType::A, None)).unwrap();
    assert_eq!(m.response_code(), ResponseCode::Refused);
    assert!(!m.authoritative());
}

fn subnet(m: &Message) -> Option<ClientSubnet> {
    m.extensions()
        .as_ref()
        .and_then(|e| e.option(hickory_proto::rr::rdata::opt::EdnsCode::Subnet))
        .and_then(|o| match o {
            EdnsOption::Subnet(s) => Some(*s),
            _ => None,
        })
}

#[test]
fn ecs_steers_geo_and_carries_the_scope() {
    let r = responder();
    let with = |net: &str, prefix: u8, lb: &str| {
        let mut e = edns(1232);
        e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
            net.parse().unwrap(),
            prefix,
            0,
        )));
        ask(&r, &query(lb, RecordType::A, Some(e))).unwrap()
    };
    let us = with("10.2.3.0", 24, "geo.example.test.");
    assert_eq!(us.answers()[0].data().to_string(), "198.51.100.2");
    assert_eq!(subnet(&us).map(|s| s.scope_prefix()), Some(16));
    // Unknown network: the PoP (WEU) answers, valid for the whole source prefix.
    let eu = with("172.16.0.0", 24, "geo.example.test.");
    assert_eq!(eu.answers()[0].data().to_string(), "198.51.100.1");
    assert_eq!(subnet(&eu).map(|s| s.scope_prefix()), Some(24));
    // A failover-only load balancer does not depend on location: scope 0.
    let plain = with("10.2.3.0", 24, "plain.example.test.");
    assert_eq!(subnet(&plain).map(|s| s.scope_prefix()), Some(0));
}

/// `location_strategy.mode = "resolver_ip"`: the resolver's address, located by the MaxMind
/// database, picks the country's pools; an unknown resolver gets the PoP's answer.
#[test]
fn resolver_ip_is_located_by_the_database() {
    let regions = RegionsTable::embedded().expect("regions");
    let text = format!(
        r#"
[[pools]]
name = "eu"
origins = [{{ name = "eu", address = "198.51.100.1" }}]
[[pools]]
name = "jp"
origins = [{{ name = "jp", address = "198.51.100.3" }}]
[geolocation]
database = "{}/../tests/data/geo-test.mmdb"
[[load_balancers]]
name = "geo.example.test"
default_pools = ["eu"]
country_pools = {{ JP = ["jp"] }}
location_strategy = {{ mode = "resolver_ip", prefer_ecs = "never" }}
"#,
        env!("CARGO_MANIFEST_DIR")
    );
    let config = Arc::new(Config::parse("t.toml", &text, &regions).expect("config"));
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    let generation = Arc::new(Generation::new(1, config, snapshot).expect("generation"));
    let pop = PopInfo::new(&regions, Region::Weu, None);
    let r = Responder::new(
        generation,
        Arc::new(regions),
        AffinityKey::derive(b"t"),
        pop,
        Arc::new(Pops::from_pointee(Vec::new())),
        1,
    )
    .expect("responder");
    let q = query("geo.example.test.", RecordType::A, None);
    let tokyo = ask_from(&r, &q, "203.0.113.77:5300").unwrap();
    assert_eq!(tokyo.answers()[0].data().to_string(), "198.51.100.3");
    let unknown = ask_from(&r, &q, "192.0.2.1:5300").unwrap();
    assert_eq!(unknown.answers()[0].data().to_string(), "198.51.100.1");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Whatever arrives, the responder returns (answer or silence) and never panics; what it
    /// sends parses.
    #[test]
    fn arbitrary_datagrams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let r = responder_once();
        let mut out = Vec::new();
        if r.answer_datagram(&bytes, "127.0.0.1:1".parse().unwrap(), &mut out) {
            prop_assert!(Message::from_vec(&out).is_ok());
        }
    }

    /// Valid queries with bytes flipped after the header.
    #[test]
    fn mutated_queries_never_panic(flips in proptest::collection::vec((12usize..60, any::<u8>()), 1..8)) {
        let r = responder_once();
        let mut e = edns(1232);
        e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new("10.2.3.0".parse().unwrap(), 24, 0)));
        let mut bytes = query("geo.example.test.", RecordType::A, Some(e));
        for (i, b) in flips {
            if i < bytes.len() {
                bytes[i] ^= b;
            }
        }
        let mut out = Vec::new();
        if r.answer_datagram(&bytes, "127.0.0.1:1".parse().unwrap(), &mut out) {
            prop_assert!(Message::from_vec(&out).is_ok());
        }
    }
}

fn responder_once() -> &'static Responder {
    static R: std::sync::OnceLock<Responder> = std::sync::OnceLock::new();
    R.get_or_init(responder)
}

/// Cloudflare: a proxied load balancer hides its origins (docs/design.md#dns-answers). Its name is answered with meshlb's own
/// PoPs, nearest to the client first; with none, NODATA with the SOA.
#[test]
fn a_proxied_name_is_answered_with_the_pops_never_the_origins() {
    use lb_core::pops::ProxyPop;
    let regions = RegionsTable::embedded().expect("regions");
    let text = r#"
[[pools]]
name = "web"
origins = [{ name = "o", address = "198.51.100.1" }]
[[zones]]
name = "example.test"
[geolocation]
networks = [{ cidr = "10.2.0.0/16", region = "ENAM" }]
[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["web"]
location_strategy = { prefer_ecs = "always" }
"#;
    let config = Arc::new(Config::parse("t.toml", text, &regions).expect("config"));
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    let generation = Arc::new(Generation::new(1, config, snapshot).expect("generation"));
    let pops = Arc::new(Pops::from_pointee(Vec::new()));
    let r = Responder::new(
        generation,
        Arc::new(regions.clone()),
        AffinityKey::derive(b"t"),
        PopInfo::new(&regions, Region::Weu, Some("ams")),
        Arc::clone(&pops),
        1,
    )
    .expect("responder");
    let addresses =
        |m: &Message| -> Vec<String> { m.answers().iter().map(|a| a.data().to_string()).collect() };
    // No PoP advertised: NODATA with the SOA, never the origin.
    let none = ask(&r, &query("www.example.test.", RecordType::A, None)).unwrap();
    assert_eq!(none.response_code(), ResponseCode::NoError);
    assert!(none.answers().is_empty());
    assert!(none
        .name_servers()
        .iter()
        .any(|n| n.record_type() == RecordType::SOA));
    pops.store(Arc::new(vec![
        ProxyPop {
            node: "agg-weu".into(),
            region: Region::Weu,
            addresses: vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()],
        },
        ProxyPop {
            node: "agg-enam".into(),
            region: Region::Enam,
            addresses: vec!["192.0.2.2".parse().unwrap()],
        },
    ]));
    // Located by the PoP (WEU): the WEU PoP first.
    let m = ask(&r, &query("www.example.test.", RecordType::A, None)).unwrap();
    assert_eq!(addresses(&m), ["192.0.2.1", "192.0.2.2"]);
    // A client subnet in ENAM: the ENAM PoP first, the scope its network's prefix.
    let mut e = edns(1232);
    e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
        "10.2.3.0".parse().unwrap(),
        24,
        0,
    )));
    let m = ask(&r, &query("www.example.test.", RecordType::A, Some(e))).unwrap();
    assert_eq!(addresses(&m), ["192.0.2.2", "192.0.2.1"]);
    assert_eq!(subnet(&m).map(|s| s.scope_prefix()), Some(16));
    // AAAA: the PoPs' IPv6 addresses only; never the origin's address in any answer.
    let m = ask(&r, &query("www.example.test.", RecordType::AAAA, None)).unwrap();
    assert_eq!(addresses(&m), ["2001:db8::1"]);
    for qtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::ANY,
        RecordType::CNAME,
    ] {
        let m = ask(&r, &query("www.example.test.", qtype, None)).unwrap();
        assert!(
            !addresses(&m).contains(&"198.51.100.1".to_string()),
            "{qtype}"
        );
    }
}

/// RFC 6891 and the cases of ISC's EDNS compliance tests, on the wire.
mod edns_compliance {
    use super::*;
    use hickory_proto::rr::rdata::opt::EdnsCode;

    fn answered(m: &Message) -> usize {
        m.answers().len()
    }

    #[test]
    fn a_higher_edns_version_is_badvers_with_our_version_0() {
        let r = responder();
        let mut e = edns(1232);
        e.set_version(1);
        let m = ask(&r, &query("plain.example.test.", RecordType::A, Some(e))).unwrap();
        // 16 on the wire (hickory reads 16 back as BADSIG, which shares the number).
        assert_eq!(u16::from(m.response_code()), 16);
        assert_eq!(m.extensions().as_ref().map(|e| e.version()), Some(0));
        assert_eq!(answered(&m), 0);
        // Version 0 is answered.
        let m = ask(
            &r,
            &query("plain.example.test.", RecordType::A, Some(edns(1232))),
        )
        .unwrap();
        assert_eq!(
            (m.response_code(), answered(&m)),
            (ResponseCode::NoError, 1)
        );
    }

    #[test]
    fn unknown_options_and_flags_are_ignored() {
        let r = responder();
        let mut e = edns(1232);
        e.options_mut()
            .insert(EdnsOption::Unknown(65001, b"whatever".to_vec()));
        let mut bytes = query("plain.example.test.", RecordType::A, Some(e));
        let m = ask(&r, &bytes).unwrap();
        assert_eq!(
            (m.response_code(), answered(&m)),
            (ResponseCode::NoError, 1)
        );
        assert!(
            m.extensions()
                .as_ref()
                .is_some_and(|e| e.option(EdnsCode::Unknown(65001)).is_none()),
            "an unknown option is not echoed"
        );
        // Unknown EDNS flags (the Z bits of the OPT TTL): the last OPT's TTL flags are the
        // 2 bytes after the extended rcode and version; set them all but DO.
        let opt = find_opt(&bytes).expect("an OPT record");
        bytes[opt + 7] = 0x7f;
        bytes[opt + 8] = 0xff;
        let m = ask(&r, &bytes).unwrap();
        assert_eq!(
            (m.response_code(), answered(&m)),
            (ResponseCode::NoError, 1)
        );
    }

    #[test]
    fn a_bad_option_length_is_formerr() {
        let r = responder();
        let mut e = edns(1232);
        e.options_mut()
            .insert(EdnsOption::Unknown(65001, b"abcd".to_vec()));
        let mut bytes = query("plain.example.test.", RecordType::A, Some(e));
        let opt = find_opt(&bytes).expect("an OPT record");
        // The option's length (after code) claims more than the record holds.
        let option_len = opt + 11 + 2;
        bytes[option_len] = 0x00;
        bytes[option_len + 1] = 0x40;
        let m = ask(&r, &bytes).unwrap();
        assert_eq!((m.id(), m.response_code()), (4242, ResponseCode::FormErr));
    }

    #[test]
    fn an_unknown_opcode_is_notimp() {
        let r = responder();
        let mut bytes = query("plain.example.test.", RecordType::A, Some(edns(1232)));
        // Opcode 15 (unassigned): bits 3..=6 of the third byte.
        bytes[2] = (bytes[2] & 0x87) | (15 << 3);
        let m = ask(&r, &bytes).unwrap();
        assert_eq!((m.id(), m.response_code()), (4242, ResponseCode::NotImp));
    }

    #[test]
    fn any_is_answered_minimally() {
        let r = responder();
        let m = ask(&r, &query("big.example.test.", RecordType::ANY, None)).unwrap();
        assert_eq!(m.response_code(), ResponseCode::NoError);
        assert_eq!(m.answers().len(), 1, "one record, not the pool's 50");
        assert_eq!(m.answers()[0].record_type(), RecordType::HINFO);
        // A name that does not exist is still NXDOMAIN.
        let m = ask(&r, &query("nope.example.test.", RecordType::ANY, None)).unwrap();
        assert_eq!(m.response_code(), ResponseCode::NXDomain);
    }

    /// Where the OPT record starts in a query we built (it is the last record, owner `.`).
    fn find_opt(bytes: &[u8]) -> Option<usize> {
        (0..bytes.len().saturating_sub(11))
            .rev()
            .find(|&i| bytes[i] == 0 && bytes[i + 1] == 0 && bytes[i + 2] == 41)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Real queries (with EDNS and ECS, of every type we answer) with bytes flipped anywhere:
    /// the responder answers or stays silent, never panics, and what it sends parses.
    #[test]
    fn mutated_queries_of_every_kind_never_panic(
        qtype in prop::sample::select(vec![
            RecordType::A, RecordType::AAAA, RecordType::ANY, RecordType::SOA,
            RecordType::NS, RecordType::CNAME, RecordType::TXT,
        ]),
        name in prop::sample::select(vec![
            "big.example.test.", "geo.example.test.", "example.test.", "nope.example.test.",
        ]),
        with_ecs in any::<bool>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let mut e = edns(1232);
        if with_ecs {
            e.options_mut().insert(EdnsOption::Subnet(ClientSubnet::new(
                "10.2.3.0".parse().unwrap(), 24, 0,
            )));
        }
        let mut bytes = query(name, qtype, Some(e));
        for (at, value) in flips {
            let i = at % bytes.len();
            bytes[i] = value;
        }
        let r = responder_once();
        let mut out = Vec::new();
        if r.answer_datagram(&bytes, "127.0.0.1:1".parse().unwrap(), &mut out) {
            prop_assert!(Message::from_vec(&out).is_ok());
        }
    }
}
