//! What can go wrong with a notification channel: at start (a bad address, an unreadable CA
//! file), and when sending (the server or receiver refuses, a secret cannot be read).

use std::path::PathBuf;

use lb_core::config::SecretError;

/// A channel that cannot be set up; the aggregator does not start with it.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("notifications.email `{channel}`: {field} `{address}`: {reason}")]
    Address {
        channel: String,
        /// `from` or `to`.
        field: &'static str,
        address: String,
        reason: String,
    },
    #[error("notifications.email `{channel}`: {error}")]
    Smtp {
        channel: String,
        error: SmtpSetupError,
    },
    #[error("notifications.webhooks `{channel}`: {reason}")]
    Webhook { channel: String, reason: String },
    #[error(transparent)]
    Tls(#[from] lb_tls::TlsError),
}

/// The SMTP transport of a channel could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SmtpSetupError {
    #[error("ca_file {}: {reason}", path.display())]
    CaFile { path: PathBuf, reason: String },
    #[error("tls: {0}")]
    Tls(String),
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// A notification that did not go out (it is retried, then given up and logged).
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Smtp(#[from] SmtpSetupError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// lettre could not build the message.
    #[error("{0}")]
    Message(String),
    #[error(transparent)]
    SmtpServer(#[from] lettre::transport::smtp::Error),
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    #[error("the receiver answered {0}")]
    Status(reqwest::StatusCode),
}
