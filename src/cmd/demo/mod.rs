//! `meshlb demo`: a whole mesh on this machine in one command — demo origins (steady, one
//! flapping, one slow), 39 probers (13 regions x 3 datacenters, each a real `meshlb prober`
//! process and chitchat member probing over loopback) and an aggregator serving DNS, the proxy
//! and the admin API — with a live terminal view and commands to stop and start origins. The
//! origins (`tests/support/src/demo_origins.rs`) answer probes with each region's emulated
//! round-trip time (`tests/support/src/latency.rs`), so latency steering picks the nearest
//! real pool.

mod fleet;
mod view;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use lb_core::RegionsTable;
use serde_json::Value;

use test_support::demo_origins::{Behaviour, Origins};

/// The demo's configuration (also `deploy/examples/demo.toml`).
const DEMO_CONFIG: &str = include_str!("../../../deploy/examples/demo.toml");
/// The port the embedded config gives every origin.
const DEMO_ORIGIN_PORT: u16 = 18001;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run another configuration instead of the embedded demo (its origins must be IP
    /// addresses on this machine, served by the demo).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Authoritative DNS address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:5353")]
    dns: SocketAddr,
    /// HTTP proxy address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    proxy: SocketAddr,
    /// Admin API and /metrics address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    admin: SocketAddr,
    /// The aggregator takes tunnel connectors here; the demo runs one per tunnel of the config.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7844")]
    tunnel: SocketAddr,
    /// The aggregator gossips on this UDP port of 127.0.0.1, the probers on the next 39.
    #[arg(long, value_name = "PORT", default_value_t = 17946)]
    gossip_port: u16,
    /// The port of the demo origins (on 127.0.1.x).
    #[arg(long, value_name = "PORT", default_value_t = DEMO_ORIGIN_PORT)]
    origin_port: u16,
    /// Stop this origin once every endpoint is healthy, to watch a failover (repeatable).
    #[arg(long = "kill-origin", value_name = "NAME")]
    kill_origin: Vec<String>,
    /// Print changes as lines instead of redrawing the view (for logs and scripts).
    #[arg(long)]
    no_view: bool,
    /// The flapping origin (eu-2) passes its health check for UP seconds, then fails it for
    /// DOWN seconds, over and over.
    #[arg(long, value_name = "UP,DOWN", default_value = "40,20", value_parser = parse_flap)]
    flap: (Duration, Duration),
}

fn parse_flap(s: &str) -> Result<(Duration, Duration), String> {
    let (up, down) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected UP,DOWN in seconds, e.g. 40,20"))?;
    let secs = |v: &str, what: &str| match v.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
        _ => Err(format!(
            "`{s}`: {what} must be a whole number of seconds above 0"
        )),
    };
    Ok((secs(up, "UP")?, secs(down, "DOWN")?))
}

/// GET `path` from the admin API (blocking; the demo's API has no token), with one client
/// for the demo's life.
fn admin_get(admin: SocketAddr, path: &str) -> Option<Value> {
    use super::admin_client::AdminClient;
    static CLIENT: std::sync::OnceLock<Option<AdminClient>> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        let (connect, answer) = (Duration::from_millis(500), Duration::from_secs(2));
        AdminClient::with_timeouts(
            format!("http://{admin}"),
            None,
            &lb_tls::ClientTrust::default(),
            connect,
            answer,
        )
        .ok()
    });
    client.as_ref()?.get(path).ok()
}

fn all_healthy(status: &Value) -> bool {
    let mut endpoints = status["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["endpoints"].as_array().into_iter().flatten());
    let mut any = false;
    let all = endpoints.all(|e| {
        any = true;
        e["verdict"] == "healthy"
    });
    any && all
}

enum Input {
    Line(String),
    Closed,
}

/// The demo's config text, from --config or the embedded one with --origin-port.
fn config_text(args: &Args) -> anyhow::Result<(String, String)> {
    Ok(match &args.config {
        Some(p) => (
            p.display().to_string(),
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        ),
        None => (
            "demo.toml".to_string(),
            DEMO_CONFIG.replace(
                &format!("port = {DEMO_ORIGIN_PORT}"),
                &format!("port = {}", args.origin_port),
            ),
        ),
    })
}

/// Lines typed on standard input, read on a thread of their own.
fn stdin_lines() -> tokio::sync::mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(l) => {
                    if tx.send(Input::Line(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Input::Closed);
    });
    rx
}

/// What a typed command did (`None`: quit).
async fn command(line: &str, origins: &mut Origins) -> Option<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    Some(match words.as_slice() {
        ["kill" | "stop", name] => match origins.stop(name).await {
            Ok(()) => format!("stopped origin {name}: watch the mesh mark it down"),
            Err(e) => e,
        },
        ["start", name] => match origins.start(name).await {
            Ok(()) => format!("started origin {name}"),
            Err(e) => e,
        },
        ["quit" | "exit" | "q"] => return None,
        [] => String::new(),
        _ => format!("unknown command `{line}` (kill NAME, start NAME, quit)"),
    })
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let (name, text) = config_text(args)?;
    let config =
        lb_core::config::Config::parse(&name, &text, regions).map_err(|e| anyhow!("{e}"))?;
    if u32::from(args.gossip_port) + 39 > u32::from(u16::MAX) {
        bail!("--gossip-port leaves no room for 39 probers above it");
    }
    let dir = std::env::temp_dir().join(format!("meshlb-demo-{}", std::process::id()));
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let behaviours = BTreeMap::from([
            ("eu-2", Behaviour::Flapping { up: args.flap.0, down: args.flap.1 }),
            ("us-2", Behaviour::Slow(Duration::from_millis(250))),
        ]);
        let mut origins = Origins::new(&config, &behaviours);
        origins.start_all().await.map_err(|e| anyhow!("{e}"))?;
        let mut fleet = fleet::start(args, regions, &dir, &text, &config)?;
        let mut rx = stdin_lines();
        let logs = dir.join("logs").display().to_string();
        let (dns, proxy, admin) = (args.dns.to_string(), args.proxy.to_string(), args.admin.to_string());
        if args.no_view {
            println!("meshlb demo: DNS {dns}, proxy http://{proxy}, admin http://{admin}, console http://{admin}/ui/, {} nodes, logs in {logs}", fleet.0.len());
        }
        let mut message = String::new();
        let mut pending_kills = args.kill_origin.clone();
        let mut printed_events = 0usize;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let stop = super::stopped::stopped();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                input = rx.recv() => {
                    let Some(Input::Line(line)) = input else { continue };
                    match command(&line, &mut origins).await {
                        None => break,
                        Some(m) => message = m,
                    }
                    if args.no_view && !message.is_empty() {
                        println!("{message}");
                    }
                }
                _ = tick.tick() => {}
            }
            // A child that exited is a broken demo: say so rather than show a stale view.
            if let Some((what, status)) = fleet.exited() {
                bail!("{what} exited ({status}); see its log in {logs}");
            }
            let admin_addr = args.admin;
            let (status, events) = tokio::task::spawn_blocking(move || {
                (admin_get(admin_addr, "/status"), admin_get(admin_addr, "/events"))
            })
            .await
            .unwrap_or((None, None));
            if !pending_kills.is_empty() && status.as_ref().is_some_and(all_healthy) {
                for name in std::mem::take(&mut pending_kills) {
                    message = match origins.stop(&name).await {
                        Ok(()) => format!("--kill-origin: stopped {name}"),
                        Err(e) => e,
                    };
                    if args.no_view {
                        println!("{message}");
                    }
                }
            }
            if args.no_view {
                let list = events.as_ref().and_then(Value::as_array).cloned().unwrap_or_default();
                for e in list.iter().skip(printed_events) {
                    println!("{}", serde_json::to_string(e).unwrap_or_default());
                }
                printed_events = printed_events.max(list.len());
            } else {
                let running: Vec<(String, bool)> =
                    origins.names().into_iter().map(|n| { let up = origins.is_running(&n); (n, up) }).collect();
                let screen = view::render(
                    status.as_ref(),
                    events.as_ref(),
                    &view::Info { dns: &dns, proxy: &proxy, admin: &admin, origins: &running, message: &message, logs: &logs },
                );
                print!("\x1b[2J\x1b[H{screen}");
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
        }
        drop(fleet);
        println!("meshlb demo stopped; logs in {logs}");
        Ok(ExitCode::SUCCESS)
    })
}
