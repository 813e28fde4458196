//! The handle of a running node, whatever its role: reload it, wait for it to end on its own,
//! or stop it. The node's config task holds the other ends.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::reload::{NoOutcome, Outcome, Request};
use crate::supervise::VitalEnded;

/// How a node ended.
#[derive(Debug, thiserror::Error)]
pub enum Ended {
    /// A vital task ended; the node stopped (its process should exit non-zero so that the
    /// service manager restarts it).
    #[error(transparent)]
    Vital(#[from] VitalEnded),
    /// The node's config task itself panicked or was cancelled.
    #[error("the node's config task {0}")]
    Task(String),
}

/// Reloads, stop and end of a running node.
pub struct NodeHandle {
    reloads: mpsc::Sender<Request>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), VitalEnded>>,
}

/// The config task's ends of a [`NodeHandle`].
pub struct HandleEnds {
    /// Reloads asked for by the handle (and by `POST /-/reload`, through a clone).
    pub requested: mpsc::Receiver<Request>,
    /// Fires when the handle asks the node to stop.
    pub stop: oneshot::Receiver<()>,
}

impl NodeHandle {
    /// The channels a node's config task serves, and the sender `POST /-/reload` uses.
    pub fn channels() -> (mpsc::Sender<Request>, oneshot::Sender<()>, HandleEnds) {
        let (reloads, requested) = mpsc::channel(4);
        let (stop, stopped) = oneshot::channel();
        let ends = HandleEnds {
            requested,
            stop: stopped,
        };
        (reloads, stop, ends)
    }

    /// The handle of the config task `task`, started with the ends of [`Self::channels`].
    pub fn new(
        reloads: mpsc::Sender<Request>,
        stop: oneshot::Sender<()>,
        task: JoinHandle<Result<(), VitalEnded>>,
    ) -> NodeHandle {
        NodeHandle {
            reloads,
            stop: Some(stop),
            task,
        }
    }

    /// Reloads the config file, as SIGHUP and `POST /-/reload` do; `why` is logged.
    pub async fn reload(&self, why: &str) -> Result<Outcome, NoOutcome> {
        crate::reload::ask(&self.reloads, why).await
    }

    /// Resolves when the node stops on its own: a vital task ended.
    pub async fn ended(&mut self) -> Ended {
        match (&mut self.task).await {
            Ok(Ok(())) => Ended::Task("returned".into()),
            Ok(Err(e)) => Ended::Vital(e),
            Err(e) => Ended::Task(crate::supervise::joined::<()>(Err(e))),
        }
    }

    /// Stops the node: its listeners close, gossip leaves; waits until it has.
    pub async fn stop(mut self) -> Result<(), Ended> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Ended::Vital(e)),
            Err(e) => Err(Ended::Task(crate::supervise::joined::<()>(Err(e)))),
        }
    }
}
