//! What makes a node re-read its configuration, and how the outcome is reported.
//!
//! A reload comes from SIGHUP (what `systemctl reload` sends) or, with `--watch-config`, from
//! the file's content changing. The file is re-read through its path each time, so a
//! Kubernetes ConfigMap update — which writes a new directory and swaps the `..data` symlink
//! that the file's own symlink points through — is seen like any edit; an unchanged content
//! (a `touch`, or a swap to the same bytes) is not a reload. Every outcome is logged and counted
//! in Prometheus's own convention for reloads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mesh::node::config_hash;

/// Why a reload happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Hangup,
    FileChanged,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Hangup => "SIGHUP",
            Trigger::FileChanged => "the file changed",
        }
    }
}

/// Watches a config file's content by polling its path.
#[derive(Debug)]
pub struct ConfigWatch {
    path: PathBuf,
    every: Duration,
    /// The hash of the content last seen (`None`: unreadable then).
    seen: Option<String>,
}

impl ConfigWatch {
    /// Starts from `text`, the content the node runs now.
    pub fn new(path: &Path, every: Duration, text: &str) -> ConfigWatch {
        ConfigWatch {
            path: path.to_path_buf(),
            every,
            seen: Some(config_hash(text)),
        }
    }

    /// Waits until the file's content differs from the last seen. A file that cannot be read
    /// (mid-swap, or removed) is looked at again on the next poll; it is no change by itself.
    pub async fn changed(&mut self) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Ok(text) = tokio::fs::read_to_string(&self.path).await else {
                continue;
            };
            let hash = config_hash(&text);
            if self.seen.as_deref() != Some(hash.as_str()) {
                self.seen = Some(hash);
                return;
            }
        }
    }
}

/// Waits for the next reload: SIGHUP, or a change of the file when watched.
pub async fn next(
    hup: &mut tokio::signal::unix::Signal,
    watch: Option<&mut ConfigWatch>,
) -> Trigger {
    match watch {
        Some(w) => tokio::select! {
            _ = hup.recv() => Trigger::Hangup,
            () = w.changed() => Trigger::FileChanged,
        },
        None => {
            hup.recv().await;
            Trigger::Hangup
        }
    }
}

/// Records a reload's outcome: `meshlb_config_last_reload_successful` (1 or 0, as Prometheus's
/// own `prometheus_config_last_reload_successful`), the time of the last success, and a count
/// by result. Called at start too, for the config a node starts with.
pub fn record(ok: bool) {
    metrics::gauge!("meshlb_config_last_reload_successful").set(if ok { 1.0 } else { 0.0 });
    if ok {
        metrics::gauge!("meshlb_config_last_reload_success_timestamp_seconds")
            .set(lb_core::clock::unix_secs() as f64);
    }
}

/// Counts a reload attempt (not the start) by its result.
pub fn count(ok: bool) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("meshlb_config_reloads_total", "result" => result).increment(1);
}
