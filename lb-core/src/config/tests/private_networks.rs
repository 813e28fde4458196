//! Tunnels, virtual networks, routes and private endpoints (`config/private.rs`): what a valid
//! set means, and every error at once with its path.

use super::*;
use crate::config::private::{NetworkIndex, TunnelIndex};

const TUNNEL: &str = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
const OFFICE: &str = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4";
const LAB: &str = "0e2e7bd7-6b52-4a61-9e2a-9c7a27c2d2b1";
/// base64 of 32 bytes.
const SECRET: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn private(extra_origin: &str) -> String {
    format!(
        r#"
[[tunnels]]
id = "{TUNNEL}"
name = "office-connector"
tunnel_secret = "{SECRET}"

[[virtual_networks]]
id = "{OFFICE}"
name = "office"
is_default_network = true

[[virtual_networks]]
id = "{LAB}"
name = "lab"

[[routes]]
network = "10.1.0.0/16"
tunnel_id = "{TUNNEL}"

[[routes]]
network = "10.1.2.0/24"
tunnel_id = "{}"
virtual_network_id = "{LAB}"

[[pools]]
name = "p"
origins = [
  {{ name = "public", address = "192.0.2.1" }},
  {extra_origin}
]

[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["p"]
"#,
        TUNNEL.to_uppercase()
    )
}

#[test]
fn a_private_endpoint_is_in_its_network_and_its_route_names_the_tunnel() {
    let c = parse(&private(&format!(
        r#"{{ name = "private", address = "10.1.2.7", virtual_network_id = "{LAB}" }}"#
    )))
    .expect("valid");
    let [public, private] = c.pools[0].endpoints.as_slice() else {
        panic!("two endpoints");
    };
    assert_eq!(public.network, None);
    assert_eq!(private.network, Some(NetworkIndex(1)));
    let route = c
        .private
        .route(NetworkIndex(1), "10.1.2.7".parse().unwrap())
        .expect("routed");
    assert_eq!(route.tunnel, TunnelIndex(0));
    assert_eq!(c.private.tunnel(route.tunnel).id, TUNNEL);
    assert_eq!(c.private.tunnel(route.tunnel).secret.len(), 32);
    // The route without a network is the default one's.
    assert_eq!(c.private.routes[0].virtual_network, NetworkIndex(0));
    assert!(c
        .private
        .route(NetworkIndex(0), "10.1.2.7".parse().unwrap())
        .is_some());
    assert!(c
        .private
        .route(NetworkIndex(1), "10.1.3.7".parse().unwrap())
        .is_none());
}

#[test]
fn a_private_endpoint_outside_every_route_of_its_network_is_refused() {
    let e = errors(&private(&format!(
        r#"{{ name = "private", address = "10.1.3.7", virtual_network_id = "{LAB}" }}"#
    )));
    has(
        &e,
        &format!("pools[0].origins[1].address: 10.1.3.7 is in no route of virtual network `{LAB}`"),
    );
}

#[test]
fn a_private_endpoint_needs_a_known_network_and_an_ip() {
    let e = errors(&private(
        r#"{ name = "private", address = "10.1.2.7", virtual_network_id = "00000000-0000-0000-0000-000000000000" }"#,
    ));
    has(
        &e,
        "pools[0].origins[1].virtual_network_id: no virtual network",
    );
    let e = errors(&private(&format!(
        r#"{{ name = "private", address = "db.office.test", virtual_network_id = "{LAB}" }}"#
    )));
    has(
        &e,
        "pools[0].origins[1].address: an endpoint in a virtual network needs an IP address",
    );
}

#[test]
fn every_error_of_tunnels_networks_and_routes_comes_at_once() {
    let text = format!(
        r#"
[[tunnels]]
id = "not-a-uuid"
name = ""
tunnel_secret = "c2hvcnQ="

[[tunnels]]
id = "{TUNNEL}"
name = "t"
tunnel_secret = "%%%"

[[tunnels]]
id = "{TUNNEL}"
name = "t"
tunnel_secret = "{SECRET}"

[[virtual_networks]]
id = "{OFFICE}"
name = "a"
is_default_network = true

[[virtual_networks]]
id = "{LAB}"
name = "b"
is_default_network = true

[[routes]]
network = "10.1.0.1/16"
tunnel_id = "{TUNNEL}"

[[routes]]
network = "ten"
tunnel_id = "{LAB}"
virtual_network_id = "{TUNNEL}"

[[pools]]
name = "p"
origins = [{{ name = "e", address = "192.0.2.1" }}]

[[load_balancers]]
name = "www.example.test"
default_pools = ["p"]
"#
    );
    let e = errors(&text);
    for needle in [
        "tunnels[0].id: `not-a-uuid` is not a UUID",
        "tunnels[0].name: a tunnel needs a name",
        "tunnels[0].tunnel_secret: must be at least 32 bytes (got 5)",
        "tunnels[1].tunnel_secret: must be base64",
        &format!("tunnels[2].id: tunnels[1].id already has the id {TUNNEL}"),
        "tunnels[2].name: tunnels[1] is already named `t`",
        "virtual_networks[1].is_default_network: virtual_networks[0] is already the default",
        "routes[0].network: `10.1.0.1/16` has host bits set (the network is 10.1.0.0/16)",
        "routes[1].network: `ten` is not a CIDR",
        &format!("routes[1].tunnel_id: no tunnel `{LAB}`"),
        &format!("routes[1].virtual_network_id: no virtual network `{TUNNEL}`"),
    ] {
        has(&e, needle);
    }
    assert!(
        !e.iter().any(|l| l.contains("c2hvcnQ=")),
        "no error quotes a secret: {e:#?}"
    );
}

#[test]
fn a_route_without_a_network_needs_a_default_one_and_a_cidr_is_routed_once() {
    let text = format!(
        r#"
[[tunnels]]
id = "{TUNNEL}"
name = "t"
tunnel_secret = "{SECRET}"

[[virtual_networks]]
id = "{OFFICE}"
name = "office"

[[routes]]
network = "10.1.0.0/16"
tunnel_id = "{TUNNEL}"

[[routes]]
network = "10.2.0.0/16"
tunnel_id = "{TUNNEL}"
virtual_network_id = "{OFFICE}"

[[routes]]
network = "10.2.0.0/16"
tunnel_id = "{TUNNEL}"
virtual_network_id = "{OFFICE}"

[[pools]]
name = "p"
origins = [{{ name = "e", address = "192.0.2.1" }}]

[[load_balancers]]
name = "www.example.test"
default_pools = ["p"]
"#
    );
    let e = errors(&text);
    has(
        &e,
        "routes[0].virtual_network_id: no default virtual network",
    );
    has(
        &e,
        "routes[2].network: routes[1] already routes 10.2.0.0/16 in this virtual network",
    );
}

#[test]
fn a_tunnel_s_debug_form_never_shows_its_secret() {
    let c = parse(&private(&format!(
        r#"{{ name = "private", address = "10.1.2.7", virtual_network_id = "{LAB}" }}"#
    )))
    .expect("valid");
    let shown = format!("{:?}", c.private);
    assert!(!shown.contains("secret"), "{shown}");
}

#[test]
fn a_private_endpoint_monitored_by_a_type_that_cannot_cross_a_tunnel_is_refused() {
    let origin =
        format!(r#"{{ name = "private", address = "10.1.2.7", virtual_network_id = "{LAB}" }}"#);
    for (kind, refused) in [
        ("icmp_ping", true),
        ("udp_icmp", true),
        ("ldap", true),
        ("tcp", false),
        ("http", false),
    ] {
        let text = private(&origin).replace(
            "[[pools]]\nname = \"p\"\n",
            &format!("[[monitors]]\nname = \"m\"\ntype = \"{kind}\"\nport = 389\n\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\n"),
        );
        let why = "pools[0].origins[1].virtual_network_id: a private endpoint is probed through its tunnel";
        if refused {
            has(&errors(&text), why);
        } else {
            parse(&text).unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
    }
}

#[test]
fn created_at_and_route_ids_are_checked_when_written() {
    let origin = r#"{ name = "x", address = "192.0.2.2" }"#;
    let text = private(origin)
        .replace(
            "name = \"office-connector\"\n",
            "name = \"office-connector\"\ncreated_at = \"2026-12-07T16:25:00.123Z\"\n",
        )
        .replace(
            "network = \"10.1.0.0/16\"\n",
            "network = \"10.1.0.0/16\"\nid = \"7f8a0c2e-6b3a-4e0d-9a55-2f1e8c3d4b6a\"\ncreated_at = \"yesterday\"\n",
        )
        .replace(
            "network = \"10.1.2.0/24\"\n",
            "network = \"10.1.2.0/24\"\nid = \"7F8A0C2E6B3A4E0D9A552F1E8C3D4B6A\"\n",
        );
    let e = errors(&text);
    has(
        &e,
        "routes[0].created_at: `yesterday` is not an RFC 3339 time in UTC",
    );
    has(&e, "routes[1].id:");
    assert_eq!(e.len(), 2, "{e:?}");
}

#[test]
fn a_utc_timestamp_has_every_field_in_range() {
    use crate::config::validate::private::is_utc_timestamp as ok;
    assert!(ok("2026-12-07T16:25:00Z"));
    assert!(ok("2026-12-07T16:25:00.5Z"));
    assert!(!ok("2026-13-07T16:25:00Z"));
    assert!(!ok("2026-12-07T16:25:00+01:00"));
    assert!(!ok("2026-12-07 16:25:00Z"));
    assert!(!ok("2026-12-07T16:25:00.Z"));
    assert!(!ok(""));
}
