//! Endpoint steering: DNS answer sets, weights, hash stability, LORS, Azure's latency rule.

use proptest::prelude::*;

use super::*;

fn pool_of(policy: &str, endpoints: &[(&str, f64)], proxied: bool) -> World {
    let origins: Vec<String> = endpoints
        .iter()
        .enumerate()
        .map(|(i, (n, w))| {
            format!(
                "{{ name = \"{n}\", address = \"192.0.2.{}\", weight = {w} }}",
                i + 1
            )
        })
        .collect();
    World::new(&format!(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "p"
monitor = "m"
origin_steering = {{ policy = "{policy}" }}
origins = [{}]
[[load_balancers]]
name = "lb.test"
proxied = {proxied}
default_pools = ["p"]
"#,
        origins.join(", ")
    ))
}

#[test]
fn dns_answers_all_equal_weight_endpoints() {
    let mut w = pool_of("random", &[("e1", 0.5), ("e2", 0.5), ("e3", 0.5)], false);
    let ctx = w.ctx(Mode::Dns, Region::Weu);
    assert_eq!(w.one("lb.test", &ctx), "p/e1+e2+e3");
    w.set("p/e2", Verdict::Unhealthy);
    assert_eq!(
        w.one("lb.test", &ctx),
        "p/e1+e3",
        "only healthy endpoints are answered"
    );
}

#[test]
fn dns_answers_one_endpoint_by_weight_when_weights_differ() {
    let w = pool_of("random", &[("e1", 0.2), ("e2", 0.8)], false);
    let shares = w.shares("lb.test", &w.ctx(Mode::Dns, Region::Weu), 40_000, true);
    near(&shares, "p/e1", 0.2, 0.01);
    near(&shares, "p/e2", 0.8, 0.01);
}

#[test]
fn weight_zero_takes_no_new_traffic() {
    let w = pool_of("random", &[("e1", 0.0), ("e2", 1.0)], true);
    let shares = w.shares("lb.test", &w.ctx(Mode::Proxy, Region::Weu), 2_000, true);
    assert_eq!(shares.get("p/e2"), Some(&1.0));
}

#[test]
fn endpoint_lors_uses_open_requests_in_proxy_mode() {
    let mut w = pool_of(
        "least_outstanding_requests",
        &[("e1", 0.4), ("e2", 0.6)],
        true,
    );
    w.health.endpoints[0][0].outstanding = 3;
    let shares = w.shares("lb.test", &w.ctx(Mode::Proxy, Region::Weu), 60_000, true);
    near(&shares, "p/e1", 0.1429, 0.01);
    let mut w = pool_of("least_connections", &[("e1", 1.0), ("e2", 1.0)], true);
    w.health.endpoints[0][1].connections = 9;
    let shares = w.shares("lb.test", &w.ctx(Mode::Proxy, Region::Weu), 60_000, true);
    near(&shares, "p/e1", 10.0 / 11.0, 0.01);
}

#[test]
fn azure_front_door_example() {
    // Six endpoints A..F: C unhealthy, E disabled -> A, B, D, F available; A, B, D have
    // priority 1 and F priority 2 -> A, B, D; latencies 15/30/60 ms with 30 ms sensitivity
    // -> A and B; weights 3:7 -> 30 % / 70 %.
    let mut w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "p"
monitor = "m"
origin_steering = { policy = "latency", latency_sensitivity_ms = 30 }
origins = [
  { name = "A", address = "192.0.2.1", weight = 0.3, priority = 1 },
  { name = "B", address = "192.0.2.2", weight = 0.7, priority = 1 },
  { name = "C", address = "192.0.2.3", weight = 1.0, priority = 1 },
  { name = "D", address = "192.0.2.4", weight = 1.0, priority = 1 },
  { name = "E", address = "192.0.2.5", weight = 1.0, priority = 1, enabled = false },
  { name = "F", address = "192.0.2.6", weight = 1.0, priority = 2 },
]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
"#,
    );
    w.set("p/C", Verdict::Unhealthy);
    for (name, rtt) in [
        ("A", 15.0),
        ("B", 30.0),
        ("C", 1.0),
        ("D", 60.0),
        ("E", 1.0),
        ("F", 1.0),
    ] {
        let (p, e) = w.ids(&format!("p/{name}"));
        w.health.endpoints[p][e].rtt_ms.set(Region::Weu, Some(rtt));
    }
    let ctx = w.ctx(Mode::Proxy, Region::Weu);
    let shares = w.shares("lb.test", &ctx, 50_000, true);
    assert_eq!(
        shares.keys().cloned().collect::<Vec<_>>(),
        vec!["p/A", "p/B"]
    );
    near(&shares, "p/A", 0.3, 0.01);
    near(&shares, "p/B", 0.7, 0.01);
    // A and B down: D is the only priority-1 endpoint left, F (priority 2) still waits.
    w.set("p/A", Verdict::Unhealthy);
    w.set("p/B", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "p/D");
    w.set("p/D", Verdict::Unhealthy);
    assert_eq!(w.one("lb.test", &ctx), "p/F");
}

fn hash_world(n: usize) -> World {
    let names: Vec<String> = (0..n).map(|i| format!("e{i}")).collect();
    let eps: Vec<(&str, f64)> = names.iter().map(|n| (n.as_str(), 1.0)).collect();
    pool_of("hash", &eps, true)
}

fn hash_pick(w: &World, client: IpAddr, seed: u64) -> String {
    let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
    ctx.client_ip = Some(client);
    ctx.explain = false;
    let mut rng = StdRng::seed_from_u64(seed);
    w.label(&w.decide("lb.test", &ctx, &mut rng).outcome, true)
}

#[test]
fn hash_spreads_clients_by_weight() {
    let mut w = pool_of("hash", &[("e1", 0.25), ("e2", 0.75)], true);
    let mut on_e1 = 0;
    for i in 0..4000u32 {
        if hash_pick(
            &w,
            IpAddr::from(i.wrapping_mul(2_654_435_761).to_be_bytes()),
            1,
        ) == "p/e1"
        {
            on_e1 += 1;
        }
    }
    assert!((800..1200).contains(&on_e1), "about 25 % on e1: {on_e1}");
    w.set("p/e1", Verdict::Unhealthy);
    assert_eq!(hash_pick(&w, ip("198.51.100.1"), 1), "p/e2");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same client lands on the same endpoint whatever the RNG, and removing one
    /// endpoint moves only the clients that were on it.
    #[test]
    fn hash_is_consistent_under_endpoint_removal(
        clients in proptest::collection::vec(any::<u32>(), 1..60),
        n in 2usize..8,
        removed in 0usize..8,
    ) {
        let removed = removed % n;
        let mut w = hash_world(n);
        let before: Vec<String> = clients.iter().map(|&c| hash_pick(&w, IpAddr::from(c.to_be_bytes()), 1)).collect();
        for (i, &c) in clients.iter().enumerate() {
            prop_assert_eq!(&before[i], &hash_pick(&w, IpAddr::from(c.to_be_bytes()), 99));
        }
        w.set(&format!("p/e{removed}"), Verdict::Unhealthy);
        let gone = format!("p/e{removed}");
        for (i, &c) in clients.iter().enumerate() {
            let after = hash_pick(&w, IpAddr::from(c.to_be_bytes()), 1);
            prop_assert_ne!(&after, &gone);
            if before[i] != gone {
                prop_assert_eq!(&before[i], &after);
            }
        }
    }

    /// Random endpoint shares converge to weight / sum of weights.
    #[test]
    fn random_shares_follow_weights(weights in proptest::collection::vec(1u32..=100, 2..5)) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("e{i}")).collect();
        let eps: Vec<(&str, f64)> = names.iter().zip(&weights).map(|(n, &w)| (n.as_str(), f64::from(w) / 100.0)).collect();
        let w = pool_of("random", &eps, true);
        let shares = w.shares("lb.test", &w.ctx(Mode::Proxy, Region::Weu), 20_000, true);
        let total: f64 = eps.iter().map(|e| e.1).sum();
        for (n, wt) in &eps {
            let got = shares.get(&format!("p/{n}")).copied().unwrap_or(0.0);
            prop_assert!((got - wt / total).abs() < 0.02, "{}: {} vs {}", n, got, wt / total);
        }
    }
}

#[test]
fn dns_answers_follow_the_query_type() {
    let w = World::new(
        r#"
[[pools]]
name = "p"
origins = [
  { name = "v4a", address = "192.0.2.1" },
  { name = "v4b", address = "192.0.2.2" },
  { name = "v6", address = "2001:db8::1" },
]
[[pools]]
name = "c"
origins = [{ name = "cdn", address = "cdn.example.net" }, { name = "v4", address = "192.0.2.9" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
[[load_balancers]]
name = "cname.test"
default_pools = ["c"]
"#,
    );
    let ask = |lb: &str, qtype: &'static str| {
        let mut ctx = w.ctx(Mode::Dns, Region::Weu);
        ctx.dns = Some(crate::request::DnsQuestion { qname: "x", qtype });
        w.one(lb, &ctx)
    };
    assert_eq!(ask("lb.test", "A"), "p/v4a+v4b");
    assert_eq!(ask("lb.test", "AAAA"), "p/v6");
    assert_eq!(ask("lb.test", "TXT"), "p/v4a+v4b+v6");
    // A CNAME is always alone in an answer.
    let shares = {
        let mut ctx = w.ctx(Mode::Dns, Region::Weu);
        ctx.dns = Some(crate::request::DnsQuestion {
            qname: "x",
            qtype: "A",
        });
        w.shares("cname.test", &ctx, 2000, true)
    };
    assert_eq!(shares.len(), 2, "{shares:?}");
    near(&shares, "c/cdn", 0.5, 0.05);
    // AAAA with no IPv6 endpoint: the pool is still chosen, the answer is empty (NODATA).
    let w2 = World::new(
        r#"
[[pools]]
name = "p"
origins = [{ name = "v4", address = "192.0.2.1" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
"#,
    );
    let mut ctx = w2.ctx(Mode::Dns, Region::Weu);
    ctx.dns = Some(crate::request::DnsQuestion {
        qname: "x",
        qtype: "AAAA",
    });
    assert_eq!(w2.one("lb.test", &ctx), "p/");
}
