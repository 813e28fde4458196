//! What the server answers while every origin is up: addresses by weight, over UDP and TCP,
//! IPv4 and IPv6; AAAA, CNAME and NODATA by endpoint; ECS geo steering; the zone's own names.

use std::collections::BTreeSet;
use std::time::Duration;

use super::world::World;
use crate::{addresses, dig, one};
use test_support::wait_for;

const PRIMARY: [&str; 2] = ["127.0.0.11", "127.0.0.12"];

/// Equal weights: every healthy address of the primary pool, all of them A records.
pub fn equal_weights_answer_every_healthy_address_of_the_pool(w: &mut World) {
    w.establish(&[]);
    let d = one(w.dns4, &["www.example.test", "A"]);
    assert_eq!(d.status, "NOERROR");
    assert!(d.answers.iter().all(|(t, _)| t == "A"), "{d:?}");
    assert_eq!(addresses(&d), PRIMARY, "{d:?}");
}

pub fn dns_is_answered_over_tcp(w: &mut World) {
    w.establish(&[]);
    let d = one(w.dns4, &["+tcp", "www.example.test", "A"]);
    assert_eq!(addresses(&d), PRIMARY, "{d:?}");
}

pub fn dns_is_answered_over_ipv6_by_udp_and_tcp(w: &mut World) {
    w.establish(&[]);
    let d = one(w.dns6, &["+tcp", "www.example.test", "A"]);
    assert_eq!(addresses(&d), PRIMARY, "{d:?}");
    let d = one(w.dns6, &["www.example.test", "A"]);
    assert_eq!(addresses(&d), PRIMARY, "{d:?}");
}

pub fn an_ipv6_endpoint_is_answered_with_aaaa(w: &mut World) {
    w.establish(&[]);
    assert_eq!(
        addresses(&one(w.dns4, &["six.example.test", "AAAA"])),
        ["::1"]
    );
}

pub fn a_host_name_endpoint_is_answered_with_a_cname(w: &mut World) {
    w.establish(&[]);
    assert_eq!(
        one(w.dns4, &["cdn.example.test", "A"]).answers,
        [("CNAME".to_string(), "localhost.".to_string())]
    );
}

/// A for a pool of IPv6 endpoints only: NODATA, with the SOA.
pub fn a_for_an_ipv6_only_pool_is_nodata_with_the_soa(w: &mut World) {
    w.establish(&[]);
    let d = one(w.dns4, &["six.example.test", "A"]);
    assert_eq!(
        (d.status.as_str(), d.answers.len()),
        ("NOERROR", 0),
        "{d:?}"
    );
    assert_eq!(d.authority[0].0, "SOA", "{d:?}");
}

/// Unequal weights (0.25 / 0.75): one address per answer, about 25 % / 75 % over many
/// queries.
pub fn unequal_weights_answer_one_address_by_share(w: &mut World) {
    w.establish(&[]);
    let queries: Vec<&str> = std::iter::repeat_n(["weighted.example.test", "A"], 400)
        .flatten()
        .collect();
    // Both endpoints healthy: both show up within a few dozen answers.
    wait_for(
        "both weighted endpoints answered",
        Duration::from_secs(15),
        || {
            let seen: BTreeSet<String> = dig(w.dns4, &queries[..80])
                .iter()
                .flat_map(|d| d.answers.iter().map(|(_, a)| a.clone()))
                .collect();
            seen.len() == 2
        },
    );
    let answers = dig(w.dns4, &queries);
    assert_eq!(answers.len(), 400);
    assert!(
        answers.iter().all(|d| d.answers.len() == 1),
        "one address each"
    );
    let w2 = answers
        .iter()
        .filter(|d| d.answers[0].1 == "127.0.0.42")
        .count() as f64
        / 400.0;
    assert!((0.65..=0.85).contains(&w2), "weight 0.75 got {w2}");
}

/// EDNS Client Subnet: subnets located in two regions get their regions' pools.
pub fn client_subnets_in_two_regions_get_their_regions_pools(w: &mut World) {
    w.establish(&[]);
    let eu = one(w.dns4, &["+subnet=10.1.7.0/24", "geo.example.test", "A"]);
    let us = one(w.dns4, &["+subnet=10.2.3.0/24", "geo.example.test", "A"]);
    assert_eq!(addresses(&eu), ["127.0.0.51"], "{eu:?}");
    assert_eq!(addresses(&us), ["127.0.0.52"], "{us:?}");
    assert_eq!(
        addresses(&one(w.dns4, &["geo.example.test", "A"])),
        ["127.0.0.51"],
        "without a subnet, the server's own region"
    );
}

/// The ECS scope of the answer is the prefix of the network that decided.
pub fn the_client_subnet_scope_is_the_deciding_networks_prefix(w: &mut World) {
    w.establish(&[]);
    let us = one(w.dns4, &["+subnet=10.2.3.0/24", "geo.example.test", "A"]);
    assert_eq!(us.ecs.as_deref(), Some("10.2.3.0/24/16"), "{us:?}");
}

pub fn the_apex_answers_its_soa_and_ns(w: &mut World) {
    let soa = one(w.dns4, &["example.test", "SOA"]);
    assert_eq!(soa.answers[0].0, "SOA", "{soa:?}");
    assert!(
        soa.answers[0]
            .1
            .starts_with("ns1.example.test. hostmaster.example.test."),
        "{soa:?}"
    );
    let ns = one(w.dns4, &["example.test", "NS"]);
    assert_eq!(addresses(&ns), ["ns1.example.test.", "ns2.example.test."]);
}

pub fn a_missing_name_in_the_zone_is_nxdomain_with_the_soa(w: &mut World) {
    let nx = one(w.dns4, &["nothing.example.test", "A"]);
    assert_eq!(nx.status, "NXDOMAIN", "{nx:?}");
    assert_eq!(nx.authority[0].0, "SOA", "{nx:?}");
}

pub fn a_name_outside_the_zones_is_refused(w: &mut World) {
    assert_eq!(one(w.dns4, &["www.example.org", "A"]).status, "REFUSED");
}

/// Per-query metrics on the admin API: by load balancer, type and rcode (one REFUSED query
/// counted once), and the answer duration.
pub fn dns_queries_are_counted_by_load_balancer_type_and_rcode(w: &mut World) {
    w.establish(&[]);
    let refused = |metrics: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.contains("load_balancer=\"\",qtype=\"A\",rcode=\"REFUSED\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let before = refused(&test_support::scrape(w.admin));
    assert_eq!(one(w.dns4, &["www.example.org", "A"]).status, "REFUSED");
    assert_eq!(addresses(&one(w.dns4, &["www.example.test", "A"])), PRIMARY);
    let metrics = test_support::scrape(w.admin);
    for needle in [
        "meshlb_dns_queries_total{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"www.example.test\",qtype=\"A\",rcode=\"NOERROR\"}",
        "meshlb_dns_answer_duration_seconds",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
    assert_eq!(refused(&metrics) - before, 1.0, "{metrics}");
}

/// `dig`'s whole output for `args` at `server`.
fn dig_text(server: std::net::SocketAddr, args: &[&str]) -> String {
    let out = std::process::Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), "+tries=1", "+time=2"])
        .args(args)
        .output()
        .expect("dig runs (bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DO bit of a query comes back in the answer's OPT record (RFC 3225 section 3), on the
/// load-balanced names' fast path and on the zone's own names alike; without it, it does not.
pub fn the_do_bit_is_copied_into_the_answer(w: &mut World) {
    w.establish(&[]);
    for name in [
        &["www.example.test", "A"][..],
        &["example.test", "SOA"],
        &["+tcp", "www.example.test", "A"],
    ] {
        let with = dig_text(w.dns4, &[&["+dnssec"][..], name].concat());
        assert!(
            with.contains("; EDNS: version: 0, flags: do;"),
            "{name:?}: {with}"
        );
        let without = dig_text(w.dns4, name);
        assert!(
            without.contains("; EDNS: version: 0, flags:;"),
            "{name:?}: {without}"
        );
    }
}

/// A query with the NSID option gets the node's identity (RFC 5001; by default its gossip id),
/// so that an operator behind anycast can tell which node answered; one without gets none.
pub fn nsid_names_the_node_that_answered(w: &mut World) {
    w.establish(&[]);
    for name in [&["www.example.test", "A"][..], &["example.test", "SOA"]] {
        let with = dig_text(w.dns4, &[&["+nsid"][..], name].concat());
        let line = with
            .lines()
            .find(|l| l.starts_with("; NSID:"))
            .unwrap_or_else(|| panic!("{name:?}: no NSID in {with}"));
        assert!(line.contains("(\"aggregator-"), "{line}");
        assert!(!dig_text(w.dns4, name).contains("; NSID:"));
    }
}
