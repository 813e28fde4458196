//! `meshlb aggregator`: join the mesh, tally the probers' votes, serve the admin API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use aggregator::service::{self, Shared};
use aggregator::tally::TallySettings;
use anyhow::{anyhow, Context};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use prober::mesh::{self, node::config_hash, NodeIdentity};

use super::mesh_args::{stopped, MeshArgs};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The region this aggregator serves (its PoP).
    #[arg(long)]
    region: Region,
    /// The PoP's datacenter, if any.
    #[arg(long, default_value = "pop")]
    dc: String,
    /// Admin API address (HTTP).
    #[arg(long, value_name = "ADDR")]
    admin: SocketAddr,
    /// File holding the admin API bearer token (else MESHLB_ADMIN_TOKEN; none: open).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    #[command(flatten)]
    mesh: MeshArgs,
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("cannot read {}", args.config.display()))?;
    let config = Config::parse(&args.config.display().to_string(), &text, regions)
        .map_err(|e| anyhow!("{e}"))?;
    let settings = args.mesh.settings()?;
    let token = match &args.admin_token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read {}", f.display()))?
                .trim()
                .to_string(),
        ),
        None => std::env::var("MESHLB_ADMIN_TOKEN").ok(),
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let hash = config_hash(&text);
        let identity = NodeIdentity {
            node_id: args
                .mesh
                .node_id("aggregator", args.region.code(), &args.dc),
            role: "aggregator",
            region: args.region.code().to_string(),
            datacenter: args.dc.clone(),
            config_hash: hash.clone(),
        };
        let node = mesh::start(&identity, &settings).await?;
        let tally = TallySettings {
            region: args.region,
            ..TallySettings::default()
        };
        let metrics = super::metrics_http::install(&[
            ("node_role", "aggregator"),
            ("node_region", args.region.code()),
        ]);
        let shared = Shared::new(Arc::new(config), tally, hash, metrics);
        let listener = aggregator::admin::bind(args.admin).await?;
        eprintln!(
            "meshlb aggregator {} gossiping on {}, admin API on http://{}",
            identity.node_id, settings.listen, args.admin
        );
        let admin = tokio::spawn(aggregator::admin::serve(
            listener,
            Arc::clone(&shared),
            token,
        ));
        let poll = (settings.gossip_interval / 2).max(Duration::from_millis(20));
        let tally_loop = tokio::spawn(service::run(
            Arc::clone(&shared),
            node.handle.chitchat(),
            Some(Arc::clone(&node.stats)),
            poll,
        ));
        stopped().await;
        admin.abort();
        tally_loop.abort();
        let _ = node.handle.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
