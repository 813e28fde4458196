//! The `meshlb` binary: a thin command line over the workspace crates.

mod cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc rather than glibc's malloc: each HTTP/2 stream allocates its task and its
/// request future (about 4 KiB), too large for glibc's per-thread cache, and every such
/// allocation made glibc consolidate its fast bins; jemalloc's thread cache takes sizes up to
/// 32 KiB. `ROWS=h2 ./bench/proxy-tls.sh` went from 0.73x to 0.88x HAProxy's rate, with no
/// other row worse (docs/performance.md#tls-and-http2).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// meshlb — a self-hosted global traffic manager: a health-probe mesh with gossip consensus,
/// authoritative DNS load balancing and an HTTP reverse proxy.
#[derive(Debug, Parser)]
#[command(name = "meshlb", version, about, long_about = None)]
struct Cli {
    /// Regions table to use instead of the embedded regions.toml.
    #[arg(long, global = true, value_name = "FILE")]
    regions: Option<PathBuf>,
    /// The process log on stderr: human text, or one JSON object per line with every event's
    /// fields (health changes, reloads and refusals included) for Loki or Elasticsearch.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
// Parsed once at start and matched once: the aggregator's many flags cost nothing here.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Validate a configuration: print a summary and exit 0, or every error and exit 1.
    Check(cmd::check::Args),
    /// Run steering decisions offline and print where they went, as JSON.
    Simulate(cmd::simulate::Args),
    /// Run a prober: probe this region's pools and gossip the results.
    Prober(cmd::prober::Args),
    /// Run an aggregator: tally the probers' votes and serve the admin API.
    Aggregator(cmd::aggregator::Args),
    /// Show load balancers, pools and endpoints with the votes behind them (admin API).
    Status(cmd::status::Args),
    /// Explain why a request from a PoP goes where it goes (admin API).
    Explain(cmd::explain::Args),
    /// Run each selected monitor once now and print the results (exit 3 if any failed).
    Probe(cmd::probe::Args),
    /// Print the regions table (13 regions, their datacenters, country count).
    Regions,
    /// Pools through the control-plane API: list, get, apply -f FILE, delete.
    Pools(cmd::api_cli::ResourceArgs),
    /// Monitors through the control-plane API: list, get, apply -f FILE, delete.
    Monitors(cmd::api_cli::ResourceArgs),
    /// Monitor groups through the control-plane API: list, get, apply -f FILE, delete.
    MonitorGroups(cmd::api_cli::ResourceArgs),
    /// Load balancers through the control-plane API: list, get, apply -f FILE, delete.
    LoadBalancers(cmd::api_cli::ResourceArgs),
    /// The mesh config as one document: show, diff FILE, push FILE; keygen makes the key pair
    /// that signs generations.
    Config(cmd::api_cli::ConfigArgs),
    /// Tunnels to private networks: `run` a connector, print a tunnel's `token`.
    Tunnel(cmd::tunnel::Args),
    /// Run a whole demo mesh on this machine: origins, 39 probers, an aggregator serving DNS
    /// and the proxy, and a live view.
    Demo(cmd::demo::Args),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs (warnings and errors of the notifier, the proxy, ...) to stderr; `MESHLB_LOG` picks
/// the level: error, warn, info (default), debug, trace.
fn init_logging(format: LogFormat) {
    use tracing::Level;
    let level = match std::env::var("MESHLB_LOG").as_deref() {
        Ok("error") => Level::ERROR,
        Ok("warn") => Level::WARN,
        Ok("debug") => Level::DEBUG,
        Ok("trace") => Level::TRACE,
        _ => Level::INFO,
    };
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => {
            meshlb_node::logging::set_json();
            builder
                .json()
                .with_current_span(false)
                .with_span_list(false)
                .try_init()
        }
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let regions = match cmd::load_regions(cli.regions.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let result = match cli.command {
        Command::Check(args) => cmd::check::run(&args, &regions),
        Command::Simulate(args) => cmd::simulate::run(&args, &regions),
        Command::Prober(args) => cmd::prober::run(&args, &regions),
        Command::Aggregator(args) => cmd::aggregator::run(&args, &regions),
        Command::Status(args) => cmd::status::run(&args),
        Command::Explain(args) => cmd::explain::run(&args),
        Command::Probe(args) => cmd::probe::run(&args, &regions),
        Command::Regions => cmd::regions::run(&regions),
        Command::Pools(args) => cmd::api_cli::run_resource(cmd::api_cli::Resource::Pools, &args),
        Command::Monitors(args) => {
            cmd::api_cli::run_resource(cmd::api_cli::Resource::Monitors, &args)
        }
        Command::MonitorGroups(args) => {
            cmd::api_cli::run_resource(cmd::api_cli::Resource::MonitorGroups, &args)
        }
        Command::LoadBalancers(args) => {
            cmd::api_cli::run_resource(cmd::api_cli::Resource::LoadBalancers, &args)
        }
        Command::Config(args) => cmd::api_cli::run_config(&args),
        Command::Demo(args) => cmd::demo::run(&args, &regions),
        Command::Tunnel(args) => cmd::tunnel::run(&args, &regions),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
