//! Zones and geolocation: their errors, and zones defaulted from the load balancers' names.

use super::*;

#[test]
fn zones_and_geolocation_are_validated() {
    let text = r#"
[[pools]]
name = "a"
origins = [{ name = "x", address = "192.0.2.1" }]

[[zones]]
name = "example.com"
nameservers = ["ns1.example.com", "not a name"]
ttl = 0
negative_ttl = 100000

[[zones]]
name = "example.com."

[[load_balancers]]
name = "www.example.com"
default_pools = ["a"]

[[load_balancers]]
name = "www.example.org"
default_pools = ["a"]

[geolocation]
networks = [
  { cidr = "10.0.0.0/33", country = "DE" },
  { cidr = "10.1.0.0/16" },
  { cidr = "10.2.0.0/16", country = "QQ", region = "MARS" },
]
"#;
    let e = errors(text);
    for needle in [
        "zones[0].nameservers[1]: `not a name` is not a host name",
        "zones[0].ttl: must be 1..=604800 seconds (got 0)",
        "zones[0].negative_ttl: must be 0..=86400 seconds (got 100000)",
        "zones[1].name: duplicate zone `example.com`",
        "load_balancers[1].name: `www.example.org` is inside none of the [[zones]] (example.com, example.com)",
        "geolocation.networks[0].cidr: `10.0.0.0/33` is not an address or CIDR network",
        "geolocation.networks[1]: give a `country` or a `region` (or both)",
        "geolocation.networks[2].country: `QQ` is not a country of regions.toml",
        "geolocation.networks[2].region: unknown region `MARS`",
    ] {
        assert!(e.iter().any(|l| l.contains(needle)), "{needle} not in {e:#?}");
    }
    assert!(
        !e.iter().any(|l| l.contains("load_balancers[0].name")),
        "www.example.com is inside example.com: {e:#?}"
    );
}

#[test]
fn zones_default_from_the_load_balancers() {
    let c = parse(
        r#"
[[pools]]
name = "a"
origins = [{ name = "x", address = "192.0.2.1" }]
[[load_balancers]]
name = "WWW.Example.com."
default_pools = ["a"]
[[zones]]
name = "Example.COM"
[geolocation]
networks = [{ cidr = "10.1.0.0/16", country = "de" }, { cidr = "10.1.2.0/24", region = "ENAM" }]
"#,
    )
    .expect("valid");
    assert_eq!(c.zones[0].name, "example.com");
    assert_eq!(c.zones[0].nameservers, ["ns1.example.com"]);
    assert_eq!(c.zones[0].hostmaster, "hostmaster.example.com");
    assert!(c.zones[0].contains("www.example.com") && !c.zones[0].contains("wwwexample.com"));
    // Longest prefix first.
    assert_eq!(c.geolocation.networks[0].net.to_string(), "10.1.2.0/24");
}
