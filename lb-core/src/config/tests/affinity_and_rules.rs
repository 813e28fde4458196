//! Session affinity (cookie, header, ip_cookie) and its limits, and custom rules: sorted by
//! priority with disabled ones dropped, their overrides merged onto the load balancer's
//! affinity.

use super::*;

#[test]
fn affinity_rules() {
    let base = |extra: &str| {
        format!(
            r#"
[[pools]]
name = "p"
origins = [{{ name = "e", address = "192.0.2.1" }}]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
{extra}
"#
        )
    };
    // Header affinity: TTL 30..=3600, default 1800; needs 1..=5 headers; no sticky failover.
    let c = parse(&base("proxied = true\nsession_affinity = \"header\"\nsession_affinity_attributes = { headers = [\"X-User\", \"cookie:sid\"] }")).expect("valid");
    let a = &c.load_balancers[0].settings.session_affinity;
    assert_eq!((a.kind, a.ttl), (AffinityKind::Header, 1800));
    assert_eq!(a.headers, vec!["x-user", "cookie:sid"]);
    let e = errors(&base("proxied = true\nsession_affinity = \"header\"\nsession_affinity_ttl = 7200\nsession_affinity_attributes = { zero_downtime_failover = \"sticky\" }"));
    has(
        &e,
        "session_affinity_ttl: must be 30..=3600 seconds for header affinity (got 7200)",
    );
    has(
        &e,
        "headers: header affinity needs 1 to 5 header names (got 0)",
    );
    has(
        &e,
        "zero_downtime_failover: sticky failover rewrites the affinity cookie",
    );
    // SameSite=None must be Secure.
    let e = errors(&base("proxied = true\nsession_affinity = \"cookie\"\nsession_affinity_attributes = { samesite = \"None\", secure = \"Never\" }"));
    has(&e, "SameSite=None cookies must be Secure");
    // DNS-only: ip_cookie is fine, fixed responses are not.
    parse(&base("session_affinity = \"ip_cookie\"")).expect("ip_cookie on DNS-only is valid");
    let e = errors(&base("[[load_balancers.rules]]\nname = \"x\"\ncondition = \"ssl\"\nfixed_response = { status_code = 503 }"));
    has(&e, "fixed responses need a proxied load balancer");
}

#[test]
fn rules_are_sorted_by_priority_and_disabled_ones_dropped() {
    let c = parse(r#"
[[pools]]
name = "p"
origins = [{ name = "e", address = "192.0.2.1" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
rules = [
  { name = "late", condition = "ssl", priority = 9 },
  { name = "off", condition = "ssl", priority = 1, disabled = true },
  { name = "early", condition = "not ssl", priority = 2, fixed_response = { status_code = 301, location = "https://lb.test/" } },
]
"#).expect("valid");
    let names: Vec<&str> = c.load_balancers[0]
        .rules
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, vec!["early", "late"]);
    assert!(
        c.load_balancers[0].rules[0].terminates,
        "a fixed response always terminates"
    );
}

#[test]
fn rule_overrides_merge_onto_the_load_balancers_affinity() {
    let c = parse(
        r#"
[[pools]]
name = "p"
origins = [{ name = "e", address = "192.0.2.1" }]
[[load_balancers]]
name = "lb.test"
proxied = true
default_pools = ["p"]
session_affinity = "cookie"
session_affinity_attributes = { drain_duration = 60, zero_downtime_failover = "sticky" }
[[load_balancers.rules]]
name = "checkout"
condition = 'starts_with(http.request.uri.path, "/checkout")'
overrides = { session_affinity_ttl = 7200 }
"#,
    )
    .expect("valid");
    let lb = &c.load_balancers[0];
    let RuleAction::Overrides(o) = &lb.rules[0].action else {
        panic!()
    };
    let a = o.session_affinity.as_ref().expect("affinity override");
    assert_eq!(
        (a.kind, a.ttl, a.drain_duration),
        (AffinityKind::Cookie, 7200, 60),
        "only the TTL changes"
    );
    assert_eq!(a.zero_downtime_failover, ZeroDowntimeFailover::Sticky);
}
