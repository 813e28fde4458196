//! The adoption of a new config generation by the tally loop (`service.rs`), which carries
//! the tally's state over by identity before anything serves the new config.

use tokio::sync::{mpsc, oneshot};

use crate::shared::InForce;

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
