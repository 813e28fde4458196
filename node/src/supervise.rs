//! The long-lived tasks a node cannot serve without (gossip, the tally loop, the prober's
//! scheduler and publisher, the admin and metrics listeners): when one of them ends — it
//! returned, failed or panicked — the node exits non-zero naming the task and why, so that
//! systemd (`Restart=always`) or Kubernetes restarts it, rather than serving on with a
//! part missing (an aggregator whose gossip task panicked would otherwise answer from frozen
//! state, and its peers would go fail-static).

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;

use tokio::task::{AbortHandle, JoinError, JoinHandle};

/// What a task's end says, as words.
pub trait Ending {
    fn describe(self) -> String;
}

impl Ending for () {
    fn describe(self) -> String {
        "returned".into()
    }
}

/// A thread's end as told by `lb_edge::Ended`.
impl Ending for String {
    fn describe(self) -> String {
        self
    }
}

impl<E: Display> Ending for Result<(), E> {
    fn describe(self) -> String {
        match self {
            Ok(()) => "returned".into(),
            Err(e) => format!("failed: {e:#}"),
        }
    }
}

/// A join result as words: the task's own ending, or its panic message.
pub fn joined<T: Ending>(result: Result<T, JoinError>) -> String {
    match result {
        Ok(t) => t.describe(),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            format!("panicked: {message}")
        }
        Err(_) => "was cancelled".into(),
    }
}

type Watch = Pin<Box<dyn Future<Output = String> + Send>>;

/// The vital tasks of a node; dropping it aborts those it owns.
#[derive(Default)]
pub struct Vital {
    watches: Vec<(&'static str, Watch)>,
    owned: Vec<AbortHandle>,
    /// Which of `watches` watch an owned task (and end once it is aborted).
    tasks: Vec<usize>,
}

impl Vital {
    pub fn new() -> Self {
        Vital::default()
    }

    /// Watches a spawned task (aborted when this is dropped).
    pub fn task<T: Ending + Send + 'static>(&mut self, name: &'static str, handle: JoinHandle<T>) {
        self.owned.push(handle.abort_handle());
        self.tasks.push(self.watches.len());
        self.watches
            .push((name, Box::pin(async move { joined(handle.await) })));
    }

    /// Watches a frontend's OS threads (the DNS server's, the proxy's workers).
    pub fn threads(&mut self, name: &'static str, ended: Option<lb_edge::Ended>) {
        if let Some(ended) = ended {
            self.task(name, tokio::task::spawn_blocking(move || ended.wait()));
        }
    }

    /// Watches something that resolves when a part of the node ends (say, chitchat's
    /// termination watcher).
    pub fn future(
        &mut self,
        name: &'static str,
        ended: impl Future<Output = String> + Send + 'static,
    ) {
        self.watches.push((name, Box::pin(ended)));
    }

    /// Resolves when the first watched task ends: its name and how it ended. Never resolves
    /// when nothing is watched. Not to be called again once it resolved: the node stops.
    pub async fn ended(&mut self) -> VitalEnded {
        if self.watches.is_empty() {
            return std::future::pending().await;
        }
        let (why, i, rest) =
            futures::future::select_all(self.watches.iter_mut().map(|(_, w)| w.as_mut())).await;
        drop(rest);
        // Ended: `stop` must not wait on it again.
        self.tasks.retain(|&t| t != i);
        VitalEnded {
            name: self.watches[i].0,
            why,
        }
    }
}

impl Vital {
    /// Aborts the tasks it owns and waits until each has ended (their sockets closed), as a
    /// node stops.
    pub async fn stop(mut self) {
        for h in &self.owned {
            h.abort();
        }
        let tasks = std::mem::take(&mut self.tasks);
        let mut watches = std::mem::take(&mut self.watches);
        for i in tasks {
            let (_, watch) = &mut watches[i];
            watch.as_mut().await;
        }
    }
}

impl Drop for Vital {
    fn drop(&mut self) {
        for h in &self.owned {
            h.abort();
        }
    }
}

/// A vital task ended: the node stops, and its process exits non-zero with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {name} {why}; exiting so that the service manager restarts this node")]
pub struct VitalEnded {
    pub name: &'static str,
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_task_to_end_is_named_with_its_panic() {
        let mut vital = Vital::new();
        vital.task("forever", tokio::spawn(std::future::pending::<()>()));
        vital.task(
            "gossip",
            tokio::spawn(async {
                tokio::task::yield_now().await;
                panic!("assertion failed: node_delta.max_version >= self.max_version")
            }) as JoinHandle<()>,
        );
        let ended = vital.ended().await;
        assert_eq!(ended.name, "gossip");
        assert_eq!(
            ended.why,
            "panicked: assertion failed: node_delta.max_version >= self.max_version"
        );
    }

    #[tokio::test]
    async fn a_task_that_fails_says_why_and_dropping_aborts_the_rest() {
        let mut vital = Vital::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let forever = tokio::spawn(async move {
            let _tx = tx;
            std::future::pending::<()>().await
        });
        vital.task("tally loop", forever);
        vital.task(
            "metrics listener",
            tokio::spawn(async { Err::<(), _>("cannot listen on 127.0.0.1:1") }),
        );
        assert_eq!(
            vital.ended().await,
            VitalEnded {
                name: "metrics listener",
                why: "failed: cannot listen on 127.0.0.1:1".into()
            }
        );
        drop(vital);
        assert!(rx.await.is_err(), "the remaining task was aborted");
    }

    /// A socket that panics on its first receive: a panic inside chitchat's own task.
    struct Panicking;

    #[async_trait::async_trait]
    impl chitchat::transport::Transport for Panicking {
        async fn open(
            &self,
            _: std::net::SocketAddr,
        ) -> anyhow::Result<Box<dyn chitchat::transport::Socket>> {
            Ok(Box::new(Panicking))
        }
    }

    #[async_trait::async_trait]
    impl chitchat::transport::Socket for Panicking {
        fn local_addr(&self) -> anyhow::Result<std::net::SocketAddr> {
            Ok(([127, 0, 0, 1], 9).into())
        }
        async fn send(
            &mut self,
            _: std::net::SocketAddr,
            _: chitchat::ChitchatEnvelope,
        ) -> anyhow::Result<chitchat::transport::SendOutcome> {
            Ok(chitchat::transport::SendOutcome { num_bytes_sent: 0 })
        }
        async fn recv(&mut self) -> anyhow::Result<chitchat::transport::RecvOutcome> {
            tokio::task::yield_now().await;
            panic!("a bug inside the gossip task")
        }
    }

    /// The gossip task watched as the aggregator and the prober watch it (`aggregator/src/node`, `prober/src/node`) (its termination
    /// watcher): a panic inside chitchat's task ends the node, named.
    #[tokio::test]
    async fn a_panic_inside_the_gossip_task_ends_the_node() {
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], 9).into();
        let config = chitchat::ChitchatConfig {
            chitchat_id: chitchat::ChitchatId::new("n".to_string(), 1, addr),
            cluster_id: "c".into(),
            gossip_interval: std::time::Duration::from_millis(50),
            listen_addr: addr,
            seed_nodes: Vec::new(),
            failure_detector_config: chitchat::FailureDetectorConfig::default(),
            marked_for_deletion_grace_period: std::time::Duration::from_secs(60),
            catchup_callback: None,
            extra_liveness_predicate: None,
            protocol_version: chitchat::ProtocolVersion::V0,
            bounded: None,
            tier: chitchat::Tier::Core,
            view: chitchat::ViewSettings::default(),
        };
        let handle = chitchat::spawn_chitchat(config, Vec::new(), &Panicking)
            .await
            .expect("spawned");
        let mut vital = Vital::new();
        vital.task("tally loop", tokio::spawn(std::future::pending::<()>()));
        vital.future("gossip task", {
            let ended = handle.termination_watcher();
            async move { Ending::describe(ended.await) }
        });
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), vital.ended())
            .await
            .expect("the panic was noticed");
        assert_eq!(ended.name, "gossip task");
        assert!(ended.why.contains("panicked"), "{}", ended.why);
    }

    #[tokio::test]
    async fn stopping_waits_until_every_owned_task_has_ended() {
        let mut vital = Vital::new();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        vital.task(
            "admin API",
            tokio::spawn(async move {
                let _tx = tx;
                std::future::pending::<()>().await
            }),
        );
        vital.task("tally loop", tokio::spawn(async {}));
        let ended = vital.ended().await;
        assert_eq!(ended.name, "tally loop");
        vital.stop().await;
        assert_eq!(
            rx.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Closed),
            "the aborted task dropped what it held before stop returned"
        );
    }

    #[tokio::test]
    async fn nothing_watched_never_ends() {
        let mut vital = Vital::new();
        let r = tokio::time::timeout(std::time::Duration::from_millis(20), vital.ended()).await;
        assert!(r.is_err());
    }
}
