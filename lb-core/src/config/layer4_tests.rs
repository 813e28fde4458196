//! Validation of layer-4 load balancers: ports, origin ports, PROXY headers, and what layer 4
//! refuses (rules, cookie and header affinity, origin TLS), each error with its path.

use super::tests::{errors, has, parse};
use super::*;

const POOL: &str = r#"
[[pools]]
name = "p"
origins = [{ name = "e", address = "192.0.2.1" }]
"#;

fn with(lb: &str) -> String {
    format!(
        "{POOL}\n[[load_balancers]]\nname = \"l4.example.test\"\ndefault_pools = [\"p\"]\n{lb}\n"
    )
}

#[test]
fn a_tcp_load_balancer_with_ports_ranges_and_a_mapped_range() {
    let c = parse(&with(
        "protocol = \"tcp\"\nlisten = [22, \"8000-8002\"]\norigin_port = \"9000-9003\"\nproxy_protocol = \"v2\"",
    ))
    .expect("valid");
    let lb = &c.load_balancers[0];
    assert!(lb.proxied, "layer 4 is always proxied");
    assert!(!lb.proxied_http());
    let l4 = lb.layer4.as_ref().expect("layer 4");
    assert_eq!(l4.transport, Transport::Tcp);
    assert_eq!(l4.proxy_protocol, ProxyProtocol::V2);
    let ports: Vec<(u16, Option<u16>)> = l4.ports.iter().map(|p| (p.listen, p.origin)).collect();
    assert_eq!(
        ports,
        vec![
            (22, Some(9000)),
            (8000, Some(9001)),
            (8001, Some(9002)),
            (8002, Some(9003))
        ]
    );
    assert_eq!(
        lb.settings.session_affinity.zero_downtime_failover,
        ZeroDowntimeFailover::Temporary,
        "a refused connect is tried once more elsewhere"
    );
}

#[test]
fn one_origin_port_serves_every_listened_port() {
    let c = parse(&with("protocol = \"udp\"\nlisten = [\"5300-5301\"]\norigin_port = 53\nproxy_protocol = \"simple\"")).expect("valid");
    let l4 = c.load_balancers[0].layer4.as_ref().expect("layer 4");
    assert_eq!(l4.origin_port(5300, 0), 53);
    assert_eq!(l4.origin_port(5301, 0), 53);
    assert_eq!(l4.proxy_protocol, ProxyProtocol::Simple);
}

#[test]
fn http_load_balancers_take_no_layer4_fields() {
    let e = errors(&with("listen = [22]\nproxy_protocol = \"v1\""));
    has(&e, "load_balancers[0].listen: only a layer-4 load balancer");
    has(
        &e,
        "load_balancers[0].proxy_protocol: only a layer-4 load balancer",
    );
    let c = parse(&with("")).expect("valid");
    assert!(c.load_balancers[0].layer4.is_none());
}

#[test]
fn every_layer4_error_at_once() {
    let e = errors(&with(
        r#"protocol = "tcp"
listen = [0, "10-5", "x", 70000, 22, 22]
origin_port = "1-3"
proxy_protocol = "simple"
session_affinity = "cookie"
origin_tls = "full"
[[load_balancers.rules]]
name = "r"
condition = "true"
fixed_response = { status_code = 200 }
"#,
    ));
    has(&e, "load_balancers[0].listen[0]: 0 is not a port");
    has(
        &e,
        "load_balancers[0].listen[1]: `10-5`: the first port is above the last",
    );
    has(&e, "load_balancers[0].listen[2]: `x` is not a port");
    has(&e, "load_balancers[0].listen[3]: 70000 is not a port");
    has(
        &e,
        "load_balancers[0].listen: a port is listed more than once",
    );
    has(
        &e,
        "load_balancers[0].origin_port: a range of 3 ports for 1 listened ports",
    );
    has(&e, "load_balancers[0].proxy_protocol: simple is for UDP");
    has(&e, "load_balancers[0].session_affinity: a layer-4 load balancer's only affinity is by client IP");
    has(
        &e,
        "load_balancers[0].origin_tls: a layer-4 load balancer carries TLS through",
    );
    has(
        &e,
        "load_balancers[0].rules: a layer-4 load balancer takes no custom rules",
    );
}

#[test]
fn a_port_is_one_load_balancers_per_transport() {
    let text = format!(
        "{POOL}
[[load_balancers]]
name = \"a.example.test\"
default_pools = [\"p\"]
protocol = \"tcp\"
listen = [\"20-30\"]
[[load_balancers]]
name = \"b.example.test\"
default_pools = [\"p\"]
protocol = \"tcp\"
listen = [25]
[[load_balancers]]
name = \"c.example.test\"
default_pools = [\"p\"]
protocol = \"udp\"
listen = [25]
[[load_balancers]]
name = \"d.example.test\"
default_pools = [\"p\"]
protocol = \"sctp\"
"
    );
    let e = errors(&text);
    has(
        &e,
        "load_balancers[1].listen: port 25/tcp is also load_balancers[0]'s (`a.example.test`)",
    );
    has(
        &e,
        "load_balancers[3].protocol: unknown protocol `sctp` (expected http, tcp or udp)",
    );
    assert!(
        !e.iter().any(|l| l.starts_with("load_balancers[2]")),
        "UDP 25 is free: {e:#?}"
    );
    let missing = errors(&with("protocol = \"udp\"\nproxy_protocol = \"v1\""));
    has(
        &missing,
        "load_balancers[0].listen: a layer-4 load balancer needs the ports",
    );
    has(
        &missing,
        "load_balancers[0].proxy_protocol: v1 is a text header for TCP",
    );
}
