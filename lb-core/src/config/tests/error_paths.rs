//! Errors: every one at once, each with its field path and reason; syntax errors with their
//! line and column and type errors with their field; and settings that would silently do
//! nothing refused.

use super::*;

#[test]
fn every_error_at_once_with_paths() {
    let text = r#"
[[monitors]]
name = "m"
interval = 0
timeout = 9
retries = 7
expected_codes = "2x"
consecutive_donw = 3

[[monitors]]
name = "m"
type = "tcp"
expected_body = "ok"

[[monitors]]
name = "q"
type = "gopher"

[[pools]]
name = "a"
monitor = "nope"
check_regions = ["WEU", "MARS"]
latitude = 10.0
origins = [
  { name = "x", address = "192.0.2.1", weight = 1.5, priority = 9 },
  { name = "x", address = "not an address!" },
]

[[pools]]
name = "a"
minimum_origins = 3
origins = [{ name = "y", address = "192.0.2.2", header = { X-Other = ["v"] } }]

[[load_balancers]]
name = "lb.example"
default_pools = ["a", "missing"]
fallback_pool = "ghost"
steering_policy = "fastest"
session_affinity = "cookie"
session_affinity_ttl = 10
region_pools = { MARS = ["a"] }
country_pools = { XX = ["a"] }
pop_pools = { zzz = ["a"] }
ttl = 0
random_steering = { pool_weights = { a = 2.0 } }

[[load_balancers.rules]]
name = "r"
condition = 'http.request.method == "POST" and'
"#;
    let e = errors(text);
    for needle in [
        "monitors[0].consecutive_donw: unknown field",
        "monitors[0].interval: must be 1..=3600 seconds (got 0)",
        "monitors[0].retries: must be 0..=5 (got 7)",
        "monitors[0].expected_codes: `2x` is not a status code",
        "monitors[1].name: duplicate monitor name `m`",
        "monitors[1].expected_body: only applies to http and https monitors",
        "monitors[2].type: unknown monitor type `gopher`",
        "pools[1].name: duplicate pool name `a`",
        "pools[0].monitor: no monitor is named `nope`",
        "pools[0].check_regions[1]: unknown region `MARS`",
        "pools[0].latitude: latitude and longitude must be given together",
        "pools[0].origins[0].weight: must be between 0 and 1 (got 1.5)",
        "pools[0].origins[0].priority: must be 1..=5 (got 9)",
        "pools[0].origins[1].name: duplicate endpoint name `x`",
        "pools[0].origins[1].address: `not an address!` is neither an IP address nor a hostname",
        "pools[1].minimum_origins: must be 1..=1",
        "pools[1].origins[0].header.X-Other: endpoints override only the Host header",
        "load_balancers[0].default_pools[1]: no pool is named `missing`",
        "load_balancers[0].fallback_pool: no pool is named `ghost`",
        "load_balancers[0].steering_policy: unknown steering policy `fastest`",
        "load_balancers[0].session_affinity: `cookie` affinity needs a proxied load balancer",
        "load_balancers[0].session_affinity_ttl: must be 1800..=604800 seconds for cookie affinity (got 10)",
        "load_balancers[0].region_pools.MARS: unknown region `MARS`",
        "load_balancers[0].country_pools.XX: `XX` is not a country of the regions table",
        "load_balancers[0].pop_pools.zzz: `zzz` is not a datacenter (PoP) of the regions table",
        "load_balancers[0].ttl: must be 1..=86400 seconds (got 0)",
        "load_balancers[0].random_steering.pool_weights.a: must be between 0 and 1 (got 2)",
        "load_balancers[0].rules[0].condition: column 34:",
    ] {
        has(&e, needle);
    }
}

#[test]
fn syntax_errors_name_line_and_column_type_errors_their_field() {
    let e =
        parse("[[pools]]\nname = \"p\"\norigins = [{ name = \"e\", address = 5 }]\n").unwrap_err();
    assert_eq!(e.0.len(), 1);
    assert_eq!(e.0[0].path, "pools[0].origins[0].address", "{:?}", e.0[0]);
    assert!(e.0[0].reason.contains("(line 3, column"), "{:?}", e.0[0]);
    let e = parse("[[pools]\nname = 1\n").unwrap_err();
    assert!(e.0[0].path.starts_with("line 1, column"), "{:?}", e.0[0]);
}

#[test]
fn settings_that_would_silently_do_nothing_are_rejected() {
    let base = |extra: &str| {
        format!(
            r#"
[[pools]]
name = "p"
origins = [{{ name = "e", address = "192.0.2.1" }}]
[[pools]]
name = "q"
latitude = 1.0
longitude = 1.0
origins = [{{ name = "f", address = "192.0.2.2", weight = 0.0 }}]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
{extra}
"#
        )
    };
    let e = errors(&base("steering_policy = \"proximity\"\nrandom_steering = { pool_weights = { q = 0.5 } }\nsession_affinity_attributes = { zero_downtime_failover = \"sticky\", headers = [\"x\"], drain_duration = 5 }\n[[load_balancers.rules]]\nname = \"r\"\ncondition = \"ssl\"\noverrides = { default_pools = [] }"));
    has(
        &e,
        "proximity steering needs coordinates on every pool: pool `p` has no latitude/longitude",
    );
    has(
        &e,
        "random_steering.pool_weights.q: pool `q` is not one of this load balancer's pools",
    );
    has(&e, "pools[1].origins: every endpoint has weight 0");
    has(
        &e,
        "sticky failover rewrites the affinity cookie, which needs cookie or ip_cookie affinity",
    );
    has(&e, "headers only apply to header affinity");
    has(
        &e,
        "draining keeps existing sessions, so it needs session affinity",
    );
    has(
        &e,
        "rules[0].overrides.default_pools: needs at least one pool",
    );
    let long = "x".repeat(300);
    let e = errors(&base("").replace("name = \"p\"\n", &format!("name = \"{long}\"\n")));
    has(&e, "pools[0].name: must be at most 255 bytes");
    // Cookie names keep their case; header names do not matter.
    let c = parse(&base("session_affinity = \"header\"\nsession_affinity_attributes = { headers = [\"X-User\", \"cookie:SessionID\"] }").replace("weight = 0.0", "weight = 1.0")).expect("valid");
    assert_eq!(
        c.load_balancers[0].settings.session_affinity.headers,
        vec!["x-user", "cookie:SessionID"]
    );
}
