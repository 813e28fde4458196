//! One steering decision per policy: `cargo bench -p lb-core --bench steering`.
//!
//! The world: four pools of four endpoints in three continents, everything healthy with RTT
//! data from every region, explanations off (as on the DNS and proxy hot paths).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::request::{HttpFields, Mode, Pop, RequestContext};
use lb_core::steering::{AffinityUpdate, Engine};
use lb_core::{Region, RegionsTable};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn config(policy: &str, origin_policy: &str, extra: &str) -> String {
    let mut text = String::from("[[monitors]]\nname = \"m\"\n");
    for (pool, lat, lon) in [
        ("us", 39.0, -77.5),
        ("eu", 50.1, 8.7),
        ("ap", 35.7, 139.7),
        ("sa", -23.5, -46.6),
    ] {
        text.push_str(&format!(
            "[[pools]]\nname = \"{pool}\"\nmonitor = \"m\"\nlatitude = {lat}\nlongitude = {lon}\norigin_steering = {{ policy = \"{origin_policy}\", latency_sensitivity_ms = 20 }}\norigins = ["
        ));
        for i in 0..4 {
            text.push_str(&format!(
                "{{ name = \"{pool}{i}\", address = \"192.0.2.{}\", weight = 0.{} }},",
                i + 1,
                i + 5
            ));
        }
        text.push_str("]\n");
    }
    text.push_str(&format!(
        "[[load_balancers]]\nname = \"lb.test\"\nproxied = true\ndefault_pools = [\"us\", \"eu\", \"ap\", \"sa\"]\nsteering_policy = \"{policy}\"\nregion_pools = {{ WEU = [\"eu\", \"us\"] }}\n{extra}\n"
    ));
    text
}

struct World {
    config: Config,
    regions: RegionsTable,
    health: HealthSnapshot,
    key: AffinityKey,
}

fn world(text: &str) -> World {
    let regions = RegionsTable::embedded().expect("regions");
    let config = Config::parse("bench.toml", text, &regions).expect("bench config");
    let mut health = HealthSnapshot::uniform(&config, Verdict::Healthy);
    for (p, pool) in health.pools.iter_mut().enumerate() {
        for r in Region::ALL {
            pool.rtt_ms
                .set(r, Some(10.0 + (p * 7 + r.index() * 3) as f64));
        }
    }
    for (p, eps) in health.endpoints.iter_mut().enumerate() {
        for (e, ep) in eps.iter_mut().enumerate() {
            ep.outstanding = (p + e) as u32;
            ep.connections = e as u32;
            for r in Region::ALL {
                ep.rtt_ms.set(r, Some(10.0 + (e * 9) as f64));
            }
        }
    }
    World {
        config,
        regions,
        health,
        key: AffinityKey::derive(b"bench"),
    }
}

fn bench(c: &mut Criterion) {
    let headers = vec![("user-agent".to_string(), "bench".to_string())];
    let http = HttpFields {
        method: "POST",
        host: "lb.test",
        path: "/api/x",
        query: "",
        headers: &headers,
        cookies: &[],
        tls: true,
    };
    let cases: Vec<(&str, String, Mode)> = vec![
        ("traffic/off", config("off", "random", ""), Mode::Proxy),
        ("traffic/random", config("random", "random", ""), Mode::Proxy),
        ("traffic/geo", config("geo", "random", ""), Mode::Proxy),
        ("traffic/dynamic_latency", config("dynamic_latency", "random", ""), Mode::Proxy),
        ("traffic/proximity", config("proximity", "random", ""), Mode::Proxy),
        ("traffic/least_outstanding_requests", config("least_outstanding_requests", "random", ""), Mode::Proxy),
        ("traffic/least_connections", config("least_connections", "random", ""), Mode::Proxy),
        ("endpoint/hash", config("off", "hash", ""), Mode::Proxy),
        ("endpoint/least_outstanding_requests", config("off", "least_outstanding_requests", ""), Mode::Proxy),
        ("endpoint/latency", config("off", "latency", ""), Mode::Proxy),
        ("dns/answer_set", config("off", "random", ""), Mode::Dns),
        (
            "rules/two_conditions",
            config(
                "off",
                "random",
                "[[load_balancers.rules]]\nname = \"a\"\ncondition = 'http.request.method == \"POST\" and starts_with(http.request.uri.path, \"/api\")'\noverrides = { default_pools = [\"eu\"] }\n[[load_balancers.rules]]\nname = \"b\"\ncondition = 'ip.src in {10.0.0.0/8 172.16.0.0/12}'\noverrides = { ttl = 5 }\n",
            ),
            Mode::Proxy,
        ),
    ];
    let mut group = c.benchmark_group("decision");
    for (name, text, mode) in &cases {
        let w = world(text);
        let engine = Engine::new(&w.config, &w.regions, &w.key);
        let lb = &w.config.load_balancers[0];
        let pop = Pop {
            region: Region::Weu,
            datacenter: Some("fra"),
            country: None,
            coordinates: w.regions.region(Region::Weu).coordinates,
        };
        let mut ctx = RequestContext::new(*mode, pop, 1_800_000_000);
        ctx.client_ip = Some("198.51.100.7".parse().expect("ip"));
        if *mode == Mode::Proxy {
            ctx.http = Some(http);
        }
        let mut rng = SmallRng::seed_from_u64(1);
        group.bench_function(*name, |b| {
            b.iter(|| engine.decide(lb, &w.health, &ctx, &mut rng))
        });
    }
    // A request that follows an existing affinity cookie (HMAC verify + lookups).
    let w = world(&config("random", "random", "session_affinity = \"cookie\""));
    let engine = Engine::new(&w.config, &w.regions, &w.key);
    let lb = &w.config.load_balancers[0];
    let pop = Pop {
        region: Region::Weu,
        datacenter: None,
        country: None,
        coordinates: w.regions.region(Region::Weu).coordinates,
    };
    let mut ctx = RequestContext::new(Mode::Proxy, pop, 1_800_000_000);
    ctx.http = Some(http);
    let mut rng = SmallRng::seed_from_u64(1);
    let AffinityUpdate::SetCookie(cookie) = engine.decide(lb, &w.health, &ctx, &mut rng).affinity
    else {
        panic!("cookie affinity sets a cookie");
    };
    group.bench_function("affinity/cookie_hit", |b| {
        b.iter_batched(
            || {
                let mut c = ctx;
                c.affinity_cookie = Some(cookie.value.as_str());
                c
            },
            |c| engine.decide(lb, &w.health, &c, &mut rng),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
