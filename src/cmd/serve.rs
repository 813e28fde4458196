//! Waiting on a running node: until Ctrl-C or SIGTERM stops it, or it ends on its own (a vital
//! task ended: the process exits non-zero so that systemd or Kubernetes restarts it), and
//! reopening the record files on SIGUSR1.

use std::process::ExitCode;

use meshlb_node::handle::NodeHandle;

use super::stopped::stopped;

pub async fn until_stopped(mut node: NodeHandle) -> anyhow::Result<ExitCode> {
    // SIGUSR1 reopens the record files, after logrotate has renamed them (nginx's signal).
    if let Ok(mut usr1) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
    {
        tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                lb_records::reopen_all();
            }
        });
    }
    tokio::select! {
        () = stopped() => {}
        ended = node.ended() => return Err(ended.into()),
    }
    node.stop().await?;
    Ok(ExitCode::SUCCESS)
}
