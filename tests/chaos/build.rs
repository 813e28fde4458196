//! Building the world: the sites, the origins, the configuration, two aggregators (agg1 the
//! config primary) and 39 probers.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lb_core::regions_table::RegionsTable;
use test_support::config::{Config, Endpoint, Lb, Monitor, Pool};

use crate::mesh::Mesh;
use crate::origins::{self, Latency, Origin};
use crate::world::{self, World};
use crate::{CONSECUTIVE, GOSSIP_MS, INTERVAL_S};

/// Which configuration the world runs: the one it starts with, or a trial's change of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Original,
    /// The fallback pool disabled.
    FallbackDisabled,
    /// eu-2 at weight 0.5 and fo.chaos.test's TTL 6 (the whole-mesh write).
    Changed,
}

/// The world's configuration: pools eu, us, ap (two origins each) and a fallback, one monitor,
/// load balancers for DNS failover (fo), dynamic steering (dyn), the proxy (www) and layer 4
/// (tcp). Origin names are the keys of `addr`; every origin listens on port 8001.
pub fn config(addr: &BTreeMap<String, Ipv4Addr>, variant: Variant) -> String {
    let origin = |n: &str| Endpoint::new(n, (addr[n], 8001));
    let pool = |name: &str, origins: [&str; 2], at: (f64, f64)| {
        let p = Pool::new(name).monitor("http").at(at.0, at.1);
        origins.iter().fold(p, |p, n| {
            let e = origin(n);
            p.endpoint(if *n == "eu-2" && variant == Variant::Changed {
                e.weight(0.5)
            } else {
                e
            })
        })
    };
    let lb = |name: &str| {
        Lb::new(name)
            .pools(&["eu", "us", "ap"])
            .fallback("fallback")
    };
    let fo_ttl = if variant == Variant::Changed { 6 } else { 5 };
    let fallback = Pool::new("fallback").monitor("http");
    let fallback = if variant == Variant::FallbackDisabled {
        fallback.enabled(false)
    } else {
        fallback
    };
    Config::new()
        .monitor(
            Monitor::http("http")
                .path("/healthz")
                .port(8001)
                .interval(INTERVAL_S)
                .timeout(1)
                .retries(0)
                .consecutive(CONSECUTIVE, CONSECUTIVE),
        )
        .pool(pool("eu", ["eu-1", "eu-2"], (50.1, 8.7)))
        .pool(pool("us", ["us-1", "us-2"], (39.0, -77.5)))
        .pool(pool("ap", ["ap-1", "ap-2"], (1.35, 103.8)))
        .pool(fallback.endpoint(origin("static")))
        .load_balancer(lb("fo.chaos.test").ttl(fo_ttl))
        .load_balancer(lb("dyn.chaos.test").steering("dynamic_latency").ttl(5))
        .load_balancer(lb("www.chaos.test").proxied())
        .load_balancer(
            lb("tcp.chaos.test")
                .protocol("tcp")
                .listen(&[7000])
                .origin_port(8001),
        )
        .render()
}

/// The whole world, started: every process running, nothing yet waited for.
pub fn build() -> Mesh {
    let regions = RegionsTable::embedded().expect("regions");
    let mut world = World::new();
    let latency = Arc::new(Latency::default());
    let region_addr = region_sites(&mut world, &regions);
    let addr = origin_sites(&mut world);
    let agg = [world.site("agg1", 0)[0], world.site("agg2", 0)[0]];
    world.site("client", 0);
    place_askers(&latency, &region_addr, agg);
    let origins = start_origins(&world, &addr, &latency);
    let config = world.dir.join("meshlb.toml");
    std::fs::write(&config, self::config(&addr, Variant::Original)).expect("config");
    let args = Args::new(&world, &config, agg);
    world.admin_tls = Some(
        lb_tls::ClientTrust {
            ca_file: Some(args.ca.clone()),
            ..lb_tls::ClientTrust::default()
        }
        .config()
        .expect("the admin client's TLS"),
    );
    start_aggregators(&mut world, &args, agg);
    let probers = start_probers(&mut world, &args, &regions, &region_addr, agg);
    Mesh {
        world,
        origins,
        latency,
        config,
        addr,
        agg,
        probers,
    }
}

/// One site per region (its probers' namespace): region code -> its address.
fn region_sites(world: &mut World, regions: &RegionsTable) -> BTreeMap<String, Ipv4Addr> {
    let mut region_addr = BTreeMap::new();
    for r in regions.regions() {
        let a = world.site(&r.region.code().to_ascii_lowercase(), 0)[0];
        region_addr.insert(r.region.code().to_string(), a);
    }
    region_addr
}

/// One site per continent, one address per origin: origin name -> its address.
fn origin_sites(world: &mut World) -> BTreeMap<String, Ipv4Addr> {
    let mut addr = BTreeMap::new();
    for (site, names) in [
        ("eu", vec!["eu-1", "eu-2"]),
        ("us", vec!["us-1", "us-2"]),
        ("ap", vec!["ap-1", "ap-2", "static"]),
    ] {
        let addrs = world.site(site, names.len() - 1);
        for (n, a) in names.iter().zip(addrs) {
            addr.insert(n.to_string(), a);
        }
    }
    addr
}

/// Tells the origins which region each asker's address is in (the probers' by their region,
/// agg1 WEU, agg2 ENAM), so they delay answers by that region's round-trip time.
fn place_askers(latency: &Latency, region_addr: &BTreeMap<String, Ipv4Addr>, agg: [Ipv4Addr; 2]) {
    let mut m = latency.regions.write().expect("lock");
    for (code, a) in region_addr {
        let code: &'static str = origins::RTT_MS
            .iter()
            .find(|(c, _)| c == code)
            .map_or("WEU", |(c, _)| c);
        m.insert(*a, code);
    }
    m.insert(agg[0], "WEU");
    m.insert(agg[1], "ENAM");
}

/// Starts every origin in its continent's site (`static`, the fallback's, in ap's).
fn start_origins(
    world: &World,
    addr: &BTreeMap<String, Ipv4Addr>,
    latency: &Arc<Latency>,
) -> BTreeMap<String, Origin> {
    let mut origin_map = BTreeMap::new();
    for (name, a) in addr {
        let continent = if name.starts_with("eu") {
            "eu"
        } else if name.starts_with("us") {
            "us"
        } else {
            "ap"
        };
        let site = if name == "static" { "ap" } else { continent };
        origin_map.insert(
            name.clone(),
            origins::start(
                world.netns(site),
                SocketAddr::new((*a).into(), 8001),
                name,
                continent,
                Arc::clone(latency),
            ),
        );
    }
    origin_map
}

/// What every node's arguments share. agg1 is the config primary (its file is the mesh's
/// config); agg2 and every prober follow it from an empty start
/// (docs/api.md#one-config-for-the-mesh).
///
/// Every control path runs over TLS, as across the internet: both admin APIs serve a
/// certificate of the suite's CA (for both aggregators' addresses), and the followers fetch
/// the config over https, verifying it against that CA (docs/security.md).
struct Args {
    config: PathBuf,
    token: PathBuf,
    key: PathBuf,
    dir: PathBuf,
    /// The suite's CA, and the aggregators' admin certificate.
    ca: PathBuf,
    admin_cert: test_support::pki::Issued,
}

impl Args {
    fn new(world: &World, config: &Path, agg: [Ipv4Addr; 2]) -> Args {
        let key = world.dir.join("cluster.key");
        std::fs::write(&key, "the meshlb chaos suite cluster key").expect("key");
        let token = world.dir.join("admin.token");
        std::fs::write(&token, world::TOKEN).expect("token");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let ca = world.dir.join("ca.pem");
        let names = [agg[0].to_string(), agg[1].to_string()];
        let admin_cert = test_support::pki::TestCa::new("meshlb chaos CA", &ca).server(
            &[&names[0], &names[1]],
            &world.dir,
            "admin",
        );
        Args {
            config: config.to_path_buf(),
            token,
            key,
            dir: world.dir.clone(),
            ca,
            admin_cert,
        }
    }

    /// The config and gossip arguments of node `name`, listening on `listen`, seeded by `seeds`.
    fn common(&self, name: &str, listen: String, seeds: &[Ipv4Addr]) -> Vec<String> {
        let mut v = if name == "agg1" {
            vec![
                "--config".to_string(),
                self.config.display().to_string(),
                "--config-primary".into(),
                "--admin-token-file".into(),
                self.token.display().to_string(),
            ]
        } else {
            vec![
                "--config".to_string(),
                self.dir.join(format!("{name}.toml")).display().to_string(),
                "--config-from-mesh".into(),
                "--config-ca".into(),
                self.ca.display().to_string(),
            ]
        };
        v.extend([
            "--listen".into(),
            listen,
            "--key-file".into(),
            self.key.display().to_string(),
            "--gossip-interval-ms".into(),
            GOSSIP_MS.to_string(),
        ]);
        // The whole suite over bounded gossip (docs/chaos.md).
        if let Ok(max) = std::env::var("MESHLB_CHAOS_GOSSIP_MAX_DATAGRAM") {
            v.extend(["--gossip-max-datagram".into(), max]);
        }
        for s in seeds {
            v.push("--seed".into());
            v.push(format!("{s}:7946"));
        }
        v
    }
}

/// agg1 (WEU, ams) and agg2 (ENAM, iad), each serving DNS, the proxy, layer 4 and its admin
/// API on its own address, seeded by the other.
fn start_aggregators(world: &mut World, args: &Args, agg: [Ipv4Addr; 2]) {
    for (i, (region, dc)) in [("WEU", "ams"), ("ENAM", "iad")].iter().enumerate() {
        let a = agg[i];
        let name = format!("agg{}", i + 1);
        let mut v: Vec<String> = [
            "aggregator",
            "--region",
            region,
            "--dc",
            dc,
            "--admin",
            &format!("{a}:9090"),
            "--dns",
            &format!("{a}:53"),
            "--proxy",
            &format!("{a}:8080"),
            "--l4",
            &a.to_string(),
            "--proxy-workers",
            "1",
            "--dns-sockets",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend([
            "--admin-tls-cert".into(),
            args.admin_cert.cert.display().to_string(),
            "--admin-tls-key".into(),
            args.admin_cert.key.display().to_string(),
        ]);
        v.extend(args.common(&name, format!("{a}:7946"), &[agg[1 - i]]));
        world.run(&name, &name, v);
    }
}

/// Three probers per region (its first three datacenters), in the region's site, seeded by
/// both aggregators: region code -> the probers' node names.
fn start_probers(
    world: &mut World,
    args: &Args,
    regions: &RegionsTable,
    region_addr: &BTreeMap<String, Ipv4Addr>,
    agg: [Ipv4Addr; 2],
) -> BTreeMap<String, Vec<String>> {
    let mut probers = BTreeMap::new();
    for r in regions.regions() {
        let code = r.region.code();
        let site = code.to_ascii_lowercase();
        for (k, dc) in r.datacenters.iter().take(3).enumerate() {
            let name = format!("prober-{site}-{}", dc.code);
            let mut v = vec![
                "prober".to_string(),
                "--region".into(),
                code.to_string(),
                "--dc".into(),
                dc.code.clone(),
            ];
            v.extend(args.common(&name, format!("{}:{}", region_addr[code], 7946 + k), &agg));
            world.run(&name, &site, v);
            probers
                .entry(code.to_string())
                .or_insert_with(Vec::new)
                .push(name);
        }
    }
    probers
}
