//! A mesh whose control paths all run over TLS, with certificates from a test CA:
//!
//! - the config primary, its admin API over TLS asking every client for a certificate the
//!   CA signed (`--admin-client-ca`) and holding no token: mTLS instead of tokens;
//! - a follower aggregator, its admin API over TLS with a write and a read token, fetching
//!   the config over https with the CA (`--config-ca`) and a client certificate;
//! - a prober pinning the primary's key (`--config-pin`) instead of trusting a CA;
//! - a prober trusting another CA, which the primary's certificate does not chain to, its
//!   `/metrics` listener over TLS.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use test_support::pki::{Issued, TestCa};
use test_support::*;

pub static MESH: Shared<Mesh> = Shared::new(Mesh::start);

pub struct Mesh {
    pub dir: tempfile::TempDir,
    pub ca: TestCa,
    pub ca_file: PathBuf,
    /// A client certificate the CA signed.
    pub client: Issued,
    pub primary: SocketAddr,
    pub follower: SocketAddr,
    /// The follower's admin certificate (a trial renews it).
    pub follower_cert: Issued,
    /// The follower's write-token file (a trial rotates it); its read token is `READ_TOKEN`.
    pub follower_token: PathBuf,
    /// The rogue prober's `/metrics` listener (TLS).
    pub rogue_metrics: SocketAddr,
    /// The primary, the follower, the pinning prober, the rogue prober.
    pub procs: Procs,
}

pub const READ_TOKEN: &str = "read-token";

fn node(args: &[String], what: &str) -> std::process::Child {
    spawn_logged(Command::new(meshlb_bin()).args(args), what)
}

fn tls_args(cert: &Issued) -> Vec<String> {
    vec![
        "--admin-tls-cert".into(),
        cert.cert.display().to_string(),
        "--admin-tls-key".into(),
        cert.key.display().to_string(),
    ]
}

fn fetch_args(trust: &[&str], client: &Issued) -> Vec<String> {
    let mut args: Vec<String> = trust.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--config-from-mesh".into(),
        "--config-client-cert".into(),
        client.cert.display().to_string(),
        "--config-client-key".into(),
        client.key.display().to_string(),
    ]);
    args
}

fn secret_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join(name);
    std::fs::write(&file, text).expect("token file");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    file
}

impl Mesh {
    fn start() -> Mesh {
        let (dir, key) = scratch_dir_with_key("tls");
        let d = dir.path();
        let ca_file = d.join("ca.pem");
        let ca = TestCa::new("meshlb test CA", &ca_file);
        let rogue_ca_file = d.join("rogue-ca.pem");
        let rogue_ca = TestCa::new("another CA", &rogue_ca_file);
        let names = ["127.0.0.1", "localhost"];
        let primary_cert = ca.server(&names, d, "primary");
        let follower_cert = ca.server(&names, d, "follower");
        let rogue_cert = rogue_ca.server(&names, d, "rogue");
        let client = ca.client(d, "client");
        let (primary, follower, rogue_metrics) = (free_tcp(), free_tcp(), free_tcp());
        let seed = free_udp();
        for name in ["primary", "follower", "pinned", "rogue"] {
            std::fs::write(d.join(format!("{name}.toml")), "").expect("config");
        }
        let config = |name: &str| d.join(format!("{name}.toml")).display().to_string();

        let mut args: Vec<String> = ["aggregator", "--config", &config("primary")]
            .into_iter()
            .chain(["--region", "WEU", "--admin", &primary.to_string()])
            .chain(["--config-primary", "--node-id", "primary"])
            .chain(["--admin-client-ca", &ca_file.display().to_string()])
            .map(String::from)
            .collect();
        args.extend(tls_args(&primary_cert));
        args.extend(gossip_args(seed, seed, &key));
        let mut procs = Procs(vec![node(&args, "primary")]);

        let follower_token = secret_file(d, "follower-token", "first-token");
        let read_token = secret_file(d, "follower-read-token", READ_TOKEN);
        let mut args: Vec<String> = ["aggregator", "--config", &config("follower")]
            .into_iter()
            .chain(["--region", "WEU", "--admin", &follower.to_string()])
            .chain(["--node-id", "follower"])
            .map(String::from)
            .collect();
        args.extend(tls_args(&follower_cert));
        args.extend([
            "--admin-token-file".into(),
            follower_token.display().to_string(),
        ]);
        args.extend([
            "--admin-read-token-file".into(),
            read_token.display().to_string(),
        ]);
        args.extend(fetch_args(
            &["--config-ca", &ca_file.display().to_string()],
            &client,
        ));
        args.extend(gossip_args(free_udp(), seed, &key));
        procs.0.push(node(&args, "follower"));

        let prober = |name: &str, dc: &str| -> Vec<String> {
            [
                "prober",
                "--config",
                &config(name),
                "--region",
                "WEU",
                "--dc",
                dc,
            ]
            .into_iter()
            .chain(["--node-id", name])
            .map(String::from)
            .collect()
        };
        let mut args = prober("pinned", "ams");
        args.extend(fetch_args(&["--config-pin", &primary_cert.pin], &client));
        args.extend(gossip_args(free_udp(), seed, &key));
        procs.0.push(node(&args, "pinned"));

        let mut args = prober("rogue", "fra");
        args.extend(fetch_args(
            &["--config-ca", &rogue_ca_file.display().to_string()],
            &client,
        ));
        args.extend(["--metrics".into(), rogue_metrics.to_string()]);
        args.extend(tls_args(&rogue_cert));
        args.extend(gossip_args(free_udp(), seed, &key));
        procs.0.push(node(&args, "rogue"));

        let mesh = Mesh {
            ca,
            ca_file,
            client,
            primary,
            follower,
            follower_cert,
            follower_token,
            rogue_metrics,
            procs,
            dir,
        };
        wait_for("every node in the mesh", Duration::from_secs(60), || {
            mesh.live_members().len() == 4
        });
        mesh
    }

    /// curl's arguments trusting the test CA and presenting the client certificate.
    pub fn curl_mtls(&self) -> Vec<String> {
        vec![
            "--cacert".into(),
            self.ca_file.display().to_string(),
            "--cert".into(),
            self.client.cert.display().to_string(),
            "--key".into(),
            self.client.key.display().to_string(),
        ]
    }

    /// The primary's `/members`, live ones, over mTLS.
    pub fn live_members(&self) -> Vec<Value> {
        let (code, body) = curl(
            &self.curl_mtls(),
            &format!("https://{}/members", self.primary),
        );
        if code != 200 {
            return Vec::new();
        }
        let members: Value = serde_json::from_str(&body).unwrap_or_default();
        members
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m["alive"] == Value::Bool(true))
            .collect()
    }

    /// Each live node's generation, by node id.
    pub fn generations(&self) -> Vec<(String, Option<u64>)> {
        self.live_members()
            .iter()
            .map(|m| {
                (
                    m["node_id"].as_str().unwrap_or_default().to_string(),
                    m["config_generation"].as_u64(),
                )
            })
            .collect()
    }

    /// The follower aggregator's process id (for SIGHUP).
    pub fn follower_pid(&self) -> u32 {
        self.procs.0[1].id()
    }
}

/// `curl -s` with `args` on `url`: (HTTP status, 0 when nothing answered; the body).
pub fn curl(args: &[String], url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Sends SIGHUP to `pid`.
pub fn hangup(pid: u32) {
    let status = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -HUP {pid}");
}
