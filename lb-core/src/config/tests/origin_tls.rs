//! Origin TLS modes (off, flexible, full, strict), a strict mode's CA file, and their errors.

use super::*;

#[test]
fn origin_tls_modes_and_their_errors() {
    let lb = |extra: &str| format!("{MINIMAL}{extra}\n");
    assert_eq!(
        parse(MINIMAL).expect("valid").load_balancers[0].origin_tls,
        OriginTls::Off
    );
    for (mode, want) in [
        ("off", OriginTls::Off),
        ("flexible", OriginTls::Off),
        ("full", OriginTls::Full),
        ("strict", OriginTls::Strict),
    ] {
        let c = parse(&lb(&format!("proxied = true\norigin_tls = \"{mode}\""))).expect(mode);
        assert_eq!(c.load_balancers[0].origin_tls, want, "{mode}");
    }
    let c = parse(&lb(
        "proxied = true\norigin_tls = \"strict\"\norigin_ca_file = \"/etc/meshlb/ca.pem\"",
    ))
    .expect("strict with CA");
    assert_eq!(
        c.load_balancers[0].origin_ca_file.as_deref(),
        Some(std::path::Path::new("/etc/meshlb/ca.pem"))
    );
    let e = errors(&lb("proxied = true\norigin_tls = \"tls\""));
    has(
        &e,
        "load_balancers[0].origin_tls: `tls` is not one of off, flexible, full, strict",
    );
    let e = errors(&lb("origin_tls = \"full\""));
    has(
        &e,
        "load_balancers[0].origin_tls: only the proxy connects to origins",
    );
    let e = errors(&lb(
        "proxied = true\norigin_tls = \"full\"\norigin_ca_file = \"ca.pem\"",
    ));
    has(
        &e,
        "load_balancers[0].origin_ca_file: trust anchors are only used with origin_tls = \"strict\"",
    );
}
