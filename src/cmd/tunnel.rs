//! `meshlb tunnel`: `run` a connector inside a private network, or print the `token` a
//! connector of a configured tunnel runs with (`tunnel/`, docs/design.md#private-endpoints).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use lb_core::RegionsTable;
use tunnel::{Connector, ConnectorSettings, Token, TunnelSecret};

use super::stopped::stopped;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, clap::Subcommand)]
enum Verb {
    /// Run a connector: dial the PoPs the token names and carry their streams to the private
    /// endpoints; SIGTERM drains (no new stream, those in flight to their end).
    Run(RunArgs),
    /// Print the token a connector of a tunnel of the config runs with.
    Token(TokenArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The token (as `cloudflared tunnel run --token`); it holds the tunnel secret, so prefer
    /// --token-file.
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    token: Option<String>,
    /// A file holding the token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A PoP's tunnel address, instead of the token's (repeatable).
    #[arg(long = "pop", value_name = "ADDR")]
    pops: Vec<SocketAddr>,
    /// Dial this many PoPs, the first listed first.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pop_count: usize,
    /// Connections to each PoP.
    #[arg(long, value_name = "N", default_value_t = 2)]
    connections_per_pop: u8,
    /// Serve only streams to these subnets, and claim them in the hello (a PoP refuses a
    /// claim its tunnel is not granted). Default: any address a PoP asks for, which only
    /// opens streams to the configured endpoints of its tunnel's routes.
    #[arg(long = "route", value_name = "CIDR")]
    routes: Vec<ipnet::IpNet>,
    /// Trust PoPs whose certificate this CA (PEM) signed, instead of the token's key pin.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Streams each connection runs at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_streams: u32,
    /// How long streams in flight may run after SIGTERM.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    drain_grace_ms: u64,
}

#[derive(Debug, clap::Args)]
struct TokenArgs {
    /// The configuration holding the tunnel.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The tunnel's id or name.
    #[arg(long, value_name = "ID")]
    tunnel: String,
    /// A PoP's tunnel address (an aggregator's --tunnel-listen), nearest first (repeatable).
    #[arg(long = "pop", value_name = "ADDR", required = true)]
    pops: Vec<String>,
    /// The PoPs' --tunnel-cert: the token pins its key.
    #[arg(long, value_name = "FILE")]
    pop_cert: PathBuf,
    /// The account tag the token names.
    #[arg(long, default_value = "meshlb")]
    account: String,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    match &args.verb {
        Verb::Run(a) => run_connector(a),
        Verb::Token(a) => print_token(a, regions),
    }
}

fn print_token(a: &TokenArgs, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let Some(config) = super::load_config(&a.config, regions) else {
        return Ok(ExitCode::from(1));
    };
    let wanted = lb_core::config::private::canonical_uuid(&a.tunnel);
    let Some(t) = config
        .private
        .tunnels
        .iter()
        .find(|t| Some(&t.id) == wanted.as_ref() || t.name == a.tunnel)
    else {
        bail!("{}: no tunnel `{}`", a.config.display(), a.tunnel);
    };
    let certs = lb_tls::pem::certificates(&a.pop_cert)?;
    let pin = certs
        .first()
        .and_then(lb_tls::pin::SpkiPin::of_certificate)
        .with_context(|| format!("{}: no certificate", a.pop_cert.display()))?;
    let secret: [u8; 32] = t.secret[..32].try_into().context("the tunnel secret")?;
    let token = Token {
        account: a.account.clone(),
        tunnel: t.id.parse()?,
        secret: TunnelSecret(secret),
        pops: a.pops.clone(),
        pin: Some(pin.to_string()),
    };
    println!("{}", token.encode());
    Ok(ExitCode::SUCCESS)
}

fn run_connector(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let text = match (&a.token, &a.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("cannot read the token file {}", f.display()))?,
        (None, None) => bail!("a connector needs --token-file FILE or --token TOKEN"),
    };
    let token = Token::decode(&text)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let mut pops = a.pops.clone();
        if pops.is_empty() {
            for p in &token.pops {
                let addr = tokio::net::lookup_host(p.as_str())
                    .await
                    .with_context(|| format!("the token's PoP {p}"))?
                    .next()
                    .with_context(|| format!("the token's PoP {p} has no address"))?;
                pops.push(addr);
            }
        }
        pops.truncate(a.pop_count.max(1));
        if pops.is_empty() {
            bail!("no PoP to dial: the token names none, and no --pop was given");
        }
        let trust = lb_tls::ClientTrust {
            ca_file: a.ca_file.clone(),
            pin: match (&a.ca_file, &token.pin) {
                (None, Some(pin)) => Some(pin.parse()?),
                _ => None,
            },
            identity: None,
        };
        let server_name = rustls::pki_types::ServerName::from(pops[0].ip());
        let mut settings = ConnectorSettings::new(
            token.tunnel,
            token.secret.clone(),
            pops.clone(),
            trust.config()?,
            server_name,
        );
        settings.connections_per_pop = a.connections_per_pop.max(1);
        settings.routes = a.routes.clone();
        settings.max_streams = a.max_streams.max(1);
        settings.drain_grace = Duration::from_millis(a.drain_grace_ms);
        eprintln!(
            "tunnel {}: {} connection(s) to each of {}",
            token.tunnel,
            settings.connections_per_pop,
            pops.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let connector = Connector::start(settings);
        stopped().await;
        eprintln!("draining");
        connector.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
