//! Waiting on a running node: until Ctrl-C or SIGTERM stops it, or it ends on its own (a vital
//! task ended: the process exits non-zero so that systemd or Kubernetes restarts it).

use std::process::ExitCode;

use meshlb_node::handle::NodeHandle;

use super::mesh_args::stopped;

pub async fn until_stopped(mut node: NodeHandle) -> anyhow::Result<ExitCode> {
    tokio::select! {
        () = stopped() => {}
        ended = node.ended() => return Err(ended.into()),
    }
    node.stop().await?;
    Ok(ExitCode::SUCCESS)
}
