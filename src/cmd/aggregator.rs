//! `meshlb aggregator`: join the mesh, tally the probers' votes, serve the admin API; its
//! flags are `aggregator/src/flags/mod.rs`.

use std::process::ExitCode;

use anyhow::Context;
use lb_core::RegionsTable;

pub use aggregator::flags::Args;

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let settings = args.settings(regions)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let node = aggregator::node::start(settings).await?;
        super::serve::until_stopped(node.handle).await
    })
}
