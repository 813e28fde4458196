//! Validation: defaults, every rule of docs/design.md#configuration-validation, and that all errors come at once with
//! the file, the field path and the reason.

use super::*;
use crate::regions_table::RegionsTable;

fn regions() -> RegionsTable {
    RegionsTable::embedded().expect("embedded regions")
}

pub(super) fn parse(text: &str) -> Result<Config, ConfigErrors> {
    Config::parse("meshlb.toml", text, &regions())
}

/// The errors as "path: reason" lines.
pub(super) fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => {
            e.0.iter()
                .map(|e| {
                    assert_eq!(e.file, "meshlb.toml");
                    format!("{}: {}", e.path, e.reason)
                })
                .collect()
        }
    }
}

#[track_caller]
pub(super) fn has(errors: &[String], needle: &str) {
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "no error containing {needle:?} in {errors:#?}"
    );
}

const MINIMAL: &str = r#"
[[monitors]]
name = "m"

[[pools]]
name = "p"
monitor = "m"
origins = [{ name = "e", address = "192.0.2.1" }]

[[load_balancers]]
name = "WWW.Example.Test."
default_pools = ["p"]
"#;

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

/// MINIMAL's pool with `notification_email = "{emails}"`, and `channel` after it.
fn pool_emails(emails: &str, channel: &str) -> String {
    let pool = format!("origins = [{{ name = \"e\", address = \"192.0.2.1\" }}]\nnotification_email = \"{emails}\"");
    format!(
        "{}{channel}",
        MINIMAL.replace(
            r#"origins = [{ name = "e", address = "192.0.2.1" }]"#,
            &pool
        )
    )
}

const EMAIL_CHANNEL: &str = r#"
[[notifications.email]]
name = "ops"
from = "meshlb@example.test"
to = ["ops@example.test"]
smtp_host = "smtp.example.test"
"#;

#[test]
fn a_pools_notification_email_is_a_comma_separated_list() {
    let c = parse(&pool_emails(
        "a@example.test, b@example.test",
        EMAIL_CHANNEL,
    ))
    .expect("valid");
    assert_eq!(
        c.pools[0].notification_email,
        ["a@example.test", "b@example.test"]
    );
    let e = errors(&pool_emails("a@example.test, nobody", EMAIL_CHANNEL));
    has(
        &e,
        "pools[0].notification_email: `nobody` is not an email address",
    );
}

#[test]
fn a_pools_notification_email_needs_an_email_channel() {
    let e = errors(&pool_emails("a@example.test", ""));
    has(&e, "pools[0].notification_email: needs an email channel");
    parse(&pool_emails("", "")).expect("an empty list needs none");
}

#[test]
fn notifications_channels_and_their_errors() {
    let ok = format!(
        r#"{MINIMAL}
[notifications]
batch_seconds = 2
[[notifications.email]]
name = "ops"
from = "meshlb <meshlb@example.test>"
to = ["ops@example.test"]
smtp_host = "smtp.example.test"
username = "meshlb"
password_env = "SMTP_PASSWORD"
pools = ["p"]
[[notifications.webhooks]]
name = "hook"
url = "https://hooks.example.test/x"
secret_env = "HOOK_SECRET"
"#
    );
    let c = parse(&ok).expect("valid");
    let n = &c.notifications;
    assert_eq!(n.batch_window, std::time::Duration::from_secs(2));
    assert_eq!(n.max_attempts, 5);
    assert_eq!(n.email[0].smtp_tls, SmtpTls::StartTls);
    assert_eq!(n.email[0].smtp_port, 587, "STARTTLS's submission port");
    assert_eq!(n.email[0].pools, vec![PoolId(0)]);
    assert_eq!(n.webhooks[0].url, "https://hooks.example.test/x");
    let bad = format!(
        r#"{MINIMAL}
[notifications]
batch_seconds = 7200
max_attempts = 0
[[notifications.email]]
name = "ops"
from = "nobody"
to = []
smtp_host = "smtp.example.test"
smtp_tls = "ssl"
password_file = "/etc/meshlb/smtp"
pools = ["nope"]
[[notifications.email]]
name = "clear"
from = "a@b.test"
to = ["c@d", "not an address"]
smtp_host = "127.0.0.1"
smtp_tls = "none"
username = "u"
password_env = "P"
[[notifications.webhooks]]
name = "ops"
url = "ftp://example.test/"
secret_file = "a"
secret_env = "B"
"#
    );
    let e = errors(&bad);
    has(
        &e,
        "notifications.batch_seconds: must be 0..=3600 seconds (got 7200)",
    );
    has(&e, "notifications.max_attempts: must be 1..=20 (got 0)");
    has(
        &e,
        "notifications.email[0].from: `nobody` is not an email address",
    );
    has(&e, "notifications.email[0].to: needs at least one address");
    has(
        &e,
        "notifications.email[0].smtp_tls: `ssl` is not one of none, starttls, implicit",
    );
    has(&e, "notifications.email[0].username: SMTP auth needs both username and password_file/password_env");
    has(&e, "notifications.email[0].pools[0]");
    has(
        &e,
        "notifications.email[1].to[1]: `not an address` is not an email address",
    );
    has(
        &e,
        "notifications.email[1].smtp_tls: a password is never sent in clear",
    );
    has(
        &e,
        "notifications.webhooks[0].name: duplicate notification channel `ops`",
    );
    has(
        &e,
        "notifications.webhooks[0].url: `ftp://example.test/` is not an http:// or https:// URL",
    );
    has(
        &e,
        "notifications.webhooks[0]: give secret_file or secret_env, not both",
    );
}

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

const GROUP_MONITORS: &str = r#"
[[monitors]]
name = "http"
path = "/health"
[[monitors]]
name = "tcp"
type = "tcp"
[[monitors]]
name = "deep"
path = "/deep"
"#;

#[test]
fn a_monitor_group_gives_its_pool_the_enabled_members_in_order() {
    let text = format!(
        r#"{GROUP_MONITORS}
[[monitor_groups]]
name = "web"
description = "front and back"
members = [
  {{ monitor = "http", must_be_healthy = true }},
  {{ monitor_id = "tcp" }},
  {{ monitor = "deep", monitoring_only = true }},
  {{ monitor = "deep-off", enabled = false }},
]
[[monitors]]
name = "deep-off"
[[pools]]
name = "p"
monitor_group = "web"
origins = [{{ name = "a", address = "192.0.2.1" }}]
"#
    );
    let c = parse(&text).expect("valid");
    let p = &c.pools[0];
    assert!(p.is_monitored());
    assert_eq!(p.monitor_group, Some(0));
    let checks: Vec<(&str, MemberRole)> = p
        .checks
        .iter()
        .map(|ch| (c.check_monitor(ch).name.as_str(), ch.role))
        .collect();
    assert_eq!(
        checks,
        [
            ("http", MemberRole::MustBeHealthy),
            ("tcp", MemberRole::Decides),
            ("deep", MemberRole::MonitoringOnly),
        ],
        "the disabled member is not probed"
    );
    assert_eq!(c.monitor_groups[0].members.len(), 4);
    assert_eq!(c.check_label(p, &p.checks[1]), Some("tcp"));
}

#[test]
fn a_pool_with_one_monitor_has_one_deciding_check_without_a_label() {
    let text = format!(
        "{GROUP_MONITORS}\n[[pools]]\nname = \"p\"\nmonitor = \"tcp\"\norigins = [{{ name = \"a\", address = \"192.0.2.1\" }}]\n"
    );
    let c = parse(&text).expect("valid");
    let p = &c.pools[0];
    assert_eq!(p.checks.len(), 1);
    assert_eq!(p.checks[0].role, MemberRole::Decides);
    assert_eq!(c.check_label(p, &p.checks[0]), None);
}

#[test]
fn monitor_group_errors_all_at_once() {
    let members: Vec<String> = (0..17)
        .map(|_| "{ monitor = \"tcp\" }".to_string())
        .collect();
    let text = format!(
        r#"{GROUP_MONITORS}
[[monitor_groups]]
name = "bad"
members = [
  {{ monitor = "nope" }},
  {{ monitor = "http", monitoring_only = true, must_be_healthy = true }},
  {{ monitor = "http" }},
  {{ monitor = "tcp", weight = 2 }},
]
[[monitor_groups]]
name = "silent"
members = [{{ monitor = "http", monitoring_only = true }}, {{ monitor = "tcp", enabled = false }}]
[[monitor_groups]]
name = "empty"
[[monitor_groups]]
name = "big"
members = [{}]
[[monitor_groups]]
name = "silent"
members = [{{ monitor = "http" }}]
[[pools]]
name = "both"
monitor = "http"
monitor_group = "silent"
origins = [{{ name = "a", address = "192.0.2.1" }}]
[[pools]]
name = "ghost"
monitor_group = "ghost"
origins = [{{ name = "a", address = "192.0.2.1" }}]
[[pools]]
name = "uses-bad"
monitor_group = "bad"
origins = [{{ name = "a", address = "192.0.2.1" }}]
"#,
        members.join(", ")
    );
    let e = errors(&text);
    for needle in [
        "monitor_groups[0].members[0].monitor: no monitor is named `nope`",
        "monitor_groups[0].members[1].must_be_healthy: a monitoring_only member never decides",
        "monitor_groups[0].members[2].monitor: monitor `http` is already a member of this group",
        "monitor_groups[0].members[3].weight: unknown field",
        "monitor_groups[1].members: no enabled member decides",
        "monitor_groups[2].members: a group needs at least one member",
        "monitor_groups[3].members: at most 16 members (got 17)",
        "monitor_groups[4].name: duplicate monitor group name `silent`",
        "pools[0].monitor_group: a pool takes `monitor` or `monitor_group`, not both",
        "pools[1].monitor_group: no monitor group is named `ghost`",
    ] {
        has(&e, needle);
    }
    assert!(
        !e.iter().any(|l| l.contains("pools[2]")),
        "a pool naming an invalid group gets no second error: {e:#?}"
    );
}
