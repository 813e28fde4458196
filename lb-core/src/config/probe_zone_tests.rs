//! Authenticated origin pulls (`origin_client_cert`) and `probe_zone`, as validation reads
//! them (`validate/probe_zone.rs`).

use super::tests::{errors, has, parse};
use super::*;

/// An https monitor `m` (with `monitor_extra`) over pool `p`, and `lbs` after them.
fn config(monitor_extra: &str, lbs: &str) -> String {
    format!(
        r#"
[[monitors]]
name = "m"
type = "https"
{monitor_extra}

[[pools]]
name = "p"
monitor = "m"
origins = [{{ name = "e", address = "192.0.2.1" }}]

[[pools]]
name = "q"
origins = [{{ name = "e", address = "192.0.2.2" }}]

[[zones]]
name = "example.test"

{lbs}
"#
    )
}

fn lb(name: &str, pool: &str, extra: &str) -> String {
    format!(
        "[[load_balancers]]\nname = \"{name}\"\ndefault_pools = [\"{pool}\"]\nproxied = true\n{extra}\n"
    )
}

const PULLS: &str = "origin_tls = \"strict\"\norigin_ca_file = \"/ca.pem\"\norigin_client_cert = \"/c.pem\"\norigin_client_key = \"/c.key\"";

#[test]
fn a_client_certificate_needs_its_key_and_tls() {
    let c = parse(&config("", &lb("www.example.test", "p", PULLS))).expect("valid");
    let files = c.load_balancers[0]
        .origin_client_cert
        .clone()
        .expect("cert");
    assert_eq!(files.cert, std::path::Path::new("/c.pem"));
    let e = errors(&config(
        "",
        &lb(
            "www.example.test",
            "p",
            "origin_tls = \"full\"\norigin_client_cert = \"/c.pem\"",
        ),
    ));
    has(
        &e,
        "load_balancers[0].origin_client_key: origin_client_cert needs its key",
    );
    let e = errors(&config(
        "",
        &lb(
            "www.example.test",
            "p",
            "origin_client_cert = \"/c.pem\"\norigin_client_key = \"/k\"",
        ),
    ));
    has(
        &e,
        "load_balancers[0].origin_client_cert: a client certificate is presented over TLS",
    );
}

#[test]
fn a_probe_zone_monitor_takes_the_zones_origin_tls() {
    let c = parse(&config(
        "probe_zone = \"Example.Test\"",
        &(lb("www.example.test", "q", PULLS) + &lb("api.example.test", "p", PULLS)),
    ))
    .expect("valid");
    let tls = c.monitors[0].zone_tls.clone().expect("resolved");
    assert_eq!(tls.mode, OriginTls::Strict);
    assert_eq!(
        tls.identity().map(|(c, _)| c),
        Some(std::path::Path::new("/c.pem"))
    );
    let p = c.pool_by_name("p").expect("p");
    assert_eq!(
        c.probe_zone_host("example.test", p),
        Some("api.example.test"),
        "the one serving p"
    );
    assert!(parse(&config("", &lb("www.example.test", "p", PULLS)))
        .expect("valid")
        .monitors[0]
        .zone_tls
        .is_none());
}

#[test]
fn a_probe_zone_must_be_a_zone_with_proxied_load_balancers_that_agree() {
    let e = errors(&config(
        "probe_zone = \"nowhere.test\"",
        &lb("www.example.test", "p", PULLS),
    ));
    has(
        &e,
        "monitors[0].probe_zone: no zone `nowhere.test` (zones: example.test)",
    );
    let dns_only = "[[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"p\"]\n";
    let e = errors(&config("probe_zone = \"example.test\"", dns_only));
    has(
        &e,
        "monitors[0].probe_zone: zone `example.test` has no proxied HTTP load balancer",
    );
    let e = errors(&config(
        "probe_zone = \"example.test\"",
        &(lb("www.example.test", "p", PULLS)
            + &lb("api.example.test", "q", "origin_tls = \"full\"")),
    ));
    has(&e, "monitors[0].probe_zone: the proxied load balancers of zone `example.test` reach origins differently (www.example.test and api.example.test");
    let tcp = config(
        "probe_zone = \"example.test\"",
        &lb("www.example.test", "p", PULLS),
    )
    .replace("type = \"https\"", "type = \"tcp\"\nport = 443");
    has(
        &errors(&tcp),
        "monitors[0].probe_zone: only http and https monitors",
    );
}

#[test]
fn a_monitors_tls_files_are_the_ones_its_check_reads() {
    use std::path::Path;
    let with_zone = |lb_tls: &str| {
        parse(&config(
            "ca_file = \"/monitor-ca.pem\"\nprobe_zone = \"example.test\"",
            &lb("www.example.test", "p", lb_tls),
        ))
        .expect("valid")
    };
    let pulls = with_zone(PULLS);
    assert_eq!(
        pulls.monitors[0].tls_files(),
        [
            Path::new("/ca.pem"),
            Path::new("/c.pem"),
            Path::new("/c.key")
        ],
        "the zone's TLS in place of the monitor's"
    );
    let off = with_zone("origin_tls = \"off\"");
    assert_eq!(
        off.monitors[0].tls_files(),
        [Path::new("/monitor-ca.pem")],
        "a zone without TLS leaves the monitor's CA in use"
    );
    assert_eq!(
        pulls.named_files(),
        [
            Path::new("/c.key"),
            Path::new("/c.pem"),
            Path::new("/ca.pem")
        ],
        "each file once"
    );
}
