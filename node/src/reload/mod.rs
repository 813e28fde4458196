//! Reloads as every node sees them: what triggers one (SIGHUP, the file changing, a request
//! over HTTP or from the library's caller), its outcome as `POST /-/reload` answers it, and
//! its metrics. The reload itself is the node's own (`aggregator::node`, `prober::node`),
//! driven by the config protocol (`crate::control::protocol`).

mod trigger;

pub use trigger::{count, record, started, ConfigWatch, Trigger, Triggers};

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

/// What makes a node reload besides `POST /-/reload` and its handle's `reload`.
#[derive(Debug, Clone, Copy)]
pub struct ReloadSettings {
    /// Reload on SIGHUP (a process-wide signal: one node per process should).
    pub on_hangup: bool,
    /// Reload when the file's content changes, looking this often (`--watch-config`).
    pub watch: Option<std::time::Duration>,
}

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

/// A reload asked for over HTTP (`POST /-/reload`) or by the library's caller.
#[derive(Debug)]
pub struct Request {
    /// Why, as the log names it: `POST /-/reload`, `SIGHUP`.
    pub why: String,
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
pub async fn ask(requests: &mpsc::Sender<Request>, why: &str) -> Result<Outcome, NoOutcome> {
    let unavailable = |reason| NoOutcome {
        status: http::StatusCode::SERVICE_UNAVAILABLE,
        reason,
    };
    let (reply, answer) = oneshot::channel();
    if requests
        .send(Request {
            why: why.to_string(),
            reply,
        })
        .await
        .is_err()
    {
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
