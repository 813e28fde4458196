//! The API's writes on their way to the task that owns the config (the primary's config task,
//! `protocol.rs`): one at a time, each naming the generation it was based on, so that of two
//! writes based on one generation only the first lands and the second is a conflict.

use tokio::sync::{mpsc, oneshot};

/// meshlb's error codes in the envelope (docs/api.md#errors).
pub mod code {
    pub const UNAVAILABLE: u32 = 1000;
    pub const NOT_FOUND: u32 = 1001;
    pub const INVALID: u32 = 1002;
    pub const CONFLICT: u32 = 1003;
    pub const NOT_PRIMARY: u32 = 1004;
    pub const AUTH: u32 = 1005;
    pub const EXISTS: u32 = 1006;
    pub const METHOD: u32 = 1007;
    pub const TOO_LARGE: u32 = 1008;
}

/// Why a write was not taken: an HTTP status, Cloudflare-style error code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: http::StatusCode,
    pub code: u32,
    pub message: String,
    /// A document's errors, each with its field path.
    pub errors: Vec<FieldError>,
}

/// One error of a written document, with the path of the field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    pub path: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(status: http::StatusCode, code: u32, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            code,
            message: message.into(),
            errors: Vec::new(),
        }
    }

    /// A write based on a generation that is no longer in force (a lost race, or a stale
    /// `If-Match`).
    pub fn stale(based_on: u64, current: u64) -> Refusal {
        Refusal::new(
            http::StatusCode::CONFLICT,
            code::CONFLICT,
            format!("If-Match: the write is based on generation {based_on}, and {current} is in force: read it again and retry"),
        )
    }
}

/// A write handed to the owner of the config.
pub struct WriteRequest {
    /// Why (logged with the reload): `PUT /pools/eu`.
    pub why: String,
    /// The generation the text was edited from (`If-Match`, or the one the API read).
    pub base: u64,
    /// The whole next document, checked already by the API (the owner checks it again as it
    /// builds the generation).
    pub text: String,
    pub reply: oneshot::Sender<Result<Written, Refusal>>,
}

/// A write that landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The generation in force after it (the same as before when nothing changed).
    pub generation: u64,
    pub changed: bool,
}

/// How long a write waits for its reload.
const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Hands a write to the owner and waits for its outcome.
pub async fn submit(
    writes: &mpsc::Sender<WriteRequest>,
    why: String,
    base: u64,
    text: String,
) -> Result<Written, Refusal> {
    let unavailable = |m: &str| Refusal::new(http::StatusCode::SERVICE_UNAVAILABLE, 1000, m);
    let (reply, answer) = oneshot::channel();
    writes
        .send(WriteRequest {
            why,
            base,
            text,
            reply,
        })
        .await
        .map_err(|_| unavailable("the config task is not running"))?;
    match tokio::time::timeout(WAIT, answer).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => Err(unavailable("the config task stopped")),
        Err(_) => Err(Refusal::new(
            http::StatusCode::GATEWAY_TIMEOUT,
            1000,
            "the write's reload did not finish in 60 s; see the primary's log",
        )),
    }
}
