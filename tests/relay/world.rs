//! A mesh whose generations are signed with an Ed25519 writer key (`meshlb config keygen`):
//!
//! - the primary, holding the signing key, its admin API over TLS asking every client for a
//!   certificate of the test CA;
//! - a follower aggregator holding the public key and a client certificate: it fetches from
//!   the primary and relays on its plain admin listener;
//! - a prober holding the public key and no client certificate, so it cannot fetch from the
//!   primary: it takes every generation from the relay, and relays it on its `--metrics`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};
use test_support::pki::{Issued, TestCa};
use test_support::*;

pub static MESH: Shared<RelayMesh> = Shared::new(RelayMesh::start);

pub const TOKEN: &str = "secret-token";
pub const POOLS: &str = "/client/v4/accounts/meshlb/load_balancers/pools";

pub struct RelayMesh {
    pub primary: SocketAddr,
    pub relay: SocketAddr,
    pub prober_metrics: SocketAddr,
    pub ca: PathBuf,
    pub client: Issued,
    pub key: PathBuf,
    pub seed: SocketAddr,
    _procs: Procs,
    pub dir: tempfile::TempDir,
}

pub fn node(args: &[String], what: &str) -> Child {
    spawn_logged(Command::new(meshlb_bin()).args(args), what)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl RelayMesh {
    fn start() -> RelayMesh {
        let (dir, key) = scratch_dir_with_key("relay");
        let d = dir.path();
        let out = Command::new(meshlb_bin())
            .args(["config", "keygen", "--out", &d.display().to_string()])
            .output()
            .expect("meshlb config keygen");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (signing, public_key) = (d.join("signing.key"), d.join("signing.pub"));
        let ca = d.join("ca.pem");
        let test_ca = TestCa::new("relay test CA", &ca);
        let cert = test_ca.server(&["127.0.0.1"], d, "primary");
        let client = test_ca.client(d, "relay-client");
        let (primary, relay, prober_metrics, seed) =
            (free_tcp(), free_tcp(), free_tcp(), free_udp());
        for f in ["primary", "relay", "prober"] {
            std::fs::write(d.join(format!("{f}.toml")), "").expect("config");
        }
        let file = |f: &str| d.join(format!("{f}.toml")).display().to_string();
        let mut args = strings(&[
            "aggregator",
            "--config",
            &file("primary"),
            "--region",
            "WEU",
        ]);
        args.extend(strings(&[
            "--node-id",
            "primary",
            "--admin",
            &primary.to_string(),
        ]));
        args.extend(strings(&["--config-primary", "--config-signing-key"]));
        args.push(signing.display().to_string());
        args.extend(strings(&[
            "--admin-tls-cert",
            &cert.cert.display().to_string(),
        ]));
        args.extend(strings(&[
            "--admin-tls-key",
            &cert.key.display().to_string(),
        ]));
        args.extend(strings(&["--admin-client-ca", &ca.display().to_string()]));
        args.extend(admin_token_args(d));
        args.extend(gossip_args(seed, seed, &key));
        let mut procs = Procs(vec![node(&args, "relay-primary")]);

        let mut args = strings(&["aggregator", "--config", &file("relay"), "--region", "WEU"]);
        args.extend(strings(&[
            "--node-id",
            "relay",
            "--admin",
            &relay.to_string(),
        ]));
        args.extend(strings(&["--config-from-mesh", "--config-verify-key"]));
        args.push(public_key.display().to_string());
        args.extend(strings(&["--config-ca", &ca.display().to_string()]));
        args.extend(strings(&[
            "--config-client-cert",
            &client.cert.display().to_string(),
        ]));
        args.extend(strings(&[
            "--config-client-key",
            &client.key.display().to_string(),
        ]));
        args.extend(admin_token_args(d));
        args.extend(gossip_args(free_udp(), seed, &key));
        procs.0.push(node(&args, "relay-aggregator"));

        let mut args = strings(&["prober", "--config", &file("prober"), "--region", "WEU"]);
        args.extend(strings(&["--dc", "ams", "--node-id", "prober"]));
        args.extend(strings(&["--config-from-mesh", "--config-verify-key"]));
        args.push(public_key.display().to_string());
        args.extend(strings(&["--config-ca", &ca.display().to_string()]));
        args.extend(strings(&["--metrics", &prober_metrics.to_string()]));
        args.extend(gossip_args(free_udp(), seed, &key));
        procs.0.push(node(&args, "relay-prober"));

        let mesh = RelayMesh {
            primary,
            relay,
            prober_metrics,
            ca,
            client,
            key,
            seed,
            _procs: procs,
            dir,
        };
        wait_for("three live members", Duration::from_secs(30), || {
            mesh.generations().len() == 3
        });
        // The primary's first generation (its file) is signed and followed like any other.
        wait_for(
            "every node at the first generation",
            Duration::from_secs(30),
            || {
                let g = mesh.generations();
                g.len() == 3 && g.iter().all(|(_, at)| *at >= 1)
            },
        );
        mesh
    }

    /// curl against the primary's admin API: mTLS and the token.
    pub fn primary_call(&self, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-s",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
        ])
        .args(["--cacert", &self.ca.display().to_string()])
        .args(["--cert", &self.client.cert.display().to_string()])
        .args(["--key", &self.client.key.display().to_string()])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["-H", "Content-Type: application/json"]);
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        let out = cmd
            .arg(format!("https://{}{path}", self.primary))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    /// Each live member's generation, by node id, as the primary sees them.
    pub fn generations(&self) -> Vec<(String, u64)> {
        let (code, body) = self.primary_call("GET", "/members", None);
        if code != 200 {
            return Vec::new();
        }
        live_generations(&serde_json::from_str(&body).unwrap_or_default())
    }

    pub fn generation_of(&self, node: &str) -> u64 {
        self.generations()
            .into_iter()
            .find(|(n, _)| n == node)
            .map_or(0, |(_, g)| g)
    }

    /// Writes a pool on the primary; the generation it made.
    pub fn write_pool(&self, name: &str) -> u64 {
        let pool = json!({ "name": name, "origins": [{ "name": "o", "address": "127.0.5.1" }] });
        let (code, body) = self.primary_call("POST", POOLS, Some(&pool.to_string()));
        assert_eq!(code, 200, "{body}");
        // The primary's own word (gossip may not carry the new generation yet).
        let (_, config) = self.primary_call("GET", "/config", None);
        let config: Value = serde_json::from_str(&config).unwrap_or_default();
        config["result"]["generation"]
            .as_u64()
            .expect("the generation in force")
    }
}

/// A counter's value in Prometheus text, summed over the lines whose labels hold `labels`.
pub fn counter(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
