//! The authoritative DNS server of a real `meshlb aggregator`, fed by a real mesh (three
//! probers probing real HTTP origins over loopback), queried with real `dig` over UDP and TCP,
//! IPv4 and IPv6: equal and unequal weights, AAAA and CNAME endpoints, EDNS Client Subnet geo
//! steering, REFUSED/NXDOMAIN/NODATA with the SOA, and failover primary -> secondary ->
//! fallback (also once its origin is down) -> nothing once a reload disables it -> back as
//! origins stop and start; and proxied names answered with the nearest live PoPs.
//!
//! A harness of named trials (libtest-mimic, `harness = false`): the trials of each module
//! under `tests/dns/` share its world (`world::World`, `pops::PopsWorld`), started once and
//! taken by one trial at a time; each trial waits for the state it needs and puts back what it
//! changed, so they run in any order.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

mod dns {
    pub mod answers;
    pub mod cookies;
    pub mod failover;
    pub mod pops;
    pub mod world;
}

use dns::*;
use test_support::{trials, Shared, Threads};

/// What `dig` printed for one query.
#[derive(Debug, Default)]
pub struct Dig {
    pub status: String,
    /// (type, rdata) of the answer section.
    pub answers: Vec<(String, String)>,
    pub authority: Vec<(String, String)>,
    pub ecs: Option<String>,
}

/// Runs `dig` with `args` against the server and parses every response it prints (dig takes
/// many queries on one command line).
pub fn dig(server: SocketAddr, args: &[&str]) -> Vec<Dig> {
    let out = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .args(["+norec", "+noall", "+comments", "+answer", "+authority"])
        .args(["+tries=1", "+time=2"])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("dig runs (bind9-dnsutils)");
    parse(&String::from_utf8_lossy(&out.stdout))
}

fn parse(text: &str) -> Vec<Dig> {
    let mut all = Vec::new();
    let mut section = "";
    for line in text.lines() {
        if line.contains("->>HEADER<<-") {
            let status = line
                .split("status: ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .unwrap_or("")
                .to_string();
            all.push(Dig {
                status,
                ..Dig::default()
            });
            section = "";
        } else if line.starts_with(";; ANSWER SECTION") {
            section = "answer";
        } else if line.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
        } else if let Some(ecs) = line.strip_prefix("; CLIENT-SUBNET: ") {
            if let Some(d) = all.last_mut() {
                d.ecs = Some(ecs.trim().to_string());
            }
        } else if !line.starts_with(';') && !line.trim().is_empty() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 5 {
                let rr = (f[3].to_string(), f[4..].join(" "));
                if let Some(d) = all.last_mut() {
                    match section {
                        "answer" => d.answers.push(rr),
                        "authority" => d.authority.push(rr),
                        _ => {}
                    }
                }
            }
        }
    }
    all
}

pub fn one(server: SocketAddr, args: &[&str]) -> Dig {
    dig(server, args).pop().unwrap_or_default()
}

/// The answer's values, sorted.
pub fn addresses(d: &Dig) -> Vec<String> {
    let mut a: Vec<String> = d.answers.iter().map(|(_, v)| v.clone()).collect();
    a.sort();
    a
}

static WORLD: Shared<world::World> = Shared::new(world::World::start);
static POPS: Shared<pops::PopsWorld> = Shared::new(pops::PopsWorld::start);
static COOKIES: Shared<cookies::CookieWorld> = Shared::new(cookies::CookieWorld::start);

fn main() {
    let mesh = trials![
        WORLD =>
        answers::equal_weights_answer_every_healthy_address_of_the_pool,
        answers::dns_is_answered_over_tcp,
        answers::the_do_bit_is_copied_into_the_answer,
        answers::nsid_names_the_node_that_answered,
        answers::dns_is_answered_over_ipv6_by_udp_and_tcp,
        answers::an_ipv6_endpoint_is_answered_with_aaaa,
        answers::a_host_name_endpoint_is_answered_with_a_cname,
        answers::a_for_an_ipv6_only_pool_is_nodata_with_the_soa,
        answers::unequal_weights_answer_one_address_by_share,
        answers::client_subnets_in_two_regions_get_their_regions_pools,
        answers::the_client_subnet_scope_is_the_deciding_networks_prefix,
        answers::the_apex_answers_its_soa_and_ns,
        answers::a_missing_name_in_the_zone_is_nxdomain_with_the_soa,
        answers::a_name_outside_the_zones_is_refused,
        answers::dns_queries_are_counted_by_load_balancer_type_and_rcode,
        failover::a_dead_primary_pool_fails_over_to_the_secondary_within_the_bound_and_back,
        failover::with_every_pool_down_the_fallback_pool_answers,
        failover::the_fallback_pool_answers_whatever_its_health,
        failover::with_the_fallback_disabled_nothing_left_is_nodata_with_the_soa,
    ];
    let proxied = trials![
        POPS =>
        pops::the_answering_pops_own_address_comes_first,
        pops::a_client_subnets_region_puts_its_pop_first,
        pops::aaaa_for_a_proxied_name_answers_the_pops_ipv6_addresses,
        pops::a_proxied_name_never_reveals_an_origin,
        pops::explain_shows_the_eligible_pops_in_order,
        pops::a_dead_pop_leaves_the_answer,
    ];
    let cookies = trials![
        COOKIES =>
        cookies::dig_gets_a_server_cookie_that_a_second_query_returns,
        cookies::a_query_with_a_valid_server_cookie_passes_rate_limiting,
        cookies::a_client_cookie_alone_over_the_rate_gets_badcookie,
        cookies::kdig_gets_a_cookie_accepted_back_and_the_nsid,
    ];
    let all = [mesh, proxied, cookies].into_iter().flatten().collect();
    trials::run(all, Threads::PerTrial);
}
