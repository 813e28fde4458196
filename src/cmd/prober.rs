//! `meshlb prober`: probe the pools this region checks and publish the results in gossip; its
//! flags are `prober/src/flags.rs`.

use std::process::ExitCode;

use anyhow::Context;
use lb_core::RegionsTable;

pub use prober::flags::Args;

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let settings = args.settings(regions)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let node = prober::node::start(settings).await?;
        super::serve::until_stopped(node.handle).await
    })
}
