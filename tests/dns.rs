//! The authoritative DNS server of a real `meshlb aggregator`, fed by a real mesh (three
//! probers probing real HTTP origins over loopback), queried with real `dig` over UDP and TCP,
//! IPv4 and IPv6: equal and unequal weights, AAAA and CNAME endpoints, EDNS Client Subnet geo
//! steering, REFUSED/NXDOMAIN/NODATA with the SOA, and failover primary -> secondary ->
//! fallback (also once its origin is down) -> nothing once a reload disables it -> back as
//! origins stop and start.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::*;

/// What `dig` printed for one query.
#[derive(Debug, Default)]
struct Dig {
    status: String,
    /// (type, rdata) of the answer section.
    answers: Vec<(String, String)>,
    authority: Vec<(String, String)>,
    ecs: Option<String>,
}

/// Runs `dig` with `args` against the server and parses every response it prints (dig takes
/// many queries on one command line).
fn dig(server: SocketAddr, args: &[&str]) -> Vec<Dig> {
    let out = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string()])
        .args([
            "+norec",
            "+noall",
            "+comments",
            "+answer",
            "+authority",
            "+tries=1",
            "+time=2",
        ])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("dig runs (bind9-dnsutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut all = Vec::new();
    let mut section = "";
    for line in text.lines() {
        if line.contains("->>HEADER<<-") {
            let status = line
                .split("status: ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .unwrap_or("")
                .to_string();
            all.push(Dig {
                status,
                ..Dig::default()
            });
            section = "";
        } else if line.starts_with(";; ANSWER SECTION") {
            section = "answer";
        } else if line.starts_with(";; AUTHORITY SECTION") {
            section = "authority";
        } else if let Some(ecs) = line.strip_prefix("; CLIENT-SUBNET: ") {
            if let Some(d) = all.last_mut() {
                d.ecs = Some(ecs.trim().to_string());
            }
        } else if !line.starts_with(';') && !line.trim().is_empty() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 5 {
                let rr = (f[3].to_string(), f[4..].join(" "));
                if let Some(d) = all.last_mut() {
                    match section {
                        "answer" => d.answers.push(rr),
                        "authority" => d.authority.push(rr),
                        _ => {}
                    }
                }
            }
        }
    }
    all
}

fn one(server: SocketAddr, args: &[&str]) -> Dig {
    dig(server, args).pop().unwrap_or_default()
}

fn addresses(d: &Dig) -> Vec<String> {
    let mut a: Vec<String> = d.answers.iter().map(|(_, v)| v.clone()).collect();
    a.sort();
    a
}

#[test]
fn authoritative_dns_from_the_mesh() {
    let (scratch, key) = scratch_dir_with_key("dns");
    let dir = scratch.path();
    let o: BTreeMap<&str, Origin> = [
        "127.0.0.11",
        "127.0.0.12",
        "127.0.0.21",
        "127.0.0.31",
        "127.0.0.41",
        "127.0.0.42",
        "127.0.0.51",
        "127.0.0.52",
        "::1",
    ]
    .into_iter()
    .map(|ip| (ip, origin_on(ip)))
    .collect();
    let port = |ip: &str| o[ip].port;
    let alias = origin();
    let alias_port = alias.port;
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
interval = 1
timeout = 1
retries = 0
consecutive_down = 2

[[pools]]
name = "primary"
monitor = "http"
check_regions = ["WEU"]
origins = [
  {{ name = "p1", address = "127.0.0.11", port = {} }},
  {{ name = "p2", address = "127.0.0.12", port = {} }},
]
[[pools]]
name = "secondary"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "s1", address = "127.0.0.21", port = {} }}]
[[pools]]
name = "last"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "f1", address = "127.0.0.31", port = {} }}]
[[pools]]
name = "weighted"
monitor = "http"
check_regions = ["WEU"]
origins = [
  {{ name = "w1", address = "127.0.0.41", port = {}, weight = 0.25 }},
  {{ name = "w2", address = "127.0.0.42", port = {}, weight = 0.75 }},
]
[[pools]]
name = "eu"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "eu1", address = "127.0.0.51", port = {} }}]
[[pools]]
name = "us"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "us1", address = "127.0.0.52", port = {} }}]
[[pools]]
name = "six"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "v6", address = "::1", port = {} }}]
[[pools]]
name = "alias"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "cdn", address = "localhost", port = {alias_port} }}]

[[zones]]
name = "example.test"
nameservers = ["ns1.example.test", "ns2.example.test"]
negative_ttl = 30

[geolocation]
networks = [
  {{ cidr = "10.1.0.0/16", country = "DE" }},
  {{ cidr = "10.2.0.0/16", region = "ENAM" }},
]

[[load_balancers]]
name = "www.example.test"
default_pools = ["primary", "secondary"]
fallback_pool = "last"
ttl = 20
[[load_balancers]]
name = "weighted.example.test"
default_pools = ["weighted"]
[[load_balancers]]
name = "geo.example.test"
default_pools = ["eu"]
region_pools = {{ WEU = ["eu"], ENAM = ["us"] }}
location_strategy = {{ prefer_ecs = "always" }}
[[load_balancers]]
name = "six.example.test"
default_pools = ["six"]
[[load_balancers]]
name = "cdn.example.test"
default_pools = ["alias"]
"#,
            port("127.0.0.11"),
            port("127.0.0.12"),
            port("127.0.0.21"),
            port("127.0.0.31"),
            port("127.0.0.41"),
            port("127.0.0.42"),
            port("127.0.0.51"),
            port("127.0.0.52"),
            port("::1"),
        ),
    )
    .expect("config");
    let admin = free_tcp();
    let dns4 = free_tcp_and_udp();
    let dns6 = free_tcp_and_udp_v6();
    let extra: Vec<String> = ["--dns", &dns4.to_string(), "--dns", &dns6.to_string()]
        .iter()
        .map(|a| a.to_string())
        .chain(["--dns-sockets".to_string(), "2".to_string()])
        .collect();
    let procs = start_mesh(&config, &key, admin, &extra);
    let aggregator = nix::unistd::Pid::from_raw(i32::try_from(procs.0[0].id()).expect("pid"));

    // Equal weights: every healthy address of the primary pool, with the load balancer's TTL.
    let all_up = wait_for("the primary pool answered", Duration::from_secs(30), || {
        addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.11", "127.0.0.12"]
    });
    eprintln!("first full answer after {all_up:?}");
    let d = one(dns4, &["www.example.test", "A"]);
    assert_eq!(d.status, "NOERROR");
    assert!(d.answers.iter().all(|(t, _)| t == "A"), "{d:?}");
    // Over TCP and over IPv6 too.
    assert_eq!(
        addresses(&one(dns4, &["+tcp", "www.example.test", "A"])),
        ["127.0.0.11", "127.0.0.12"]
    );
    assert_eq!(
        addresses(&one(dns6, &["+tcp", "www.example.test", "A"])),
        ["127.0.0.11", "127.0.0.12"]
    );
    assert_eq!(
        addresses(&one(dns6, &["www.example.test", "A"])),
        ["127.0.0.11", "127.0.0.12"]
    );

    // AAAA for an IPv6 endpoint, a CNAME for a host name endpoint, NODATA for A on an
    // IPv6-only pool.
    wait_for(
        "the v6 and alias pools are healthy",
        Duration::from_secs(15),
        || {
            addresses(&one(dns4, &["six.example.test", "AAAA"])) == ["::1"]
                && one(dns4, &["cdn.example.test", "A"]).answers
                    == [("CNAME".to_string(), "localhost.".to_string())]
        },
    );
    let d = one(dns4, &["six.example.test", "A"]);
    assert_eq!(
        (d.status.as_str(), d.answers.len()),
        ("NOERROR", 0),
        "{d:?}"
    );
    assert_eq!(d.authority[0].0, "SOA");

    // Unequal weights: one address per answer, about 25 % / 75 % over many queries.
    let queries: Vec<&str> = std::iter::repeat_n(["weighted.example.test", "A"], 400)
        .flatten()
        .collect();
    // Both endpoints healthy: both show up within a few dozen answers.
    wait_for(
        "both weighted endpoints healthy",
        Duration::from_secs(15),
        || {
            let seen: std::collections::BTreeSet<String> = dig(dns4, &queries[..80])
                .iter()
                .flat_map(|d| d.answers.iter().map(|(_, a)| a.clone()))
                .collect();
            seen.len() == 2
        },
    );
    let answers = dig(dns4, &queries);
    assert_eq!(answers.len(), 400);
    assert!(
        answers.iter().all(|d| d.answers.len() == 1),
        "one address each"
    );
    let w2 = answers
        .iter()
        .filter(|d| d.answers[0].1 == "127.0.0.42")
        .count() as f64
        / 400.0;
    assert!((0.65..=0.85).contains(&w2), "weight 0.75 got {w2}");

    // EDNS Client Subnet: two subnets in two regions get different geo answers; the scope is
    // the prefix of the network that decided.
    wait_for("the geo pools are healthy", Duration::from_secs(15), || {
        addresses(&one(dns4, &["geo.example.test", "A"])) == ["127.0.0.51"]
            && addresses(&one(
                dns4,
                &["+subnet=10.2.3.0/24", "geo.example.test", "A"],
            )) == ["127.0.0.52"]
    });
    let eu = one(dns4, &["+subnet=10.1.7.0/24", "geo.example.test", "A"]);
    let us = one(dns4, &["+subnet=10.2.3.0/24", "geo.example.test", "A"]);
    assert_eq!(addresses(&eu), ["127.0.0.51"]);
    assert_eq!(addresses(&us), ["127.0.0.52"]);
    assert_eq!(us.ecs.as_deref(), Some("10.2.3.0/24/16"), "{us:?}");

    // Names: apex SOA and NS, NXDOMAIN inside the zone, REFUSED outside it.
    let soa = one(dns4, &["example.test", "SOA"]);
    assert_eq!(soa.answers[0].0, "SOA");
    assert!(soa.answers[0]
        .1
        .starts_with("ns1.example.test. hostmaster.example.test."));
    let ns = one(dns4, &["example.test", "NS"]);
    assert_eq!(addresses(&ns), ["ns1.example.test.", "ns2.example.test."]);
    let nx = one(dns4, &["nothing.example.test", "A"]);
    assert_eq!(nx.status, "NXDOMAIN");
    assert_eq!(nx.authority[0].0, "SOA");
    assert_eq!(one(dns4, &["www.example.org", "A"]).status, "REFUSED");

    // Failover: the primary pool's origins stop -> the secondary pool, within
    // interval x consecutive_down + 1 s = 3 s (asserted with a margin for a loaded machine).
    o["127.0.0.11"].stop();
    o["127.0.0.12"].stop();
    let took = wait_for(
        "failover to the secondary pool",
        Duration::from_secs(15),
        || addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.21"],
    );
    eprintln!("DNS failover after {took:?}");
    assert!(took < Duration::from_secs(8), "failover took {took:?}");
    // ... then the fallback pool ...
    o["127.0.0.21"].stop();
    wait_for("the fallback pool", Duration::from_secs(15), || {
        addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.31"]
    });
    // ... which keeps answering once its own origin is down and voted unhealthy: the fallback
    // pool's "state is not considered when routing" (seed 001) ...
    o["127.0.0.31"].stop();
    wait_for(
        "the fallback's origin voted down",
        Duration::from_secs(15),
        || {
            get(admin, "/status").is_some_and(|s| {
                s["pools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == "last" && p["endpoints"][0]["verdict"] == "unhealthy")
            })
        },
    );
    assert_eq!(
        addresses(&one(dns4, &["www.example.test", "A"])),
        ["127.0.0.31"],
        "the fallback answers whatever its health"
    );
    // ... then nothing once a reload disables the fallback: NODATA with the SOA
    // (docs/design.md#when-nothing-is-left), its TTL the negative TTL.
    let text = std::fs::read_to_string(&config).expect("config");
    let disabled = text.replacen("name = \"last\"\n", "name = \"last\"\nenabled = false\n", 1);
    assert_ne!(text, disabled);
    std::fs::write(&config, &disabled).expect("config");
    nix::sys::signal::kill(aggregator, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("NODATA", Duration::from_secs(15), || {
        let d = one(dns4, &["www.example.test", "A"]);
        d.status == "NOERROR"
            && d.answers.is_empty()
            && d.authority.first().is_some_and(|a| a.0 == "SOA")
    });
    std::fs::write(&config, &text).expect("config");
    nix::sys::signal::kill(aggregator, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the fallback again", Duration::from_secs(15), || {
        addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.31"]
    });
    // Restore the primary: back to it.
    o["127.0.0.11"].start();
    o["127.0.0.12"].start();
    wait_for("the primary pool again", Duration::from_secs(15), || {
        addresses(&one(dns4, &["www.example.test", "A"])) == ["127.0.0.11", "127.0.0.12"]
    });

    // Per-query metrics on the admin API.
    let metrics = scrape(admin);
    for needle in [
        "meshlb_dns_queries_total{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"www.example.test\",qtype=\"A\",rcode=\"NOERROR\"}",
        "load_balancer=\"\",qtype=\"A\",rcode=\"REFUSED\"} 1",
        "meshlb_dns_answer_duration_seconds",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
}

/// The answer's addresses in the order they came.
fn in_order(d: &Dig) -> Vec<String> {
    d.answers.iter().map(|(_, v)| v.clone()).collect()
}

/// Seed 000: a proxied load balancer hides its origins. Two aggregators (PoPs WEU and ENAM)
/// advertise their proxies; DNS answers the proxied name with them, nearest to the client
/// first (by the PoP, or by the ECS subnet's region), never with an origin; a PoP that dies
/// leaves the answer.
#[test]
fn a_proxied_name_resolves_to_the_nearest_live_pops() {
    let (scratch, key) = scratch_dir_with_key("dns-pops");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(
        &config,
        r#"
[[pools]]
name = "web"
origins = [{ name = "o", address = "192.0.2.1" }]
[[zones]]
name = "example.test"
[geolocation]
networks = [{ cidr = "10.2.0.0/16", region = "ENAM" }]
[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["web"]
location_strategy = { prefer_ecs = "always" }
"#,
    )
    .expect("config");
    let (admin_a, admin_b, dns) = (free_tcp(), free_tcp(), free_tcp_and_udp());
    let gossip_a = free_udp();
    let spawn = |region: &str, admin: SocketAddr, listen: SocketAddr, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(["aggregator", "--config", config.to_str().unwrap()])
            .args(["--region", region, "--admin", &admin.to_string()])
            .args(["--proxy", &free_tcp().to_string(), "--proxy-workers", "1"])
            .args([
                "--listen",
                &listen.to_string(),
                "--seed",
                &gossip_a.to_string(),
            ])
            .args([
                "--key-file",
                key.to_str().unwrap(),
                "--gossip-interval-ms",
                "100",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("aggregator")
    };
    let dns_arg = dns.to_string();
    let a = spawn(
        "WEU",
        admin_a,
        gossip_a,
        &[
            "--dns",
            &dns_arg,
            "--dns-sockets",
            "1",
            "--advertise-proxy",
            "127.0.0.11",
        ],
    );
    let b = spawn(
        "ENAM",
        admin_b,
        free_udp(),
        &[
            "--advertise-proxy",
            "127.0.0.12",
            "--advertise-proxy",
            "::1",
        ],
    );
    let mut procs = Procs(vec![a, b]);
    let query = |args: &[&str]| one(dns, args);
    wait_for("both PoPs in the answer", Duration::from_secs(30), || {
        addresses(&query(&["www.example.test", "A"])) == ["127.0.0.11", "127.0.0.12"]
    });
    // Located by the PoP answering (WEU): the WEU PoP first.
    assert_eq!(
        in_order(&query(&["www.example.test", "A"])),
        ["127.0.0.11", "127.0.0.12"]
    );
    // A client subnet in ENAM: the ENAM PoP first, scoped to the network that decided.
    let enam = query(&["+subnet=10.2.3.0/24", "www.example.test", "A"]);
    assert_eq!(in_order(&enam), ["127.0.0.12", "127.0.0.11"]);
    assert_eq!(enam.ecs.as_deref(), Some("10.2.3.0/24/16"), "{enam:?}");
    assert_eq!(
        in_order(&query(&["www.example.test", "AAAA"])),
        ["::1"],
        "the PoPs' IPv6 addresses for AAAA"
    );
    for qtype in ["A", "AAAA", "ANY"] {
        let d = query(&["www.example.test", qtype]);
        assert!(
            !d.answers.iter().any(|(_, v)| v == "192.0.2.1"),
            "an origin revealed for {qtype}: {d:?}"
        );
    }
    // `explain` shows the eligible PoPs and the order.
    let explained =
        get(admin_a, "/explain?lb=www.example.test&mode=dns&pop=ENAM").expect("explain");
    let nodes: Vec<&str> = explained["pops"]
        .as_array()
        .expect("pops")
        .iter()
        .filter_map(|p| p["region"].as_str())
        .collect();
    assert_eq!(nodes, ["ENAM", "WEU"], "{explained}");
    // The ENAM PoP dies: it leaves the answer.
    let _ = procs.0[1].kill();
    let _ = procs.0[1].wait();
    wait_for(
        "the dead PoP out of the answer",
        Duration::from_secs(30),
        || in_order(&query(&["www.example.test", "A"])) == ["127.0.0.11"],
    );
}
