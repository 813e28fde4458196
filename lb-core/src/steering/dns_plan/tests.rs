//! A plan answers as the engine does: on random snapshots, for random clients, the engine's
//! decision and the plan's answer drawn with the same RNG state are the same endpoints; and
//! every load balancer whose answer could depend on the client gets no plan.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{DnsAnswerPlan, DnsPlan};
use crate::health::{EndpointHealth, Verdict};
use crate::region::Region;
use crate::request::Location;
use crate::steering::tests::World;
use crate::steering::{Engine, Outcome};

const CONFIG: &str = r#"
[[monitors]]
name = "http"
[[pools]]
name = "equal"
monitor = "http"
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "192.0.2.2" }, { name = "c", address = "2001:db8::3" }]
[[pools]]
name = "weighted"
monitor = "http"
origins = [{ name = "a", address = "192.0.2.11", weight = 0.25 }, { name = "b", address = "192.0.2.12", weight = 0.75 }, { name = "c", address = "2001:db8::13", weight = 0.5 }]
[[pools]]
name = "host"
monitor = "http"
origins = [{ name = "h", address = "cdn.example.net" }, { name = "a", address = "192.0.2.21", weight = 0.5 }]
[[pools]]
name = "latency"
monitor = "http"
origin_steering = { policy = "latency" }
origins = [{ name = "a", address = "192.0.2.31" }, { name = "b", address = "192.0.2.32", weight = 0.3 }]
[[pools]]
name = "hashed"
monitor = "http"
origin_steering = { policy = "hash" }
origins = [{ name = "a", address = "192.0.2.41" }, { name = "b", address = "192.0.2.42", weight = 0.3 }]
[[pools]]
name = "shedding"
monitor = "http"
load_shedding = { default_percent = 30 }
origins = [{ name = "a", address = "192.0.2.51" }]
[[load_balancers]]
name = "failover.test"
default_pools = ["equal", "weighted", "host"]
fallback_pool = "latency"
[[load_balancers]]
name = "weighted.test"
default_pools = ["weighted", "latency"]
[[load_balancers]]
name = "host.test"
default_pools = ["host", "equal"]
[[load_balancers]]
name = "off.test"
enabled = false
default_pools = ["equal"]
[[load_balancers]]
name = "random.test"
steering_policy = "random"
default_pools = ["equal", "weighted"]
[[load_balancers]]
name = "geo.test"
steering_policy = "geo"
default_pools = ["equal"]
region_pools = { ENAM = ["weighted"] }
[[load_balancers]]
name = "dynamic.test"
steering_policy = "dynamic_latency"
default_pools = ["equal", "weighted"]
[[load_balancers]]
name = "ip-cookie.test"
default_pools = ["weighted"]
session_affinity = "ip_cookie"
[[load_balancers]]
name = "hashed.test"
default_pools = ["hashed"]
[[load_balancers]]
name = "shedding.test"
default_pools = ["shedding", "equal"]
[[load_balancers]]
name = "rules.test"
default_pools = ["equal"]
[[load_balancers.rules]]
name = "weighted for 10/8"
condition = 'ip.src in {10.0.0.0/8}'
overrides = { default_pools = ["weighted"] }
"#;

const PLANNABLE: [&str; 4] = ["failover.test", "weighted.test", "host.test", "off.test"];
const NOT_PLANNABLE: [&str; 7] = [
    "random.test",
    "geo.test",
    "dynamic.test",
    "ip-cookie.test",
    "hashed.test",
    "shedding.test",
    "rules.test",
];

/// `world` with endpoint health from `bits` (verdict, and an RTT in WEU for `latency`).
fn world(bits: &[u8]) -> World {
    let mut w = World::new(CONFIG);
    let mut i = 0;
    for pool in &mut w.health.endpoints {
        for e in pool.iter_mut() {
            let b = bits.get(i).copied().unwrap_or(0);
            let mut health = EndpointHealth {
                verdict: match b % 4 {
                    0 | 1 => Verdict::Healthy,
                    2 => Verdict::Unhealthy,
                    _ => Verdict::Unknown,
                },
                ..Default::default()
            };
            health.rtt_ms.set(Region::Weu, Some(f64::from(b / 4)));
            *e = health;
            i += 1;
        }
    }
    w
}

fn plan(w: &World, lb: &str, qtype: &'static str) -> Option<DnsPlan> {
    let engine = Engine::new(&w.config, &w.regions, &w.key);
    engine.dns_plan(
        w.lb(lb),
        &w.health,
        w.pop(Region::Weu),
        qtype,
        1_800_000_000,
    )
}

/// What the plan answers with the next draws of `rng`.
fn answered(plan: &DnsPlan, rng: &mut StdRng) -> Outcome {
    match &plan.answer {
        DnsAnswerPlan::Fixed { pool, endpoints } => Outcome::Answer {
            pool: *pool,
            endpoints: endpoints.clone(),
        },
        DnsAnswerPlan::Draw { pool, choices } => Outcome::Answer {
            pool: *pool,
            endpoints: DnsPlan::draw(choices, rng).into_iter().collect(),
        },
        DnsAnswerPlan::Nothing => Outcome::NoPool,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_plan_answers_what_the_engine_decides(
        bits in prop::collection::vec(any::<u8>(), 16),
        lb in prop::sample::select(PLANNABLE.to_vec()),
        qtype in prop::sample::select(vec!["A", "AAAA", "CNAME"]),
        client in any::<u32>(),
        ecs in prop::option::of((any::<u32>(), 0u8..=32)),
        seed in any::<u64>(),
    ) {
        let w = world(&bits);
        let plan = plan(&w, lb, qtype);
        prop_assert!(plan.is_some(), "{} has a plan", lb);
        let plan = plan.unwrap_or_else(|| unreachable!());
        let mut ctx = w.ctx(crate::request::Mode::Dns, Region::Weu);
        ctx.explain = false;
        ctx.client_ip = Some(IpAddr::V4(Ipv4Addr::from(client)));
        ctx.client_location = Some(Location { region: Some(Region::Enam), ..Default::default() });
        if let Some((addr, prefix)) = ecs {
            let net = IpNet::new(IpAddr::V4(Ipv4Addr::from(addr)), prefix).expect("prefix");
            ctx.ecs = Some((net.trunc(), Location { region: Some(Region::Neas), ..Default::default() }));
        }
        let question = crate::request::DnsQuestion { qname: lb, qtype };
        ctx.dns = Some(question);
        let decision = w.decide(lb, &ctx, &mut StdRng::seed_from_u64(seed));
        prop_assert_eq!(decision.ttl, plan.ttl);
        prop_assert_eq!(decision.outcome, answered(&plan, &mut StdRng::seed_from_u64(seed)));
    }
}

#[test]
fn no_plan_where_the_client_or_a_draw_decides() {
    let w = world(&[]);
    for lb in NOT_PLANNABLE {
        assert_eq!(plan(&w, lb, "A"), None, "{lb}");
    }
}

#[test]
fn plans_are_fixed_drawn_or_empty_as_weights_and_health_say() {
    let mut w = world(&[]);
    assert!(matches!(
        plan(&w, "failover.test", "A").map(|p| p.answer),
        Some(DnsAnswerPlan::Fixed { endpoints, .. }) if endpoints.len() == 2
    ));
    assert!(matches!(
        plan(&w, "weighted.test", "A").map(|p| p.answer),
        Some(DnsAnswerPlan::Draw { choices, .. }) if choices.len() == 2
    ));
    assert_eq!(
        plan(&w, "off.test", "A").map(|p| p.answer),
        Some(DnsAnswerPlan::Nothing)
    );
    for e in ["a", "b", "c"] {
        w.set(&format!("equal/{e}"), Verdict::Unhealthy);
    }
    // Failover to the weighted pool: a draw between its two IPv4 endpoints; its one IPv6
    // endpoint is all an AAAA answer can carry.
    assert!(matches!(
        plan(&w, "failover.test", "A").map(|p| p.answer),
        Some(DnsAnswerPlan::Draw { choices, .. }) if choices.len() == 2
    ));
    assert!(matches!(
        plan(&w, "failover.test", "AAAA").map(|p| p.answer),
        Some(DnsAnswerPlan::Fixed { endpoints, .. }) if endpoints.len() == 1
    ));
}
