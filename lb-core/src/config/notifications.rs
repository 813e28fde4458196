//! `[notifications]` and pools' `notification_filter`: who hears about health changes, and
//! which changes (Cloudflare's filter semantics).

use std::path::PathBuf;
use std::time::Duration;

use super::monitor::SecretSource;
use super::pool::PoolId;

/// Where health changes are sent, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Notifications {
    /// Changes arriving within this window after the first go out as one message.
    pub batch_window: Duration,
    /// Attempts per message and channel (the first included), with exponential backoff.
    pub max_attempts: u32,
    pub email: Vec<EmailChannel>,
    pub webhooks: Vec<WebhookChannel>,
}

impl Default for Notifications {
    fn default() -> Self {
        Notifications {
            batch_window: Duration::from_secs(5),
            max_attempts: 5,
            email: Vec::new(),
            webhooks: Vec::new(),
        }
    }
}

impl Notifications {
    pub fn is_empty(&self) -> bool {
        self.email.is_empty() && self.webhooks.is_empty()
    }
}

crate::choice! {
    /// How to reach the SMTP server.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SmtpTls {
        /// Plain SMTP (a relay on the same host or network).
        None => "none",
        /// STARTTLS required.
        StartTls => "starttls",
        /// TLS from the first byte ("SMTPS"; `tls` is read as this too).
        Implicit => "implicit",
    }
}

impl SmtpTls {
    /// The port the server listens on for it by default.
    pub const fn default_port(self) -> u16 {
        match self {
            SmtpTls::None => 25,
            SmtpTls::StartTls => 587,
            SmtpTls::Implicit => 465,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmailChannel {
    pub name: String,
    pub from: String,
    pub to: Vec<String>,
    pub smtp_host: String,
    pub smtp_port: u16,
    pub smtp_tls: SmtpTls,
    pub username: Option<String>,
    pub password: Option<SecretSource>,
    /// Extra trust anchors (PEM) for the SMTP server's certificate.
    pub ca_file: Option<PathBuf>,
    /// Only changes of these pools (and their endpoints); empty: all pools.
    pub pools: Vec<PoolId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookChannel {
    pub name: String,
    /// `http://` or `https://`.
    pub url: String,
    /// When set, each body is signed: `X-Meshlb-Signature: sha256=<hex HMAC of the body>`.
    pub secret: Option<SecretSource>,
    pub pools: Vec<PoolId>,
}

/// Cloudflare's `notification_filter` for one kind of change: `disable` mutes it; `healthy`
/// set to true or false keeps only changes *to* that state; unset keeps both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KindFilter {
    pub disable: bool,
    pub healthy: Option<bool>,
}

impl KindFilter {
    /// Whether a change that made the subject healthy (`true`) or not passes.
    pub fn passes(self, now_healthy: bool) -> bool {
        !self.disable && self.healthy.is_none_or(|h| h == now_healthy)
    }
}

/// A pool's `notification_filter`: origins (endpoints) and the pool itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NotificationFilter {
    pub origin: KindFilter,
    pub pool: KindFilter,
}
