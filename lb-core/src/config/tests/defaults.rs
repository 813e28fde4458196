//! Defaults: Cloudflare's for monitors, pools and load balancers, each monitor type's port,
//! endpoints as an alias of origins with their Host header, and geo steering once a geo map is
//! given.

use super::*;

#[test]
fn cloudflare_defaults() {
    let c = parse(MINIMAL).expect("valid");
    let m = &c.monitors[0];
    let MonitorKind::Http(http) = &m.kind else {
        panic!("default type is http")
    };
    assert_eq!(http.method, HttpMethod::Get);
    assert_eq!(http.path, "/");
    assert_eq!(http.port, 0);
    assert!(http.expected_codes.matches(200) && !http.expected_codes.matches(204));
    assert!(!http.follow_redirects && !http.allow_insecure && http.expected_body.is_none());
    assert_eq!(
        (m.interval.as_secs(), m.timeout.as_secs(), m.retries),
        (60, 5, 2)
    );
    assert_eq!((m.consecutive_up, m.consecutive_down), (1, 1), "0 means 1");
    let p = &c.pools[0];
    assert!(p.enabled);
    assert_eq!(p.minimum_origins, 1);
    assert_eq!(p.check_regions.len(), 13);
    assert_eq!(p.endpoints[0].weight, 1.0);
    assert_eq!(p.endpoints[0].priority, 1);
    assert_eq!(p.origin_steering.policy, OriginPolicy::Random);
    let lb = c
        .load_balancer("www.example.test")
        .expect("names are case-insensitive");
    assert_eq!(lb.name, "www.example.test");
    assert!(!lb.proxied);
    let s = &lb.settings;
    assert_eq!(s.ttl, 30);
    assert_eq!(
        s.steering_policy,
        SteeringPolicy::Off,
        "empty policy without geo maps is off"
    );
    assert_eq!(s.session_affinity.kind, AffinityKind::None);
    assert_eq!(s.session_affinity.ttl, 82_800);
    assert_eq!(
        s.location_strategy,
        LocationStrategy {
            prefer_ecs: PreferEcs::Proximity,
            mode: LocationMode::Pop
        }
    );
    assert_eq!(s.random_steering.default_weight, 1.0);
}

#[test]
fn monitor_types_and_their_default_ports() {
    let text = r#"
[[monitors]]
name = "tcp"
type = "tcp"
[[monitors]]
name = "smtp"
type = "smtp"
[[monitors]]
name = "ldap"
type = "ldap"
[[monitors]]
name = "ping"
type = "icmp_ping"
[[monitors]]
name = "udp"
type = "udp_icmp"
port = 53
[[monitors]]
name = "https"
type = "https"
method = "HEAD"
expected_codes = "2xx,304"
"#;
    let c = parse(text).expect("valid");
    let kinds: Vec<_> = c.monitors.iter().map(|m| m.kind.clone()).collect();
    assert_eq!(kinds[0], MonitorKind::Tcp { port: 0 });
    assert_eq!(kinds[0].resolve_port(0), 80, "tcp defaults to 80");
    assert_eq!(
        kinds[0].resolve_port(8080),
        8080,
        "the endpoint's port when the monitor names none"
    );
    assert_eq!(kinds[1].resolve_port(0), 25);
    let MonitorKind::Ldap(l) = &kinds[2] else {
        panic!()
    };
    assert_eq!(
        (kinds[2].resolve_port(0), l.tls, l.bind.is_none()),
        (389, false, true)
    );
    assert_eq!(kinds[3], MonitorKind::IcmpPing);
    assert_eq!(kinds[4].resolve_port(9999), 53, "the monitor's port wins");
    let MonitorKind::Https(h) = &kinds[5] else {
        panic!()
    };
    assert_eq!(h.method, HttpMethod::Head);
    assert!(h.expected_codes.matches(304));
}

#[test]
fn endpoints_alias_and_host_header() {
    let c = parse(r#"
[[pools]]
name = "p"
endpoints = [{ name = "e", address = "Origin.Example.Test", port = 8443, header = { Host = ["app.example.test"] } }]
"#).expect("valid");
    let e = &c.pools[0].endpoints[0];
    assert_eq!(e.address, Address::Hostname("origin.example.test".into()));
    assert_eq!(e.port, 8443);
    assert_eq!(e.host_header.as_deref(), Some("app.example.test"));
}

#[test]
fn steering_policy_defaults_to_geo_with_geo_maps() {
    let c = parse(
        r#"
[[pools]]
name = "p"
origins = [{ name = "e", address = "192.0.2.1" }]
[[load_balancers]]
name = "lb.test"
default_pools = ["p"]
country_pools = { de = ["p"] }
"#,
    )
    .expect("valid");
    assert_eq!(
        c.load_balancers[0].settings.steering_policy,
        SteeringPolicy::Geo
    );
}
