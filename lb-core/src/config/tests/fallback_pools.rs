//! A pool only ever named as a fallback is marked so, whichever load balancer names it, and
//! shows no health.

use super::*;

#[test]
fn a_pool_only_ever_a_fallback_is_marked_so_whoever_names_it() {
    let c = parse(
        r#"
[[pools]]
name = "web"
origins = [{ name = "a", address = "192.0.2.1" }]
[[pools]]
name = "sorry"
origins = [{ name = "s", address = "192.0.2.2" }]
[[pools]]
name = "both"
origins = [{ name = "b", address = "192.0.2.3" }]
[[pools]]
name = "ruled"
origins = [{ name = "r", address = "192.0.2.4" }]
[[load_balancers]]
name = "one.test"
default_pools = ["web"]
fallback_pool = "sorry"
[[load_balancers]]
name = "two.test"
default_pools = ["both"]
fallback_pool = "both"
[[load_balancers]]
name = "three.test"
default_pools = ["web"]
fallback_pool = "ruled"
[[load_balancers.rules]]
name = "to ruled"
condition = "http.request.uri.path == \"/r\""
overrides = { default_pools = ["ruled"] }
"#,
    )
    .expect("valid");
    let only = |name: &str| c.fallback_only(c.pool_by_name(name).expect("pool"));
    assert!(only("sorry"));
    assert!(!only("web"), "a default pool");
    assert!(!only("both"), "also a default pool");
    assert!(!only("ruled"), "a rule routes to it");
    let snapshot = crate::health::HealthSnapshot::initial(&c);
    let sorry = c.pool_by_name("sorry").expect("pool");
    assert_eq!(
        snapshot.shown_pool_state(&c, sorry, crate::Region::Weu),
        crate::health::PoolState::NoHealth
    );
}
