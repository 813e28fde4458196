//! Session affinity: cookie, ip_cookie and header; tampering, expiry, replacement, draining;
//! zero-downtime retry targets.

use super::*;
use crate::config::{EndpointId, PoolId};
use crate::request::{HeaderBinding, HttpFields};
use crate::steering::{AffinityUpdate, Target};

fn affinity_world(kind: &str, attrs: &str) -> World {
    World::new(&format!(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "p"
monitor = "m"
origins = [
  {{ name = "e1", address = "192.0.2.1" }},
  {{ name = "e2", address = "192.0.2.2" }},
  {{ name = "e3", address = "192.0.2.3" }},
  {{ name = "e4", address = "192.0.2.4" }},
]
[[pools]]
name = "q"
monitor = "m"
origins = [{{ name = "q1", address = "192.0.2.9" }}]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p", "q"]
session_affinity = "{kind}"
session_affinity_attributes = {{ {attrs} }}
"#
    ))
}

/// One request carrying `cookie`; returns where it went and the cookie to keep.
fn request(w: &World, cookie: Option<&str>, now: u64, seed: u64) -> (String, Option<String>) {
    let http = HttpFields {
        method: "GET",
        host: "lb.test",
        path: "/",
        query: "",
        headers: &[],
        cookies: &[],
        tls: true,
    };
    let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
    ctx.http = Some(http);
    ctx.affinity_cookie = cookie;
    ctx.now = now;
    let mut rng = StdRng::seed_from_u64(seed);
    let d = w.decide("lb.test", &ctx, &mut rng);
    let set = match d.affinity {
        AffinityUpdate::SetCookie(c) => {
            assert!(c.header_value().contains("HttpOnly"));
            assert!(
                c.header_value().contains("Secure"),
                "Auto is Secure over TLS"
            );
            Some(c.value)
        }
        _ => None,
    };
    (w.label(&d.outcome, true), set)
}

const T0: u64 = 1_800_000_000;

#[test]
fn cookie_affinity_sticks_and_survives_an_unrelated_failure() {
    let mut w = affinity_world("cookie", "");
    let (first, cookie) = request(&w, None, T0, 1);
    let cookie = cookie.expect("a new session gets a cookie");
    for seed in 0..50 {
        let (again, set) = request(&w, Some(&cookie), T0 + seed, seed);
        assert_eq!(again, first);
        assert_eq!(
            set, None,
            "the cookie is not re-issued: its TTL never resets"
        );
    }
    let other = ["p/e1", "p/e2", "p/e3", "p/e4"]
        .into_iter()
        .find(|e| *e != first)
        .unwrap();
    w.set(other, Verdict::Unhealthy);
    assert_eq!(request(&w, Some(&cookie), T0 + 100, 5).0, first);
}

#[test]
fn tampered_or_expired_cookies_are_ignored() {
    let w = affinity_world("cookie", "");
    let (_, cookie) = request(&w, None, T0, 1);
    let cookie = cookie.unwrap();
    let mut forged = cookie.clone().into_bytes();
    let last = forged.len() - 3;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let (_, reissued) = request(&w, Some(&forged), T0 + 1, 2);
    assert!(
        reissued.is_some(),
        "a forged cookie is ignored and a new session starts"
    );
    // Default cookie TTL 82800 s; one second after expiry a new cookie is issued.
    assert!(request(&w, Some(&cookie), T0 + 82_799, 3).1.is_none());
    assert!(request(&w, Some(&cookie), T0 + 82_800, 3).1.is_some());
}

#[test]
fn unhealthy_bound_endpoint_is_replaced() {
    let mut w = affinity_world("cookie", "");
    let (first, cookie) = request(&w, None, T0, 1);
    w.set(&first, Verdict::Unhealthy);
    let (moved, reissued) = request(&w, cookie.as_deref(), T0 + 1, 1);
    assert_ne!(moved, first);
    assert!(reissued.is_some());
}

#[test]
fn draining_endpoint_keeps_sessions_for_drain_duration_only() {
    let mut w = affinity_world("cookie", "drain_duration = 300");
    let (first, cookie) = request(&w, None, T0, 1);
    // Disable the bound endpoint at T0 + 10 (what a config reload does).
    let (p, e) = w.ids(&first);
    w.config.pools[p].endpoints[e].enabled = false;
    w.health.endpoints[p][e].disabled_at = Some(T0 + 10);
    assert_eq!(
        request(&w, cookie.as_deref(), T0 + 309, 2).0,
        first,
        "within the drain"
    );
    assert_ne!(
        request(&w, cookie.as_deref(), T0 + 310, 2).0,
        first,
        "drain over"
    );
    // No new session ever lands on it.
    for seed in 0..200 {
        assert_ne!(request(&w, None, T0 + 20, seed).0, first);
    }
    // Without drain_duration, disabling ends sessions at once.
    let mut w = affinity_world("cookie", "");
    let (first, cookie) = request(&w, None, T0, 1);
    let (p, e) = w.ids(&first);
    w.config.pools[p].endpoints[e].enabled = false;
    w.health.endpoints[p][e].disabled_at = Some(T0 + 10);
    assert_ne!(request(&w, cookie.as_deref(), T0 + 11, 2).0, first);
}

#[test]
fn ip_cookie_is_stable_per_client_in_dns_and_proxy() {
    let w = World::new(
        r#"
[[pools]]
name = "p"
origins = [
  { name = "e1", address = "192.0.2.1" },
  { name = "e2", address = "192.0.2.2" },
  { name = "e3", address = "192.0.2.3" },
]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
session_affinity = "ip_cookie"
"#,
    );
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..60u8 {
        let mut ctx = w.ctx(Mode::Dns, Region::Weu);
        ctx.client_ip = Some(IpAddr::from([198, 51, 100, i]));
        let picks: std::collections::BTreeSet<String> = (0..10)
            .map(|seed| {
                let mut rng = StdRng::seed_from_u64(seed);
                w.label(&w.decide("lb.test", &ctx, &mut rng).outcome, true)
            })
            .collect();
        assert_eq!(
            picks.len(),
            1,
            "one answer per client whatever the RNG: {picks:?}"
        );
        seen.extend(picks);
    }
    assert_eq!(
        seen.len(),
        3,
        "clients spread over every endpoint, one each: {seen:?}"
    );
}

fn header_request(
    w: &World,
    headers: &[(String, String)],
    binding: Option<HeaderBinding>,
    now: u64,
) -> (String, AffinityUpdate) {
    let http = HttpFields {
        method: "GET",
        host: "lb.test",
        path: "/",
        query: "",
        headers,
        cookies: &[],
        tls: false,
    };
    let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
    ctx.http = Some(http);
    ctx.header_binding = binding;
    ctx.now = now;
    let mut rng = StdRng::seed_from_u64(now);
    let d = w.decide("lb.test", &ctx, &mut rng);
    (w.label(&d.outcome, true), d.affinity)
}

#[test]
fn header_affinity_binds_touches_and_expires() {
    let w = affinity_world("header", r#"headers = ["x-session"]"#);
    let headers = vec![("x-session".to_string(), "abc".to_string())];
    let (first, update) = header_request(&w, &headers, None, T0);
    let AffinityUpdate::BindHeaderSession { key, target, ttl } = update else {
        panic!("expected a new header session, got {update:?}");
    };
    assert_eq!(
        ttl, 1800,
        "the load balancer's TTL travels with the binding"
    );
    let binding = HeaderBinding {
        pool: target.pool,
        endpoint: target.endpoint,
        last_seen: T0 + 100,
    };
    // Within the default 1800 s of the last activity: same endpoint, TTL refreshed.
    let (again, update) = header_request(&w, &headers, Some(binding), T0 + 1899);
    assert_eq!(again, first);
    assert_eq!(
        update,
        AffinityUpdate::TouchHeaderSession { key, ttl: 1800 }
    );
    // Idle longer than the TTL: a new session.
    let (_, update) = header_request(&w, &headers, Some(binding), T0 + 1900);
    assert!(matches!(update, AffinityUpdate::BindHeaderSession { .. }));
    // Without the header there is no session at all.
    let (_, update) = header_request(&w, &[], None, T0);
    assert_eq!(update, AffinityUpdate::None);
}

#[test]
fn zero_downtime_failover_retry_targets() {
    let w = affinity_world("none", r#"zero_downtime_failover = "temporary""#);
    let mut rng = StdRng::seed_from_u64(3);
    let d = w.decide("lb.test", &w.ctx(Mode::Proxy, Region::Weu), &mut rng);
    let Outcome::Forward {
        target,
        retry: Some(retry),
    } = d.outcome
    else {
        panic!("expected a retry target: {:?}", d.outcome);
    };
    assert_eq!(retry.pool, target.pool);
    assert_ne!(retry.endpoint, target.endpoint);
    // A single-endpoint pool retries in the next pool only with failover_across_pools.
    let toml = |across: bool| {
        format!(
            r#"
[[pools]]
name = "a"
origins = [{{ name = "a1", address = "192.0.2.1" }}]
[[pools]]
name = "b"
origins = [{{ name = "b1", address = "192.0.2.2" }}]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["a", "b"]
session_affinity_attributes = {{ zero_downtime_failover = "temporary" }}
adaptive_routing = {{ failover_across_pools = {across} }}
"#
        )
    };
    let w = World::new(&toml(false));
    let d = w.decide("lb.test", &w.ctx(Mode::Proxy, Region::Weu), &mut rng);
    assert!(matches!(d.outcome, Outcome::Forward { retry: None, .. }));
    let w = World::new(&toml(true));
    let d = w.decide("lb.test", &w.ctx(Mode::Proxy, Region::Weu), &mut rng);
    assert_eq!(
        d.outcome,
        Outcome::Forward {
            target: Target {
                pool: PoolId(0),
                endpoint: EndpointId(0)
            },
            retry: Some(Target {
                pool: PoolId(1),
                endpoint: EndpointId(0)
            })
        }
    );
}

#[test]
fn session_shedding_moves_bound_sessions() {
    let mut w = affinity_world("cookie", "");
    w.config.pools[0].load_shedding.session_percent = 100.0;
    let (first, cookie) = request(&w, None, T0, 1);
    assert!(first.starts_with("p/"));
    let (moved, _) = request(&w, cookie.as_deref(), T0 + 1, 1);
    assert_eq!(
        moved, "q/q1",
        "a fully shed pool sends its sessions to the next pool"
    );
}

#[test]
fn sticky_failover_comes_with_the_rebinding_cookie() {
    let w = affinity_world("cookie", r#"zero_downtime_failover = "sticky""#);
    let mut rng = StdRng::seed_from_u64(3);
    let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
    let http = HttpFields {
        method: "GET",
        host: "lb.test",
        path: "/",
        query: "",
        headers: &[],
        cookies: &[],
        tls: true,
    };
    ctx.http = Some(http);
    let d = w.decide("lb.test", &ctx, &mut rng);
    let Outcome::Forward {
        retry: Some(retry), ..
    } = d.outcome
    else {
        panic!("{:?}", d.outcome)
    };
    let cookie = d
        .retry_cookie
        .expect("sticky: a cookie for the retry target");
    let claim =
        crate::affinity::decode_cookie(&w.key, "lb.test", &cookie.value).expect("valid cookie");
    assert_eq!(
        claim.endpoint,
        w.config.pool(retry.pool).endpoints[retry.endpoint.0].name
    );
}

#[test]
fn a_shed_session_with_nowhere_to_go_stays() {
    let mut w = affinity_world("cookie", "");
    w.config.pools[0].load_shedding.session_percent = 100.0;
    w.set("q/q1", Verdict::Unhealthy);
    let (first, cookie) = request(&w, None, T0, 1);
    let (again, _) = request(&w, cookie.as_deref(), T0 + 1, 1);
    assert_eq!(
        again, first,
        "q is critical: the session keeps its endpoint"
    );
}

/// Cloudflare (docs/design.md#custom-rules): "the session affinity TTL can be reset based on a request to a specific URL
/// path, so that the client has time to finish the transaction". A rule that sets the session
/// affinity for /checkout issues the cookie again, with its TTL, and the session then holds
/// for that TTL on every path.
#[test]
fn a_rule_that_sets_the_affinity_ttl_resets_the_session() {
    let w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "p"
monitor = "m"
origins = [{ name = "e1", address = "192.0.2.1" }, { name = "e2", address = "192.0.2.2" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
session_affinity = "cookie"
session_affinity_ttl = 1800
[[load_balancers.rules]]
name = "checkout"
condition = 'http.request.uri.path == "/checkout"'
overrides = { session_affinity_ttl = 7200 }
"#,
    );
    let on = |path: &'static str, cookie: Option<&str>, now: u64| {
        let http = HttpFields {
            method: "GET",
            host: "lb.test",
            path,
            query: "",
            headers: &[],
            cookies: &[],
            tls: false,
        };
        let mut ctx = w.ctx(Mode::Proxy, Region::Weu);
        ctx.http = Some(http);
        ctx.affinity_cookie = cookie;
        ctx.now = now;
        let d = w.decide("lb.test", &ctx, &mut StdRng::seed_from_u64(3));
        let set = match d.affinity {
            AffinityUpdate::SetCookie(c) => Some((c.value.clone(), c.header_value())),
            _ => None,
        };
        (w.label(&d.outcome, true), set)
    };
    let (first, set) = on("/", None, T0);
    let (cookie, header) = set.expect("a new session");
    assert!(header.contains("Max-Age=1800"), "{header}");
    // Elsewhere the cookie is followed and not re-issued.
    assert_eq!(on("/cart", Some(&cookie), T0 + 60), (first.clone(), None));
    // On /checkout: the same endpoint, the cookie issued again with the rule's TTL.
    let (again, set) = on("/checkout", Some(&cookie), T0 + 1000);
    assert_eq!(again, first);
    let (reset, header) = set.expect("the rule resets the session");
    assert!(header.contains("Max-Age=7200"), "{header}");
    // The old cookie ends at 1800 s; the reset one holds for 7200 s from the reset, on any path.
    assert_ne!(
        on("/", Some(&cookie), T0 + 1800).1,
        None,
        "expired: a new session"
    );
    assert_eq!(on("/", Some(&reset), T0 + 1000 + 7199), (first, None));
    assert!(on("/", Some(&reset), T0 + 1000 + 7200).1.is_some());
}

/// The fallback as the last resort ignores health, and so does a session bound to it: it is
/// followed while no other pool can take the request, and left once one can.
#[test]
fn a_session_on_the_fallback_is_followed_while_it_is_the_last_resort() {
    let mut w = World::new(
        r#"
[[monitors]]
name = "m"
[[pools]]
name = "p"
monitor = "m"
origins = [{ name = "p1", address = "192.0.2.1" }]
[[pools]]
name = "sorry"
monitor = "m"
origins = [{ name = "s1", address = "192.0.2.2" }, { name = "s2", address = "192.0.2.3" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
fallback_pool = "sorry"
session_affinity = "cookie"
"#,
    );
    for e in ["p/p1", "sorry/s1", "sorry/s2"] {
        w.set(e, Verdict::Unhealthy);
    }
    let (first, cookie) = request(&w, None, T0, 1);
    assert!(first.starts_with("sorry/"), "{first}");
    let cookie = cookie.expect("a session on the fallback");
    for seed in 0..20 {
        assert_eq!(
            request(&w, Some(&cookie), T0 + 1, seed),
            (first.clone(), None)
        );
    }
    // The default pool is back: the session leaves the fallback.
    w.set("p/p1", Verdict::Healthy);
    let (moved, reissued) = request(&w, Some(&cookie), T0 + 2, 1);
    assert_eq!(moved, "p/p1");
    assert!(reissued.is_some());
}
