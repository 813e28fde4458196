//! Traffic steering: weights, LORS, the fallback table, geo, dynamic, proximity, shedding.

use super::*;
use crate::config::PoolId;
use crate::regions_table::CountryCode;
use crate::request::Location;

/// Three pools of one endpoint each, steered by `policy` with the given pool weights.
fn three_pools(policy: &str, weights: [f64; 3]) -> String {
    format!(
        r#"
[[pools]]
name = "a"
origins = [{{ name = "a1", address = "192.0.2.1" }}]
[[pools]]
name = "b"
origins = [{{ name = "b1", address = "192.0.2.2" }}]
[[pools]]
name = "c"
origins = [{{ name = "c1", address = "192.0.2.3" }}]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["a", "b", "c"]
steering_policy = "{policy}"
random_steering = {{ pool_weights = {{ a = {}, b = {}, c = {} }} }}
"#,
        weights[0], weights[1], weights[2]
    )
}

#[test]
fn cloudflare_weight_examples() {
    // (weights, expected shares) from Cloudflare's three examples (docs/design.md#weights).
    let cases = [
        ([1.0, 1.0, 1.0], [0.3333, 0.3333, 0.3333]),
        ([0.4, 0.5, 0.6], [0.2667, 0.3333, 0.4000]),
        ([0.8, 0.5, 0.6], [0.4211, 0.2632, 0.3157]),
    ];
    for (weights, expected) in cases {
        let w = World::new(&three_pools("random", weights));
        let ctx = w.ctx(Mode::Proxy, Region::Weu);
        let shares = w.shares("lb.test", &ctx, 60_000, false);
        // 60k draws: one standard deviation is < 0.2 points; allow five.
        for (pool, e) in ["a", "b", "c"].iter().zip(expected) {
            near(&shares, pool, e, 0.01);
        }
    }
}

#[test]
fn cloudflare_lors_example() {
    let mut w = World::new(&three_pools("least_outstanding_requests", [0.4, 0.6, 0.0]));
    // Pool A has 3 open requests, pool B none: 0.1 vs 0.6 -> 14.29 % / 85.71 %.
    w.health.pools[0].outstanding = 3;
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    let shares = w.shares("lb.test", &ctx, 60_000, false);
    near(&shares, "a", 0.1429, 0.01);
    near(&shares, "b", 0.8571, 0.01);
    assert!(!shares.contains_key("c"), "weight 0 takes no traffic");
    // Cloudflare: without the proxy's counts (DNS) LORS is plain weighted random
    // (docs/design.md#endpoint-steering).
    let ctx = w.ctx(Mode::Dns, Region::Weu);
    let shares = w.shares("lb.test", &ctx, 60_000, false);
    near(&shares, "a", 0.4, 0.01);
    near(&shares, "b", 0.6, 0.01);
}

/// Cloudflare's example (docs/design.md#the-fallback-pool): pool A primary, pool B the fallback (a maintenance page), both
/// monitored, plus the mode under test.
fn fallback_world(policy: &str, extra: &str) -> World {
    World::new(&format!(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
monitor = "m"
latitude = 50.0
longitude = 8.0
origins = [{{ name = "a1", address = "192.0.2.1" }}]
[[pools]]
name = "b"
monitor = "m"
latitude = 40.0
longitude = -74.0
origins = [{{ name = "b1", address = "192.0.2.2" }}]
[[load_balancers]]
name = "lb.test"
default_pools = ["a"]
fallback_pool = "b"
steering_policy = "{policy}"
{extra}
"#
    ))
}

#[test]
fn fallback_table_off() {
    let mut w = fallback_world("off", "");
    let ctx = w.ctx(Mode::Dns, Region::Enam);
    assert_eq!(w.shares("lb.test", &ctx, 2_000, false).get("a"), Some(&1.0));
    w.set("a/a1", Verdict::Unhealthy);
    assert_eq!(
        w.one("lb.test", &ctx),
        "b/b1",
        "off: fallback only when all others are critical"
    );
}

#[test]
fn fallback_table_random() {
    let w = fallback_world("random", "");
    let ctx = w.ctx(Mode::Dns, Region::Enam);
    // Random: the fallback is always in the draw, even with A healthy (1:1 weights).
    let shares = w.shares("lb.test", &ctx, 20_000, false);
    near(&shares, "a", 0.5, 0.02);
    near(&shares, "b", 0.5, 0.02);
}

#[test]
fn fallback_table_dynamic() {
    let mut w = fallback_world("dynamic_latency", "");
    let (a, b) = (PoolId(0), PoolId(1));
    w.health.pools[a.0].rtt_ms.set(Region::Enam, Some(90.0));
    w.health.pools[b.0].rtt_ms.set(Region::Enam, Some(10.0));
    let ctx = w.ctx(Mode::Dns, Region::Enam);
    // Dynamic: the healthy fallback takes part, and it is the fastest.
    assert_eq!(w.one("lb.test", &ctx), "b/b1");
    // Unhealthy, it does not take part while A is usable.
    w.set("b/b1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "a/a1");
    // Everything down: the fallback as the last resort, its health not considered
    // (Cloudflare; docs/design.md#the-fallback-pool).
    w.set("a/a1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "b/b1");
}

#[test]
fn fallback_table_geo() {
    let mut w = fallback_world("geo", r#"region_pools = { WEU = ["b", "a"] }"#);
    let ctx = w.ctx(Mode::Dns, Region::Weu);
    // Geo: the healthy fallback mapped first for WEU takes WEU's traffic.
    assert_eq!(w.one("lb.test", &ctx), "b/b1");
    w.set("b/b1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "a/a1");
    // Another region has no mapping: default pools.
    w.set("b/b1", Verdict::Healthy);
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Neas)), "a/a1");
}

#[test]
fn fallback_is_the_last_resort_for_every_policy() {
    for policy in [
        "off",
        "random",
        "geo",
        "dynamic_latency",
        "proximity",
        "least_outstanding_requests",
        "least_connections",
    ] {
        let mut w = fallback_world(policy, "");
        w.set("a/a1", Verdict::Unhealthy);
        for mode in [Mode::Proxy, Mode::Dns] {
            let ctx = w.ctx(mode, Region::Weu);
            assert_eq!(w.one("lb.test", &ctx), "b/b1", "{policy}");
            // Cloudflare: the fallback's "state is not considered when routing", "it does not
            // depend on health monitor data" (docs/design.md#the-fallback-pool). Unhealthy or never voted on, it serves.
            for verdict in [Verdict::Unhealthy, Verdict::Unknown] {
                w.set("b/b1", verdict);
                assert_eq!(w.one("lb.test", &ctx), "b/b1", "{policy} {verdict:?}");
            }
            w.set("b/b1", Verdict::Healthy);
        }
    }
}

/// Only a disabled (or absent) fallback leaves nothing: 530 and NODATA with the SOA. Within it,
/// endpoint steering runs over its enabled endpoints by weight, whatever their health.
#[test]
fn a_disabled_fallback_leaves_nothing_and_an_enabled_one_steers_by_weight() {
    let mut w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
monitor = "m"
origins = [{ name = "a1", address = "192.0.2.1" }]
[[pools]]
name = "b"
monitor = "m"
origins = [{ name = "b1", address = "192.0.2.2", weight = 0.25 }, { name = "b2", address = "192.0.2.3", weight = 0.75 }, { name = "off", address = "192.0.2.4", enabled = false }]
[[pools]]
name = "c"
monitor = "m"
enabled = false
origins = [{ name = "c1", address = "192.0.2.5" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["a"]
fallback_pool = "b"
[[load_balancers]]
name = "off.test"
default_pools = ["a"]
fallback_pool = "c"
[[load_balancers]]
name = "none.test"
default_pools = ["a"]
"#,
    );
    for e in ["a/a1", "b/b1", "b/b2", "b/off", "c/c1"] {
        w.set(e, Verdict::Unhealthy);
    }
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    let shares = w.shares("lb.test", &ctx, 20_000, true);
    near(&shares, "b/b1", 0.25, 0.02);
    near(&shares, "b/b2", 0.75, 0.02);
    assert!(
        !shares.contains_key("b/off"),
        "a disabled endpoint takes nothing"
    );
    assert_eq!(w.one("off.test", &ctx), "none", "a disabled fallback");
    assert_eq!(w.one("none.test", &ctx), "none", "no fallback");
    let dns = w.ctx(Mode::Dns, Region::Weu);
    assert_eq!(w.one("off.test", &dns), "none");
}

fn geo_world() -> World {
    World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "us"
origins = [{ name = "us1", address = "192.0.2.1" }]
[[pools]]
name = "eu"
origins = [{ name = "eu1", address = "192.0.2.2" }]
[[pools]]
name = "jp"
monitor = "m"
origins = [{ name = "jp1", address = "192.0.2.3" }]
[[pools]]
name = "lon"
origins = [{ name = "lon1", address = "192.0.2.4" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["us", "eu"]
region_pools = { WEU = ["eu", "us"], NEAS = ["jp"] }
country_pools = { JP = ["jp", "us"], FR = ["lon"] }
pop_pools = { lhr = ["lon"] }
location_strategy = { prefer_ecs = "geo", mode = "pop" }
"#,
    )
}

#[test]
fn geo_lookup_order_pop_country_region_default() {
    let mut w = geo_world();
    assert_eq!(
        w.lb("lb.test").settings.steering_policy.name(),
        "geo",
        "empty policy with geo maps is geo"
    );
    // PoP mapping wins over everything.
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    ctx.pop.datacenter = Some("LHR");
    assert_eq!(w.one("lb.test", &ctx), "lon/lon1");
    // Country (from the ECS) wins over region.
    let fr = Location {
        country: Some("FR".parse::<CountryCode>().unwrap()),
        ..Location::default()
    };
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    ctx.ecs = Some(("192.0.2.0/24".parse().unwrap(), fr));
    assert_eq!(w.one("lb.test", &ctx), "lon/lon1");
    // Region of the PoP.
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Weu)), "eu/eu1");
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Neas)), "jp/jp1");
    // No mapping: default pools in failover order.
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Ssam)), "us/us1");
    // Every mapped pool down: the default pools.
    w.set("jp/jp1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Neas)), "us/us1");
}

#[test]
fn prefer_ecs_decides_whether_the_subnet_locates_the_client() {
    let mut w = geo_world();
    let jp = Location {
        country: Some("JP".parse::<CountryCode>().unwrap()),
        ..Location::default()
    };
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    ctx.ecs = Some(("203.0.113.0/24".parse().unwrap(), jp));
    assert_eq!(
        w.one("lb.test", &ctx),
        "jp/jp1",
        "prefer_ecs = geo uses the ECS for geo"
    );
    let mut settings = w.config.load_balancers[0].settings.clone();
    settings.location_strategy.prefer_ecs = crate::config::PreferEcs::Never;
    w.config.load_balancers[0].settings = settings;
    assert_eq!(
        w.one("lb.test", &ctx),
        "eu/eu1",
        "never: the PoP locates the client"
    );
}

#[test]
fn dynamic_latency_ranks_by_rtt_from_the_clients_region() {
    let mut w = World::new(&three_pools("dynamic_latency", [1.0, 1.0, 1.0]));
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    // No RTT data: failover order.
    assert_eq!(w.one("lb.test", &ctx), "a/a1");
    // Data only from another region: still failover order here.
    w.health.pools[2].rtt_ms.set(Region::Neas, Some(5.0));
    assert_eq!(w.one("lb.test", &ctx), "a/a1");
    // Data from WEU: lowest EWMA wins; pools without data come after measured ones.
    w.health.pools[1].rtt_ms.set(Region::Weu, Some(40.0));
    w.health.pools[2].rtt_ms.set(Region::Weu, Some(25.0));
    assert_eq!(w.one("lb.test", &ctx), "c/c1");
    // Unmonitored pools count every endpoint healthy whatever the verdict says.
    w.set("c/c1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "c/c1");
}

#[test]
fn proximity_picks_the_nearest_pool() {
    let w = World::new(
        r#"
[[pools]]
name = "virginia"
latitude = 39.0
longitude = -77.5
origins = [{ name = "v", address = "192.0.2.1" }]
[[pools]]
name = "frankfurt"
latitude = 50.1
longitude = 8.7
origins = [{ name = "f", address = "192.0.2.2" }]
[[pools]]
name = "tokyo"
latitude = 35.7
longitude = 139.7
origins = [{ name = "t", address = "192.0.2.3" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["virginia", "frankfurt", "tokyo"]
steering_policy = "proximity"
"#,
    );
    assert_eq!(
        w.one("lb.test", &w.ctx(Mode::Dns, Region::Enam)),
        "virginia/v"
    );
    assert_eq!(
        w.one("lb.test", &w.ctx(Mode::Dns, Region::Weu)),
        "frankfurt/f"
    );
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Neas)), "tokyo/t");
    // prefer_ecs = proximity (default): a Japanese subnet seen at a European PoP goes to Tokyo.
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    let jp = Location {
        country: Some("JP".parse().unwrap()),
        ..Location::default()
    };
    ctx.ecs = Some(("203.0.113.0/24".parse().unwrap(), jp));
    assert_eq!(w.one("lb.test", &ctx), "tokyo/t");
}

fn monitored_pools(minimum_origins: u32) -> World {
    World::new(&format!(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
monitor = "m"
minimum_origins = {minimum_origins}
origins = [{{ name = "a1", address = "192.0.2.1" }}, {{ name = "a2", address = "192.0.2.2" }}]
[[pools]]
name = "b"
monitor = "m"
origins = [{{ name = "b1", address = "192.0.2.3" }}]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["a", "b"]
"#
    ))
}

#[test]
fn off_moves_to_the_next_pool_when_critical() {
    use crate::health::PoolState;
    let mut w = monitored_pools(2);
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    assert_eq!(
        w.health.pool_state(&w.config, PoolId(0), Region::Weu),
        PoolState::Healthy
    );
    w.set("a/a2", Verdict::Unhealthy);
    // One of two healthy with minimum_origins 2: Critical.
    assert_eq!(
        w.health.pool_state(&w.config, PoolId(0), Region::Weu),
        PoolState::Critical
    );
    assert_eq!(w.one("lb.test", &ctx), "b/b1");
    let mut w = monitored_pools(1);
    w.set("a/a2", Verdict::Unhealthy);
    assert_eq!(
        w.health.pool_state(&w.config, PoolId(0), Region::Weu),
        PoolState::Degraded
    );
    assert_eq!(w.one("lb.test", &ctx), "a/a1");
}

#[test]
fn unknown_endpoints_take_no_traffic() {
    use crate::health::PoolState;
    let mut w = monitored_pools(1);
    w.health = HealthSnapshot::initial(&w.config);
    assert_eq!(
        w.health.pool_state(&w.config, PoolId(0), Region::Weu),
        PoolState::Unknown
    );
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Proxy, Region::Weu)), "none");
    w.set("b/b1", Verdict::Healthy);
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Proxy, Region::Weu)), "b/b1");
}

#[test]
fn regional_health_sources_use_the_pops_own_verdict() {
    let mut w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
monitor = "m"
health_sources = ["regional", "global"]
origins = [{ name = "a1", address = "192.0.2.1" }]
[[pools]]
name = "b"
origins = [{ name = "b1", address = "192.0.2.2" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["a", "b"]
"#,
    );
    // Globally healthy, but WEU's own probers see it down.
    w.health.endpoints[0][0]
        .regional
        .set(Region::Weu, Some(false));
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Weu)), "b/b1");
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Enam)), "a/a1");
    // A region that sees it up overrides a global down.
    w.set("a/a1", Verdict::Unhealthy);
    w.health.endpoints[0][0]
        .regional
        .set(Region::Enam, Some(true));
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Enam)), "a/a1");
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Dns, Region::Sas)), "b/b1");
}

#[test]
fn load_shedding_moves_a_share_to_the_next_pool() {
    let mut toml = three_pools("off", [1.0, 1.0, 1.0]);
    toml = toml.replace(
        "name = \"a\"\n",
        "name = \"a\"\nload_shedding = { default_percent = 30.0 }\n",
    );
    let w = World::new(&toml);
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    let shares = w.shares("lb.test", &ctx, 40_000, false);
    near(&shares, "a", 0.70, 0.01);
    near(&shares, "b", 0.30, 0.01);
}

#[test]
fn hash_shedding_is_stable_per_client() {
    let mut toml = three_pools("off", [1.0, 1.0, 1.0]);
    toml = toml.replace(
        "name = \"a\"\n",
        "name = \"a\"\nload_shedding = { default_percent = 50.0, default_policy = \"hash\" }\n",
    );
    let w = World::new(&toml);
    let mut moved = 0;
    for i in 0..200u32 {
        let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
        ctx.client_ip = Some(IpAddr::from([10, 0, (i >> 8) as u8, i as u8]));
        let first = w.one("lb.test", &ctx);
        let mut rng = StdRng::seed_from_u64(u64::from(i) + 99);
        let again = w.label(&w.decide("lb.test", &ctx, &mut rng).outcome, true);
        assert_eq!(first, again, "hash shedding must not depend on the RNG");
        moved += usize::from(first == "b/b1");
    }
    assert!((60..140).contains(&moved), "about half shed: {moved}");
}

#[test]
fn disabled_load_balancers_and_pools_take_nothing() {
    let mut toml = three_pools("off", [1.0, 1.0, 1.0]);
    toml = toml.replace("name = \"a\"\n", "name = \"a\"\nenabled = false\n");
    let w = World::new(&toml);
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Proxy, Region::Weu)), "b/b1");
    let w = World::new(
        &three_pools("off", [1.0, 1.0, 1.0])
            .replace("proxied = true", "proxied = true\nenabled = false"),
    );
    assert_eq!(w.one("lb.test", &w.ctx(Mode::Proxy, Region::Weu)), "none");
}

#[test]
fn every_decision_explains_itself() {
    let w = geo_world();
    let mut rng = StdRng::seed_from_u64(1);
    let d = w.decide("lb.test", &w.ctx(Mode::Dns, Region::Weu), &mut rng);
    let text = d.explanation.join("\n");
    assert!(text.contains("traffic steering `geo`"), "{text}");
    assert!(text.contains("region_pools[WEU]"), "{text}");
    let mut quiet = w.ctx(Mode::Dns, Region::Weu);
    quiet.explain = false;
    assert!(w.decide("lb.test", &quiet, &mut rng).explanation.is_empty());
}

#[test]
fn shedding_never_turns_into_an_outage() {
    // a sheds everything, but b (the only other pool) is critical: traffic stays on a.
    let mut w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "a"
load_shedding = { default_percent = 100.0 }
origins = [{ name = "a1", address = "192.0.2.1" }]
[[pools]]
name = "b"
monitor = "m"
origins = [{ name = "b1", address = "192.0.2.2" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["a", "b"]
"#,
    );
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    assert_eq!(
        w.one("lb.test", &ctx),
        "b/b1",
        "a sheds to b while b is healthy"
    );
    w.set("b/b1", Verdict::Unhealthy);
    assert_eq!(
        w.one("lb.test", &ctx),
        "a/a1",
        "b is critical: the shed traffic comes back"
    );
}

#[test]
fn geo_cascades_through_every_mapping_and_uses_the_pops_country() {
    let mut w = geo_world();
    // lhr's PoP mapping (lon) and the UK (GB, from the PoP's datacenter) map nothing else;
    // WEU's region mapping follows.
    let mut ctx = w.ctx(Mode::Dns, Region::Weu);
    ctx.pop.datacenter = Some("lhr");
    ctx.pop.country = Some("GB".parse().unwrap());
    assert_eq!(w.one("lb.test", &ctx), "lon/lon1");
    // A Japanese PoP: country_pools[JP] applies in the default (pop) mode.
    let mut ctx = w.ctx(Mode::Dns, Region::Neas);
    ctx.pop.country = Some("JP".parse().unwrap());
    assert_eq!(w.one("lb.test", &ctx), "jp/jp1");
    // jp down: JP's list continues with us before the region's and default lists.
    w.set("jp/jp1", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "us/us1");
}
