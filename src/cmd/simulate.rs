//! `meshlb simulate`: see `lb_core::simulate`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context};
use lb_core::request::Mode;
use lb_core::simulate::{self, Clients, Simulation, StateFile};
use lb_core::{CountryCode, Region, RegionsTable};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The load balancer (hostname) to simulate.
    #[arg(long, value_name = "NAME")]
    lb: String,
    /// Health state JSON; anything not listed is healthy.
    #[arg(long, value_name = "STATE.json")]
    state: Option<PathBuf>,
    /// The serving PoP: a region code (WEU) or a datacenter code (ams). Default: WNAM.
    #[arg(long, value_name = "REGION|DC")]
    pop: Option<String>,
    /// One client address for every request.
    #[arg(long, value_name = "IP", conflicts_with = "clients")]
    client: Option<IpAddr>,
    /// N distinct client addresses drawn from the seed (at most 1,000,000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    clients: Option<u32>,
    /// The client's country (ISO 3166-1 alpha-2), as geolocation would report it.
    #[arg(long, value_name = "CC")]
    country: Option<String>,
    /// EDNS Client Subnet sent with each query (located by --country).
    #[arg(long, value_name = "SUBNET", requires = "country")]
    ecs: Option<ipnet::IpNet>,
    /// dns or proxy; default: proxy for proxied load balancers, else dns.
    #[arg(long, value_name = "MODE")]
    mode: Option<String>,
    /// Number of decisions.
    #[arg(long, default_value_t = 1000)]
    requests: u64,
    /// RNG seed: the same seed gives the same output.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let Some(config) = super::load_config(&args.config, regions) else {
        return Ok(ExitCode::from(1));
    };
    let lb = config.load_balancer(&args.lb).ok_or_else(|| {
        anyhow!(
            "{}: no load balancer is named `{}`",
            args.config.display(),
            args.lb
        )
    })?;
    let state = match &args.state {
        None => StateFile::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the state file {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: invalid state", path.display()))?
        }
    };
    let snapshot = state.to_snapshot(&config).map_err(|e| {
        anyhow!(
            "{}: {e}",
            args.state
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        )
    })?;
    let (pop_region, pop_datacenter) = match args.pop.as_deref() {
        None => (Region::Wnam, None),
        Some(p) => match p.parse::<Region>() {
            Ok(r) => (r, None),
            Err(_) => match regions.datacenter(p) {
                Some(dc) => (dc.region, Some(dc.code.clone())),
                None => {
                    bail!("--pop {p}: neither a region code nor a datacenter of the regions table")
                }
            },
        },
    };
    let mode = match args.mode.as_deref() {
        None if lb.proxied => Mode::Proxy,
        None => Mode::Dns,
        Some("dns") => Mode::Dns,
        Some("proxy") => Mode::Proxy,
        Some(other) => bail!("--mode {other}: expected dns or proxy"),
    };
    let country = args
        .country
        .as_deref()
        .map(|c| {
            c.parse::<CountryCode>()
                .map_err(|e| anyhow!("--country: {e}"))
        })
        .transpose()?;
    let clients = match (args.client, args.clients) {
        (Some(ip), _) => Clients::One(ip),
        (None, Some(0)) => bail!("--clients must be at least 1"),
        (None, Some(n)) => Clients::Many(n),
        (None, None) => Clients::None,
    };
    let sim = Simulation {
        mode,
        pop_region,
        pop_datacenter,
        clients,
        country,
        ecs: args.ecs,
        requests: args.requests,
        seed: args.seed,
        now: 1_800_000_000,
    };
    let report = simulate::run(&config, regions, lb, &snapshot, &sim);
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}
