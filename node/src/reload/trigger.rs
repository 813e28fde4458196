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

    /// Waits until the file's content differs from the last seen, looking every `every`.
    pub async fn changed(&mut self) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            if self.look() {
                return;
            }
        }
    }

    /// One look at the file (a read of a small local file, on the calling thread): whether its
    /// content differs from the last seen. A file that cannot be read (mid-swap, or removed) is
    /// no change by itself; the next look tries again.
    fn look(&mut self) -> bool {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return false;
        };
        let hash = config_hash(&text);
        if self.seen.as_deref() == Some(hash.as_str()) {
            return false;
        }
        self.seen = Some(hash);
        true
    }
}

/// What makes a node reload by itself: SIGHUP when listened to, the file's content when
/// watched.
#[derive(Debug)]
pub struct Triggers {
    hangup: Option<tokio::signal::unix::Signal>,
    watch: Option<ConfigWatch>,
}

impl Triggers {
    /// The triggers `settings` ask for, watching `path` from `text` (the content in force).
    pub fn new(settings: super::ReloadSettings, path: &Path, text: &str) -> Triggers {
        let hangup = settings
            .on_hangup
            .then(|| tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok())
            .flatten();
        let watch = settings
            .watch
            .map(|every| ConfigWatch::new(path, every.max(Duration::from_millis(10)), text));
        Triggers { hangup, watch }
    }

    /// Waits for the next reload; never, with neither trigger.
    pub async fn next(&mut self) -> Trigger {
        let hangup = async {
            match self.hangup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let changed = async {
            match self.watch.as_mut() {
                Some(w) => w.changed().await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = hangup => Trigger::Hangup,
            () = changed => Trigger::FileChanged,
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

/// Records the config a node starts with: a successful load, and no reload yet (both counts
/// exported at 0, so dashboards and alerts see the series from the start).
pub fn started() {
    record(true);
    for result in ["success", "failure"] {
        metrics::counter!("meshlb_config_reloads_total", "result" => result).absolute(0);
    }
}

/// Counts a reload attempt (not the start) by its result.
pub fn count(ok: bool) {
    let result = if ok { "success" } else { "failure" };
    metrics::counter!("meshlb_config_reloads_total", "result" => result).increment(1);
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn only_new_content_is_a_change() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("meshlb.toml");
        std::fs::write(&path, "a = 1\n").expect("write");
        let mut watch = ConfigWatch::new(&path, Duration::from_secs(1), "a = 1\n");
        assert!(!watch.look(), "the content it started with");
        std::fs::write(&path, "a = 1\n").expect("rewrite");
        assert!(!watch.look(), "the same bytes written again");
        std::fs::write(&path, "a = 2\n").expect("edit");
        assert!(watch.look(), "an edit");
        assert!(!watch.look(), "seen once");
        std::fs::remove_file(&path).expect("remove");
        assert!(!watch.look(), "a missing file is no change");
        std::fs::write(&path, "a = 2\n").expect("back");
        assert!(!watch.look(), "back as it was");
    }

    #[test]
    fn a_swapped_symlink_is_followed() {
        let dir = tempfile::tempdir().expect("dir");
        for (version, text) in [("v1", "a = 1\n"), ("v2", "a = 2\n")] {
            std::fs::create_dir(dir.path().join(version)).expect("version dir");
            std::fs::write(dir.path().join(version).join("meshlb.toml"), text).expect("config");
        }
        symlink("v1", dir.path().join("..data")).expect("..data");
        let path = dir.path().join("meshlb.toml");
        symlink("..data/meshlb.toml", &path).expect("file link");
        let mut watch = ConfigWatch::new(&path, Duration::from_secs(1), "a = 1\n");
        assert!(!watch.look());
        symlink("v2", dir.path().join("..tmp")).expect("new link");
        std::fs::rename(dir.path().join("..tmp"), dir.path().join("..data")).expect("swap");
        assert!(watch.look(), "the ConfigMap's new version");
    }
}
