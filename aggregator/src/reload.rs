//! Reloads as the aggregator's tasks see them: a request from the admin API
//! (`POST /-/reload`) to the binary's reload task, which reads and validates the file and
//! builds the next generation's frontends; and the adoption of that generation by the tally
//! loop (`service.rs`), which carries the tally's state over by identity before anything
//! serves the new config.

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::shared::InForce;

/// What a reload came to, as `POST /-/reload` answers it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Outcome {
    pub reloaded: bool,
    /// The generation in force after the attempt (unchanged when refused).
    pub generation: u64,
    /// The hash of the file in force after the attempt.
    pub config_hash: String,
    /// The file's content was the one in force already: nothing was rebuilt.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// Why the file was refused: every error, each naming file, field path and reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// A reload asked for through the admin API.
#[derive(Debug)]
pub struct Request {
    pub reply: oneshot::Sender<Outcome>,
}

/// The next generation, handed to the tally loop; it answers once the generation is in force
/// (tallied, published and visible in `Shared::in_force`).
pub struct Adopt {
    pub next: InForce,
    pub done: oneshot::Sender<()>,
}

/// The way to the tally loop.
#[derive(Clone)]
pub struct Adopter {
    tx: mpsc::Sender<Adopt>,
}

/// The tally loop stopped: nothing can adopt a generation.
#[derive(Debug, thiserror::Error)]
#[error("the tally loop is not running")]
pub struct LoopGone;

impl Adopter {
    /// An adopter and the receiving end for `service::run`.
    pub fn channel() -> (Adopter, mpsc::Receiver<Adopt>) {
        let (tx, rx) = mpsc::channel(1);
        (Adopter { tx }, rx)
    }

    /// Hands `next` to the tally loop and waits until it is in force.
    pub async fn adopt(&self, next: InForce) -> Result<(), LoopGone> {
        let (done, wait) = oneshot::channel();
        self.tx
            .send(Adopt { next, done })
            .await
            .map_err(|_| LoopGone)?;
        wait.await.map_err(|_| LoopGone)
    }
}
