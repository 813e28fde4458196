//! Custom rules: fixed responses, overrides, priority and termination.

use super::*;
use crate::request::HttpFields;

/// Three pools, two overriding rules and (priority 10) a blocking fixed response.
fn rules_world() -> World {
    World::new(&format!(
        "{}{}",
        rules_world_toml(),
        r#"
[[load_balancers.rules]]
name = "blocked"
condition = "ip.src in 10.0.0.0/8"
priority = 10
fixed_response = { status_code = 403, message_body = "no" }
"#
    ))
}

fn go(
    w: &World,
    method: &str,
    path: &str,
    region: Region,
    client: &str,
) -> (String, u32, Vec<String>) {
    let http = HttpFields {
        method,
        host: "lb.test",
        path,
        query: "",
        headers: &[],
        cookies: &[],
        tls: false,
    };
    let mut ctx = w.ctx(Mode::Proxy, region);
    ctx.http = Some(http);
    ctx.client_ip = Some(ip(client));
    let mut rng = StdRng::seed_from_u64(1);
    let d = w.decide("lb.test", &ctx, &mut rng);
    (w.label(&d.outcome, false), d.ttl, d.matched_rules)
}

#[test]
fn rules_override_in_priority_order() {
    let w = rules_world();
    assert_eq!(go(&w, "GET", "/", Region::Enam, "192.0.2.77").0, "web");
    assert_eq!(
        go(&w, "POST", "/api/v1", Region::Enam, "192.0.2.77").0,
        "api"
    );
    assert_eq!(
        go(&w, "GET", "/api/v1", Region::Enam, "192.0.2.77").0,
        "web"
    );
    // Both match: the later (higher priority number) rule's overrides win for the same field.
    let (pool, ttl, matched) = go(&w, "POST", "/api", Region::Weu, "192.0.2.77");
    assert_eq!((pool.as_str(), ttl), ("eu", 5));
    assert_eq!(matched, vec!["api-posts", "europe"]);
}

#[test]
fn fixed_response_terminates() {
    let w = rules_world();
    let (outcome, _, matched) = go(&w, "POST", "/api", Region::Weu, "10.1.2.3");
    assert_eq!(outcome, "fixed 403");
    assert_eq!(matched, vec!["blocked"]);
}

#[test]
fn terminating_rule_stops_later_rules() {
    let toml = rules_world_toml().replace("priority = 20\n", "priority = 20\nterminates = true\n");
    let w = World::new(&toml);
    let (pool, ttl, matched) = go(&w, "POST", "/api", Region::Weu, "192.0.2.77");
    assert_eq!((pool.as_str(), ttl), ("api", 30));
    assert_eq!(matched, vec!["api-posts"]);
}

fn rules_world_toml() -> String {
    // rules_world() without the blocking rule, as text for variations.
    r#"
[[pools]]
name = "web"
origins = [{ name = "w1", address = "192.0.2.1" }]
[[pools]]
name = "api"
origins = [{ name = "a1", address = "192.0.2.2" }]
[[pools]]
name = "eu"
origins = [{ name = "e1", address = "192.0.2.3" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["web"]
[[load_balancers.rules]]
name = "api-posts"
condition = 'http.request.method == "POST" and starts_with(http.request.uri.path, "/api")'
priority = 20
overrides = { default_pools = ["api"] }
[[load_balancers.rules]]
name = "europe"
condition = 'pop.region == "WEU"'
priority = 30
overrides = { default_pools = ["eu"], ttl = 5 }
"#
    .to_string()
}
