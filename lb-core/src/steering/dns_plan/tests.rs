//! A plan answers as the engine does: on random snapshots, a plan made for one random client
//! answers another — any other for a failover load balancer, one located at the same place
//! for a location-steered one — with what the engine decides for it, drawn from the same RNG
//! state; and every load balancer whose answer could depend on more of the client gets no
//! plan.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::{DnsAnswerPlan, DnsPlan, PlanScope};
use crate::health::{EndpointHealth, Verdict};
use crate::region::Region;
use crate::request::{DnsQuestion, Location, Mode, RequestContext};
use crate::steering::tests::World;
use crate::steering::{locate, Engine, Outcome};

const CONFIG: &str = r#"
[[monitors]]
name = "http"
[[pools]]
name = "equal"
monitor = "http"
latitude = 50.1
longitude = 8.7
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "192.0.2.2" }, { name = "c", address = "2001:db8::3" }]
[[pools]]
name = "weighted"
monitor = "http"
latitude = 39.0
longitude = -77.5
origins = [{ name = "a", address = "192.0.2.11", weight = 0.25 }, { name = "b", address = "192.0.2.12", weight = 0.75 }, { name = "c", address = "2001:db8::13", weight = 0.5 }]
[[pools]]
name = "host"
monitor = "http"
origins = [{ name = "h", address = "cdn.example.net" }, { name = "a", address = "192.0.2.21", weight = 0.5 }]
[[pools]]
name = "latency"
monitor = "http"
latitude = 35.7
longitude = 139.7
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
region_pools = { ENAM = ["weighted"], NEAS = ["latency", "equal"] }
location_strategy = { prefer_ecs = "always", mode = "resolver_ip" }
[[load_balancers]]
name = "dynamic.test"
steering_policy = "dynamic_latency"
default_pools = ["equal", "weighted"]
location_strategy = { prefer_ecs = "always", mode = "resolver_ip" }
[[load_balancers]]
name = "proximity.test"
steering_policy = "proximity"
default_pools = ["equal", "weighted", "latency"]
location_strategy = { mode = "resolver_ip" }
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

const PLANNABLE: [&str; 7] = [
    "failover.test",
    "weighted.test",
    "host.test",
    "off.test",
    "geo.test",
    "dynamic.test",
    "proximity.test",
];
const NOT_PLANNABLE: [&str; 5] = [
    "random.test",
    "ip-cookie.test",
    "hashed.test",
    "shedding.test",
    "rules.test",
];

/// `world` with endpoint health from `bits` (verdict, and an RTT per region, for `latency`
/// and dynamic latency).
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
            for (k, region) in REGIONS.iter().enumerate() {
                health
                    .rtt_ms
                    .set(*region, Some(f64::from(b.rotate_left(k as u32) / 4)));
            }
            *e = health;
            i += 1;
        }
    }
    for (p, pool) in w.health.pools.iter_mut().enumerate() {
        for (k, region) in REGIONS.iter().enumerate() {
            let b = bits.get(p * 3 + k).copied().unwrap_or(0);
            pool.rtt_ms.set(*region, Some(f64::from(b)));
        }
    }
    w
}

/// Where the random clients are: few places, so that two clients often share one.
const REGIONS: [Region; 3] = [Region::Weu, Region::Enam, Region::Neas];

/// A client as the DNS frontend describes it: resolver address, the resolver's geolocation and
/// an EDNS Client Subnet's, each from `REGIONS` (an index past its end: unknown).
type Client = (u32, usize, Option<(u32, usize)>);

fn client() -> impl Strategy<Value = Client> {
    (
        any::<u32>(),
        0..REGIONS.len() + 1,
        prop::option::of((any::<u32>(), 0..REGIONS.len() + 1)),
    )
}

fn located(i: usize) -> Location {
    Location {
        region: REGIONS.get(i).copied(),
        ..Default::default()
    }
}

fn ctx<'a>(w: &World, lb: &'a str, qtype: &'static str, c: Client) -> RequestContext<'a> {
    let (ip, resolver, ecs) = c;
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    ctx.explain = false;
    ctx.client_ip = Some(IpAddr::V4(Ipv4Addr::from(ip)));
    ctx.client_location = Some(located(resolver));
    ctx.ecs = ecs.map(|(addr, at)| {
        let net = IpNet::new(IpAddr::V4(Ipv4Addr::from(addr)), 24).expect("prefix");
        (net.trunc(), located(at))
    });
    ctx.dns = Some(DnsQuestion { qname: lb, qtype });
    ctx
}

fn plan(w: &World, lb: &str, qtype: &'static str) -> Option<DnsPlan> {
    let engine = Engine::new(&w.config, &w.regions, &w.key);
    engine.dns_plan(w.lb(lb), &w.health, &ctx(w, lb, qtype, (1, 0, None)))
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
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn a_plan_answers_what_the_engine_decides(
        bits in prop::collection::vec(any::<u8>(), 24),
        lb in prop::sample::select(PLANNABLE.to_vec()),
        qtype in prop::sample::select(vec!["A", "AAAA", "CNAME"]),
        planned_for in client(),
        asking in client(),
        seed in any::<u64>(),
    ) {
        let w = world(&bits);
        let engine = Engine::new(&w.config, &w.regions, &w.key);
        let config = w.lb(lb);
        let scope = engine.dns_plan_scope(config);
        prop_assert!(scope.is_some(), "{} can be planned", lb);
        let plan = engine.dns_plan(config, &w.health, &ctx(&w, lb, qtype, planned_for));
        prop_assert!(plan.is_some(), "{} has a plan", lb);
        let plan = plan.unwrap_or_else(|| unreachable!());
        let asking = ctx(&w, lb, qtype, asking);
        let settings = &config.settings;
        let here = locate(settings.location_strategy, settings.steering_policy, &asking, &w.regions);
        match scope {
            Some(PlanScope::Location) => {
                prop_assert!(plan.location.is_some());
                // The plan is for another place: it does not answer this client.
                if plan.location != Some(here) {
                    return Ok(());
                }
            }
            _ => prop_assert_eq!(plan.location, None),
        }
        let decision = w.decide(lb, &asking, &mut StdRng::seed_from_u64(seed));
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
