//! Why a decision's pool was chosen (`Decision::why`, the access log's `reason`).

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::World;
use crate::health::Verdict;
use crate::region::Region;
use crate::request::Mode;
use crate::steering::{LocationSource, PoolReason};

const POOLS: &str = r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
monitor = "m"
origins = [{ name = "a1", address = "192.0.2.1" }]
[[pools]]
name = "b"
monitor = "m"
origins = [{ name = "b1", address = "192.0.2.2" }]
[[pools]]
name = "fb"
monitor = "m"
origins = [{ name = "f1", address = "192.0.2.3" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["a", "b"]
fallback_pool = "fb"
"#;

fn reason(w: &World) -> PoolReason {
    let mut rng = StdRng::seed_from_u64(1);
    w.decide("lb.test", &w.ctx(Mode::Proxy, Region::Weu), &mut rng)
        .why
        .reason
}

#[test]
fn the_policys_first_choice_is_steering() {
    let w = World::new(POOLS);
    assert_eq!(reason(&w), PoolReason::Steering { passed: 0 });
    assert_eq!(reason(&w).name(), "steering");
}

#[test]
fn a_pool_after_an_unusable_one_is_failover() {
    let mut w = World::new(POOLS);
    w.set("a/a1", Verdict::Unhealthy);
    assert_eq!(reason(&w), PoolReason::Steering { passed: 1 });
    assert_eq!(reason(&w).name(), "failover");
}

#[test]
fn the_fallback_pool_is_fallback() {
    let mut w = World::new(POOLS);
    w.set("a/a1", Verdict::Unhealthy);
    w.set("b/b1", Verdict::Unhealthy);
    assert_eq!(reason(&w), PoolReason::Fallback);
}

#[test]
fn a_request_moved_on_by_shedding_is_load_shedding() {
    let w = World::new(&POOLS.replace(
        "name = \"a\"\n",
        "name = \"a\"\nload_shedding = { default_percent = 100.0 }\n",
    ));
    assert_eq!(reason(&w), PoolReason::Shed);
}

#[test]
fn no_pool_has_no_reason_and_geo_keeps_the_clients_region() {
    let disabled = World::new(&POOLS.replace(
        "fallback_pool = \"fb\"\n",
        "fallback_pool = \"fb\"\nenabled = false\n",
    ));
    assert_eq!(reason(&disabled), PoolReason::None);
    let geo = World::new(&POOLS.replace(
        "fallback_pool = \"fb\"\n",
        "fallback_pool = \"fb\"\nsteering_policy = \"geo\"\n",
    ));
    let mut rng = StdRng::seed_from_u64(1);
    let why = geo
        .decide("lb.test", &geo.ctx(Mode::Proxy, Region::Enam), &mut rng)
        .why;
    assert_eq!(why.location, Some((Region::Enam, LocationSource::Pop)));
    assert_eq!(why.policy.name(), "geo");
}
