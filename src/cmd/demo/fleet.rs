//! The demo's processes: one aggregator and 39 probers (13 regions x 3 datacenters), each a
//! real `meshlb` process with its own log, stopped together.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use lb_core::RegionsTable;

use super::Args;

/// Child processes, stopped (SIGTERM, then SIGKILL after 5 s) when dropped — also on errors.
pub struct Fleet(pub Vec<(String, Child)>);

impl Drop for Fleet {
    fn drop(&mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        for (_, c) in &self.0 {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        for (_, c) in &mut self.0 {
            while std::time::Instant::now() < deadline {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(exe: &Path, args: &[String], log: &Path) -> anyhow::Result<Child> {
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))
}

impl Fleet {
    /// A child that has exited, and how.
    pub fn exited(&mut self) -> Option<(String, std::process::ExitStatus)> {
        self.0
            .iter_mut()
            .find_map(|(what, child)| match child.try_wait() {
                Ok(Some(status)) => Some((what.clone(), status)),
                _ => None,
            })
    }
}

/// Writes the config and the cluster key into `dir` and starts every node on them.
pub fn start(
    args: &Args,
    regions: &RegionsTable,
    dir: &Path,
    text: &str,
    parsed: &lb_core::config::Config,
) -> anyhow::Result<Fleet> {
    std::fs::create_dir_all(dir.join("logs"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let config = dir.join("meshlb.toml").display().to_string();
    std::fs::write(&config, text)?;
    let key = dir.join("cluster.key");
    std::fs::write(&key, "meshlb demo cluster key (loopback only)\n")?;
    let exe = std::env::current_exe().context("cannot find the meshlb binary")?;
    let seed = format!("127.0.0.1:{}", args.gossip_port);
    let key = key.display().to_string();
    let mesh = |listen: u16| -> Vec<String> {
        let listen = format!("127.0.0.1:{listen}");
        let gossip = ["--listen", &listen, "--seed", &seed, "--key-file", &key];
        let mut flags: Vec<String> = gossip.iter().map(|s| s.to_string()).collect();
        flags.extend(["--gossip-interval-ms".into(), "200".into()]);
        flags
    };
    let (admin, dns, proxy) = (
        args.admin.to_string(),
        args.dns.to_string(),
        args.proxy.to_string(),
    );
    let proxy_ip = args.proxy.ip().to_string();
    let mut fleet = Fleet(Vec::new());
    let mut agg: Vec<String> = [
        "aggregator",
        "--config",
        &config,
        "--region",
        "WEU",
        "--dc",
        "ams",
        "--admin",
        &admin,
        "--dns",
        &dns,
        "--proxy",
        &proxy,
        "--proxy-workers",
        "1",
        "--dns-sockets",
        "1",
        // The proxied www.demo.test resolves to this PoP, never to an origin.
        "--advertise-proxy",
        &proxy_ip,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    agg.extend(mesh(args.gossip_port));
    let pin = tunnel_cert(dir, &mut agg, args.tunnel)?;
    let log = dir.join("logs/aggregator.log");
    fleet
        .0
        .push(("aggregator".into(), spawn(&exe, &agg, &log)?));
    // One connector per tunnel, dialing the aggregator: the private pool's way in.
    for t in &parsed.private.tunnels {
        let secret: [u8; 32] = t.secret[..32].try_into().context("a tunnel secret")?;
        let token = tunnel::Token {
            account: "demo".into(),
            tunnel: t.id.parse()?,
            secret: tunnel::TunnelSecret(secret),
            pops: vec![args.tunnel.to_string()],
            pin: Some(pin.to_string()),
        };
        let token_file = dir.join(format!("{}.token", t.name));
        std::fs::write(&token_file, token.encode())?;
        let run = [
            "tunnel",
            "run",
            "--token-file",
            &token_file.display().to_string(),
        ]
        .map(String::from);
        let log = dir.join(format!("logs/connector-{}.log", t.name));
        fleet
            .0
            .push((format!("connector {}", t.name), spawn(&exe, &run, &log)?));
    }
    let mut port = args.gossip_port;
    for r in regions.regions() {
        for dc in r.datacenters.iter().take(3) {
            port += 1;
            let region = r.region.code();
            let mut a: Vec<String> = [
                "prober", "--config", &config, "--region", region, "--dc", &dc.code,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(mesh(port));
            let log = dir.join(format!("logs/prober-{region}-{}.log", dc.code));
            fleet.0.push((
                format!("prober {region}/{}", dc.code),
                spawn(&exe, &a, &log)?,
            ));
        }
    }
    Ok(fleet)
}

/// A self-signed certificate for the aggregator's tunnel listener (its flags added to
/// `agg`); connectors pin its key.
fn tunnel_cert(
    dir: &Path,
    agg: &mut Vec<String>,
    listen: std::net::SocketAddr,
) -> anyhow::Result<lb_tls::pin::SpkiPin> {
    let cert = rcgen::generate_simple_self_signed(vec!["pop.demo.test".into()])?;
    let (cert_file, key_file) = (dir.join("tunnel.pem"), dir.join("tunnel.key"));
    std::fs::write(&cert_file, cert.cert.pem())?;
    std::fs::write(&key_file, cert.signing_key.serialize_pem())?;
    agg.extend([
        "--tunnel-listen".into(),
        listen.to_string(),
        "--tunnel-cert".into(),
        cert_file.display().to_string(),
        "--tunnel-key".into(),
        key_file.display().to_string(),
    ]);
    lb_tls::pin::SpkiPin::of_certificate(cert.cert.der())
        .context("the tunnel certificate's key pin")
}
