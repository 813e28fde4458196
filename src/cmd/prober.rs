//! `meshlb prober`: probe the pools this region checks and publish the results in gossip.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use lb_core::{Region, RegionsTable};
use meshlb_node::control::ConfigRole;
use prober::node::{MetricsListener, Settings};

use super::mesh_args::MeshArgs;
use super::node_args::{node_settings, Place};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    file: super::node_args::ConfigFileArgs,
    /// This prober's region.
    #[arg(long)]
    region: Region,
    /// This prober's datacenter (a code of regions.toml, or any name unique in the region).
    #[arg(long)]
    dc: String,
    /// Probes in flight at once.
    #[arg(long, default_value_t = 512)]
    concurrency: usize,
    /// Monitor previews (`POST .../preview` on an aggregator) run at once; more wait their
    /// turn.
    #[arg(long, value_name = "N", default_value_t = 4)]
    preview_concurrency: usize,
    /// Monitor previews remembered until they expire; a request beyond is skipped.
    #[arg(long, value_name = "N", default_value_t = 256)]
    preview_max_remembered: usize,
    /// Targets one monitor preview may probe here; a larger one is not run.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    preview_max_targets: usize,
    /// Serve Prometheus metrics on this address (GET /metrics), and `POST /-/reload` (needs
    /// the admin token).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// File holding the bearer token of `POST /-/reload` (else MESHLB_ADMIN_TOKEN; none: the
    /// endpoint refuses every reload).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    #[command(flatten)]
    admin_tls: super::admin_tls_args::AdminTlsArgs,
    /// How long a request head may take to arrive at the --metrics listener.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    admin_head_timeout_ms: u64,
    /// How long a write of a --metrics listener's answer may wait for the client to read it; a
    /// client that stops reading is cut then.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    admin_send_timeout_ms: u64,
    /// Connections the --metrics listener keeps open at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 256)]
    admin_max_connections: usize,
    #[command(flatten)]
    control: super::control_args::ControlArgs,
    #[command(flatten)]
    mesh: MeshArgs,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let role = if args.control.config_from_mesh {
        ConfigRole::Follower
    } else {
        ConfigRole::Standalone
    };
    if args.metrics.is_none() && args.admin_tls.admin_tls_cert.is_some() {
        anyhow::bail!("--admin-tls-cert is for the --metrics listener: give --metrics too");
    }
    let credentials = args
        .admin_tls
        .credentials((args.admin_token_file.as_ref(), "MESHLB_ADMIN_TOKEN"), None)?;
    let place = Place {
        role: "prober",
        region: args.region,
        dc: &args.dc,
        config_role: role,
    };
    let settings = Settings {
        node: node_settings(&args.file, place, &args.control, &args.mesh, regions)?,
        concurrency: args.concurrency,
        previews: prober::preview::PreviewSettings {
            concurrent: args.preview_concurrency.max(1),
            remembered: args.preview_max_remembered,
            max_targets: args.preview_max_targets,
            ..prober::preview::PreviewSettings::default()
        },
        metrics: args.metrics.map(move |addr| MetricsListener {
            addr,
            credentials,
            limits: meshlb_node::guard::Limits {
                head_timeout: Duration::from_millis(args.admin_head_timeout_ms.max(1)),
                send_timeout: Duration::from_millis(args.admin_send_timeout_ms.max(1)),
                max_connections: args.admin_max_connections,
            },
        }),
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let node = prober::node::start(settings).await?;
        super::serve::until_stopped(node.handle).await
    })
}
