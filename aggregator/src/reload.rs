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

impl Outcome {
    /// The HTTP status of `POST /-/reload`'s answer: 200 taken or unchanged, 422 refused.
    pub fn status(&self) -> http::StatusCode {
        if self.reloaded || self.unchanged {
            http::StatusCode::OK
        } else {
            http::StatusCode::UNPROCESSABLE_ENTITY
        }
    }
}

/// A reload asked for through the admin API.
#[derive(Debug)]
pub struct Request {
    pub reply: oneshot::Sender<Outcome>,
}

/// How long `POST /-/reload` waits for the reload (reading, validating, building, adopting).
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a reload asked for over HTTP has no outcome: the status to answer and why.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct NoOutcome {
    pub status: http::StatusCode,
    pub reason: &'static str,
}

/// Asks the reload task for a reload and waits (at most 30 s) for its outcome; what the
/// aggregator's admin API and a prober's metrics listener both answer `POST /-/reload` with.
pub async fn ask(requests: &mpsc::Sender<Request>) -> Result<Outcome, NoOutcome> {
    let unavailable = |reason| NoOutcome {
        status: http::StatusCode::SERVICE_UNAVAILABLE,
        reason,
    };
    let (reply, answer) = oneshot::channel();
    if requests.send(Request { reply }).await.is_err() {
        return Err(unavailable("the reload task is not running"));
    }
    match tokio::time::timeout(WAIT, answer).await {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(_)) => Err(unavailable("the reload task stopped")),
        Err(_) => Err(NoOutcome {
            status: http::StatusCode::GATEWAY_TIMEOUT,
            reason: "the reload did not finish in 30 s; see the log",
        }),
    }
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
