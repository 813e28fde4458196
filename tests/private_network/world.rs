//! The private network world, in Linux network namespaces joined by a bridge (the chaos
//! suite's recipe, tests/chaos/world.rs): nothing is added to the host's network.
//!
//! - `office`: the private network. Its origin listens on 10.88.0.1, an address only its own
//!   namespace has (on `lo`); no other namespace has a route to 10.88.0.0/16, so the origin
//!   is reachable from inside the office alone. Two replicas of one connector run there, with
//!   outbound reach to the PoPs over the bridge and nothing listening for them.
//! - `pop1`: an aggregator (WEU) with a tunnel listener, the proxy, DNS and layer 4: the PoP
//!   the connectors dial and hold their tunnel at.
//! - `pop2`: an aggregator (ENAM) with the proxy and layer 4 and no tunnel listener: it
//!   reaches the office through pop1 (PoP to PoP).
//! - `probers`: three probers of WEU, probing the private endpoint through pop1.
//! - `public`: the fallback pool's origin; `client`: where requests come from.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::origins::{self, Latency, Origin};
use crate::world::{self, World};
use test_support::{meshlb_bin, wait_for, Shared};

pub static WORLD: Shared<Private> = Shared::new(Private::start);

pub const TUNNEL: &str = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
const NETWORK: &str = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4";
const SECRET: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// Another secret for the same tunnel: a token made with it is a wrong token.
const WRONG_SECRET: &str = "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
/// The private origin's address, inside the office only.
pub const OFFICE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 1);
pub const ORIGIN_PORT: u16 = 8001;
/// The layer-4 load balancer's port on each PoP.
pub const L4_PORT: u16 = 7000;
pub const INTERVAL_S: u64 = 1;
pub const CONSECUTIVE_DOWN: u64 = 2;
/// The product's promise for a tunnel gone: interval x consecutive_down + 1 s.
pub const BOUND: Duration = Duration::from_secs(INTERVAL_S * CONSECUTIVE_DOWN + 1);

/// The replicas of the office's connector, as nodes of the world.
pub const REPLICAS: [&str; 2] = ["connector-a", "connector-b"];

pub struct Private {
    pub world: World,
    _office: Origin,
    _fallback: Origin,
    /// pop1's and pop2's addresses.
    pub pop: [Ipv4Addr; 2],
    /// The fallback pool's origin.
    pub public: Ipv4Addr,
    dir: PathBuf,
}

/// The config every node reads: a tunnel, its virtual network and a route of 10.88.0.0/24;
/// pool `office` (its one endpoint private) with pool `fallback` behind it, under a proxied
/// load balancer, a DNS-only one and a layer-4 one.
fn config(public: Ipv4Addr, secret: &str) -> String {
    format!(
        r#"
[[monitors]]
name = "http"
type = "http"
path = "/healthz"
port = {ORIGIN_PORT}
interval = {INTERVAL_S}
timeout = 1
retries = 0
consecutive_down = {CONSECUTIVE_DOWN}
consecutive_up = 1

[[tunnels]]
id = "{TUNNEL}"
name = "office"
tunnel_secret = "{secret}"

[[virtual_networks]]
id = "{NETWORK}"
name = "office"
is_default_network = true

[[routes]]
network = "10.88.0.0/24"
tunnel_id = "{TUNNEL}"

[[pools]]
name = "office"
monitor = "http"
origins = [{{ name = "office-1", address = "{OFFICE_ADDR}", port = {ORIGIN_PORT}, virtual_network_id = "{NETWORK}" }}]

[[pools]]
name = "fallback"
monitor = "http"
origins = [{{ name = "static", address = "{public}", port = {ORIGIN_PORT} }}]

[[load_balancers]]
name = "office.private.test"
proxied = true
default_pools = ["office"]
fallback_pool = "fallback"

[[load_balancers]]
name = "office-dns.private.test"
ttl = 5
default_pools = ["office"]
fallback_pool = "fallback"

[[load_balancers]]
name = "office-tcp.private.test"
protocol = "tcp"
listen = [{L4_PORT}]
default_pools = ["office"]
"#
    )
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Private {
    fn start() -> Private {
        let mut world = World::new();
        let dir = world.dir.clone();
        let pop = [world.site("pop1", 0)[0], world.site("pop2", 0)[0]];
        let probers = world.site("probers", 0)[0];
        world.site("office", 0);
        let public = world.site("public", 0)[0];
        world.site("client", 0);
        world::ip(&[
            "-n",
            world.netns("office"),
            "addr",
            "add",
            &format!("{OFFICE_ADDR}/32"),
            "dev",
            "lo",
        ]);
        let latency = Arc::new(Latency::default());
        let office = origins::start(
            world.netns("office"),
            SocketAddr::new(OFFICE_ADDR.into(), ORIGIN_PORT),
            "office-1",
            "eu",
            Arc::clone(&latency),
        );
        let fallback = origins::start(
            world.netns("public"),
            SocketAddr::new(public.into(), ORIGIN_PORT),
            "static",
            "eu",
            latency,
        );
        let config = dir.join("meshlb.toml");
        std::fs::write(&config, self::config(public, SECRET)).expect("config");
        let key = dir.join("cluster.key");
        std::fs::write(&key, "the private network world's cluster key").expect("key");
        let token = dir.join("admin.token");
        std::fs::write(&token, world::TOKEN).expect("token");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let pop_cert = rcgen::generate_simple_self_signed(vec!["pop.test".into()]).expect("cert");
        std::fs::write(dir.join("pop.pem"), pop_cert.cert.pem()).expect("cert");
        std::fs::write(dir.join("pop.key"), pop_cert.signing_key.serialize_pem()).expect("key");

        let common = |listen: String, seed: Ipv4Addr| {
            let mut v = strings(&["--config", &config.display().to_string()]);
            v.extend(strings(&[
                "--listen",
                &listen,
                "--seed",
                &format!("{seed}:7946"),
                "--key-file",
                &key.display().to_string(),
                "--gossip-interval-ms",
                "200",
            ]));
            v
        };
        for (i, (region, dc)) in [("WEU", "ams"), ("ENAM", "iad")].iter().enumerate() {
            let a = pop[i];
            let mut v = strings(&[
                "aggregator",
                "--region",
                region,
                "--dc",
                dc,
                "--admin",
                &format!("{a}:9090"),
                "--admin-token-file",
                &token.display().to_string(),
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
            ]);
            if i == 0 {
                v.extend(strings(&[
                    "--tunnel-listen",
                    &format!("{a}:7844"),
                    "--tunnel-cert",
                    &dir.join("pop.pem").display().to_string(),
                    "--tunnel-key",
                    &dir.join("pop.key").display().to_string(),
                ]));
            }
            v.extend(common(format!("{a}:7946"), pop[1 - i]));
            world.run(&format!("pop{}", i + 1), &format!("pop{}", i + 1), v);
        }
        for (k, dc) in ["ams", "fra", "lhr"].iter().enumerate() {
            let mut v = strings(&["prober", "--region", "WEU", "--dc", dc]);
            v.extend(common(format!("{probers}:{}", 7946 + k), pop[0]));
            world.run(&format!("prober-{dc}"), "probers", v);
        }
        let mut private = Private {
            world,
            _office: office,
            _fallback: fallback,
            pop,
            public,
            dir,
        };
        let token = private.token_file("office.token", &config);
        for replica in REPLICAS {
            let args = strings(&[
                "tunnel",
                "run",
                "--token-file",
                &token.display().to_string(),
            ]);
            private.world.run(replica, "office", args);
        }
        private.wait_connections(4);
        wait_for(
            "the private endpoint healthy on both PoPs",
            Duration::from_secs(60),
            || (0..2).all(|p| private.verdict(p, "office-1").as_deref() == Some("healthy")),
        );
        private
    }

    /// The connector's token as `meshlb tunnel token` makes it from `config`, for pop1,
    /// pinning its tunnel certificate, written to `name` in the world's directory.
    pub fn token_file(&self, name: &str, config: &std::path::Path) -> PathBuf {
        let out = Command::new(meshlb_bin())
            .args(["tunnel", "token", "--config"])
            .arg(config)
            .args([
                "--tunnel",
                "office",
                "--pop",
                &format!("{}:7844", self.pop[0]),
            ])
            .arg("--pop-cert")
            .arg(self.dir.join("pop.pem"))
            .output()
            .expect("meshlb tunnel token");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = self.dir.join(name);
        std::fs::write(&file, &out.stdout).expect("token file");
        file
    }

    /// A token for the office tunnel made with a secret that is not its own.
    pub fn wrong_token_file(&self) -> PathBuf {
        let config = self.dir.join("wrong-secret.toml");
        std::fs::write(&config, self::config(self.public, WRONG_SECRET)).expect("config");
        self.token_file("wrong.token", &config)
    }

    /// The office token's file, as the replicas run it.
    pub fn office_token(&self) -> PathBuf {
        self.dir.join("office.token")
    }

    pub fn admin(&self, pop: usize) -> SocketAddr {
        SocketAddr::new(self.pop[pop].into(), 9090)
    }

    /// The verdict PoP `pop` gives endpoint `name`.
    pub fn verdict(&self, pop: usize, name: &str) -> Option<String> {
        let s = self.world.json("client", self.admin(pop), "/status")?;
        s["pools"]
            .as_array()?
            .iter()
            .flat_map(|p| p["endpoints"].as_array().into_iter().flatten())
            .find(|e| e["name"] == name)
            .and_then(|e| e["verdict"].as_str().map(str::to_string))
    }

    /// The office tunnel's live connections at pop1, as its API lists them.
    pub fn connections(&self) -> usize {
        self.tunnel(0)
            .and_then(|t| t["connections"].as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// The office tunnel as PoP `pop`'s API gives it.
    pub fn tunnel(&self, pop: usize) -> Option<serde_json::Value> {
        self.world
            .json(
                "client",
                self.admin(pop),
                &format!("/accounts/a/cfd_tunnel/{TUNNEL}"),
            )
            .map(|t| t["result"].clone())
    }

    pub fn wait_connections(&self, n: usize) {
        wait_for(
            &format!("{n} tunnel connections at pop1"),
            Duration::from_secs(30),
            || self.connections() == n,
        );
    }

    /// pop1's count of connectors refused for `reason`, from its metrics.
    pub fn refused(&self, reason: &str) -> u64 {
        let (_, text) = self.world.admin_get("client", self.admin(0), "/metrics");
        let label = format!("reason=\"{reason}\"");
        text.lines()
            .filter(|l| {
                l.starts_with("meshlb_tunnel_connectors_refused_total{") && l.contains(&label)
            })
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum()
    }

    /// `GET /` for office.private.test through PoP `pop`'s proxy, from the client: (status,
    /// body without its newline).
    pub fn proxied(&self, pop: usize) -> (u16, String) {
        let (code, body) = self.world.http(
            "client",
            SocketAddr::new(self.pop[pop].into(), 8080),
            "/",
            "office.private.test",
        );
        (code, body.trim().to_string())
    }

    /// Every replica running and the tunnel's four connections back; the office endpoint
    /// healthy on both PoPs.
    pub fn put_back(&mut self) {
        for replica in REPLICAS {
            self.world.node(replica).start();
        }
        self.wait_connections(4);
        wait_for(
            "the private endpoint healthy again",
            Duration::from_secs(30),
            || (0..2).all(|p| self.verdict(p, "office-1").as_deref() == Some("healthy")),
        );
    }
}
