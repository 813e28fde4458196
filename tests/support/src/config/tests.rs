//! The builders' text is what the real parser (`lb_core::config::Config::parse`) accepts, with
//! the values the builders were given.

use std::net::SocketAddr;

use super::*;

fn parse(text: &str) -> lb_core::config::Config {
    let regions = lb_core::RegionsTable::embedded().expect("the embedded regions");
    lb_core::config::Config::parse("built.toml", text, &regions)
        .unwrap_or_else(|e| panic!("the built config does not parse: {e:?}\n{text}"))
}

/// Every builder and most of their fields, in one file.
fn everything() -> Config {
    let addr: SocketAddr = "127.0.0.1:8001".parse().expect("addr");
    Config::new()
        .monitor(
            Monitor::http("http")
                .interval(1)
                .timeout(1)
                .retries(0)
                .consecutive(2, 3)
                .path("/healthz")
                .port(8001)
                .expected_codes("2xx"),
        )
        .monitor(Monitor::tcp("tcp").timeout(1))
        .monitor(Monitor::http("side").path("/side"))
        .monitor_group(
            MonitorGroup::new("g")
                .must_be_healthy("http")
                .member("tcp")
                .monitoring_only("side"),
        )
        .pool(
            Pool::new("eu")
                .monitor("http")
                .regions(&["WEU"])
                .at(50.1, 8.7)
                .origin("a", addr)
                .endpoint(Endpoint::new("b", ("127.0.0.2", 8002)).weight(0.25))
                .endpoint(Endpoint::new("c", "127.0.0.3").host("override.example"))
                .steering("hash"),
        )
        .pool(
            Pool::new("grouped")
                .monitor_group("g")
                .origin("d", "192.0.2.1"),
        )
        .pool(Pool::new("off").enabled(false).origin("e", "192.0.2.2"))
        .load_balancer(
            Lb::new("www.example.test")
                .pools(&["eu", "grouped"])
                .fallback("off")
                .ttl(6)
                .region_pools(&[("WEU", &["eu"]), ("ENAM", &["grouped"])])
                .prefer_ecs("always"),
        )
        .load_balancer(
            Lb::new("app.example.test")
                .proxied()
                .pools(&["eu"])
                .affinity("cookie")
                .affinity_ttl(1800)
                .drain_duration(10)
                .zero_downtime_failover("temporary")
                .failover_across_pools()
                .rule(
                    Rule::new("checkout", r#"http.request.uri.path == "/checkout""#)
                        .overrides("session_affinity_ttl = 7200"),
                ),
        )
        .load_balancer(
            Lb::new("tcp.example.test")
                .protocol("tcp")
                .listen(&[7000])
                .origin_port(8001)
                .proxy_protocol("v1")
                .pools(&["eu"]),
        )
        .load_balancer(
            Lb::new("dyn.example.test")
                .pools(&["eu"])
                .steering("dynamic_latency"),
        )
        .zone(
            Zone::new("example.test")
                .nameservers(&["ns1.example.test"])
                .negative_ttl(30),
        )
        .network_in_region("10.2.0.0/16", "ENAM")
        .network_in_country("10.1.0.0/16", "DE")
}

#[test]
fn what_the_builders_render_the_parser_accepts() {
    let c = parse(&everything().render());
    assert_eq!(c.monitors.len(), 3);
    assert_eq!(c.monitors[0].consecutive_down, 2);
    assert_eq!(c.monitors[0].consecutive_up, 3);
    assert_eq!(c.monitors[0].retries, 0);
    assert_eq!(c.monitor_groups.len(), 1);
    let names: Vec<&str> = c.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["eu", "grouped", "off"]);
    let eu = &c.pools[0];
    assert_eq!(eu.check_regions.len(), 1);
    assert_eq!(eu.endpoints.len(), 3);
    assert_eq!(eu.endpoints[0].port, 8001);
    assert_eq!(eu.endpoints[1].port, 8002);
    assert_eq!(eu.endpoints[1].weight, 0.25);
    assert_eq!(
        eu.endpoints[2].host_header.as_deref(),
        Some("override.example")
    );
    assert!(!c.pools[2].enabled);
    let lbs: Vec<&str> = c.load_balancers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        lbs,
        [
            "www.example.test",
            "app.example.test",
            "tcp.example.test",
            "dyn.example.test"
        ]
    );
    assert!(c.load_balancers[1].proxied);
    assert_eq!(c.load_balancers[1].rules.len(), 1);
    assert!(c.load_balancers[2].layer4.is_some());
    assert_eq!(c.zones.len(), 1);
}

#[test]
fn a_field_set_twice_keeps_its_place_and_takes_the_last_value() {
    let text = Config::new()
        .pool(Pool::new("p").monitor("a").regions(&["WEU"]).monitor("b"))
        .render();
    let monitor = text.find("monitor = \"b\"").expect("the last value");
    assert!(monitor < text.find("check_regions").expect("regions"));
    assert!(!text.contains("\"a\""), "{text}");
}

#[test]
fn raw_lines_and_tables_reach_the_file() {
    let text = Config::new()
        .pool(
            Pool::new("p")
                .origin("o", "192.0.2.1")
                .extra("minimum_origins = 1"),
        )
        .load_balancer(Lb::new("x.example.test").pools(&["p"]).set("ttl", "9"))
        .extra("[notifications]\nbatch_seconds = 5")
        .render();
    assert!(text.contains("minimum_origins = 1\n"), "{text}");
    assert!(text.contains("ttl = 9\n"), "{text}");
    assert!(
        text.ends_with("[notifications]\nbatch_seconds = 5\n"),
        "{text}"
    );
    parse(&text);
}

#[test]
fn strings_are_quoted_and_escaped() {
    assert_eq!(quote(r#"a "b" \c"#), r#""a \"b\" \\c""#);
    assert_eq!(list(&["x", "y"]), r#"["x", "y"]"#);
}
