//! Notifications of health changes (email, webhooks). The tally hands each change over with
//! `offer`, which never waits: a bounded queue feeds one task that batches bursts (changes
//! within `batch_window` of the first go out together) and sends each channel's share in its
//! own task with retries and backoff, so a dead SMTP server delays nothing but its own mail.
//!
//! Every aggregator sees every change; only one sends, so N aggregators do not send N copies:
//! the live aggregator (on this config) with the smallest node id, decided anew at each tally
//! from the gossip membership. While the sender dies, changes seen before the others notice
//! are not sent by them.

pub mod email;
pub mod error;
pub mod select;
pub mod webhook;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lb_core::config::{Config, PoolId};
use tokio::sync::mpsc;

use crate::events::HealthEvent;
use email::EmailSender;
pub use error::{ChannelError, SendError, SmtpSetupError};
use webhook::WebhookSender;

/// Changes queued for sending; beyond this a burst's extra changes are dropped and counted.
const QUEUE: usize = 10_000;
/// A batch closes early at this many changes.
const MAX_BATCH: usize = 500;

enum Sender {
    Email(EmailSender),
    Webhook(WebhookSender),
}

struct Channel {
    name: String,
    pools: Vec<PoolId>,
    sender: Sender,
}

impl Channel {
    fn kind(&self) -> &'static str {
        match self.sender {
            Sender::Email(_) => "email",
            Sender::Webhook(_) => "webhook",
        }
    }

    async fn send(&self, node: &str, events: &[&HealthEvent]) -> Result<(), SendError> {
        match &self.sender {
            Sender::Email(e) => {
                let (subject, body) = select::email_text(node, events);
                e.send(&subject, body).await
            }
            Sender::Webhook(w) => w.send(select::webhook_json(node, events)).await,
        }
    }
}

/// The tally's side of the notifier.
#[derive(Clone)]
pub struct Notifier {
    queue: mpsc::Sender<HealthEvent>,
    node: Arc<str>,
    sender: Arc<AtomicBool>,
}

impl Notifier {
    /// Starts the notifier task when the config has channels (`None` otherwise); a channel
    /// that cannot be set up (bad address, unreadable CA file) is an error now, not at the
    /// first outage.
    pub fn start(config: Arc<Config>, node: String) -> Result<Option<Notifier>, ChannelError> {
        let n = &config.notifications;
        if n.is_empty() {
            return Ok(None);
        }
        let mut channels = Vec::new();
        for c in &n.email {
            channels.push(Channel {
                name: c.name.clone(),
                pools: c.pools.clone(),
                sender: Sender::Email(EmailSender::new(c)?),
            });
        }
        // Pools' `notification_email` (Cloudflare): the first email channel's SMTP server and
        // sender, to the pool's addresses, for that pool alone (validation requires the channel).
        if let Some(first) = n.email.first() {
            for (i, pool) in config.pools.iter().enumerate() {
                if pool.notification_email.is_empty() {
                    continue;
                }
                let channel = lb_core::config::EmailChannel {
                    name: format!("pool {} notification_email", pool.name),
                    to: pool.notification_email.clone(),
                    pools: vec![lb_core::config::PoolId(i)],
                    ..first.clone()
                };
                channels.push(Channel {
                    name: channel.name.clone(),
                    pools: channel.pools.clone(),
                    sender: Sender::Email(EmailSender::new(&channel)?),
                });
            }
        }
        for c in &n.webhooks {
            channels.push(Channel {
                name: c.name.clone(),
                pools: c.pools.clone(),
                sender: Sender::Webhook(WebhookSender::new(c)?),
            });
        }
        for c in &channels {
            for result in ["sent", "failed", "retried"] {
                metrics::counter!("meshlb_notifications_total", "channel" => c.name.clone(), "kind" => c.kind(), "result" => result).absolute(0);
            }
        }
        metrics::counter!("meshlb_notifications_dropped_total").absolute(0);
        let (queue, rx) = mpsc::channel(QUEUE);
        metrics::gauge!("meshlb_notifier_sender").set(1.0);
        let node: Arc<str> = node.into();
        tokio::spawn(run(config, Arc::new(channels), node.to_string(), rx));
        Ok(Some(Notifier {
            queue,
            node,
            sender: Arc::new(AtomicBool::new(true)),
        }))
    }

    /// Decides whether this aggregator is the one that sends, from the aggregators the mesh
    /// holds alive on this config (`members`: their node ids).
    pub fn elect<'a>(&self, mut live_aggregators: impl Iterator<Item = &'a str>) {
        let me = live_aggregators.all(|other| *self.node <= *other);
        if self.sender.swap(me, Ordering::Relaxed) != me {
            metrics::gauge!("meshlb_notifier_sender").set(if me { 1.0 } else { 0.0 });
            tracing::info!(
                sender = me,
                "notifications: this aggregator {} sends",
                if me { "now" } else { "no longer" }
            );
        }
    }

    pub fn is_sender(&self) -> bool {
        self.sender.load(Ordering::Relaxed)
    }

    /// Queues a change (when this aggregator is the sender); never waits.
    pub fn offer(&self, event: &HealthEvent) {
        if !self.is_sender() {
            return;
        }
        if self.queue.try_send(event.clone()).is_err() {
            metrics::counter!("meshlb_notifications_dropped_total").increment(1);
        }
    }
}

async fn run(
    config: Arc<Config>,
    channels: Arc<Vec<Channel>>,
    node: String,
    mut rx: mpsc::Receiver<HealthEvent>,
) {
    let window = config.notifications.batch_window;
    let attempts = config.notifications.max_attempts;
    let node: Arc<str> = node.into();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let close = tokio::time::Instant::now() + window;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(close, rx.recv()).await {
                Ok(Some(e)) => batch.push(e),
                Ok(None) | Err(_) => break,
            }
        }
        let batch = Arc::new(batch);
        for i in 0..channels.len() {
            let (channels, batch, config, node) = (
                Arc::clone(&channels),
                Arc::clone(&batch),
                Arc::clone(&config),
                Arc::clone(&node),
            );
            tokio::spawn(async move {
                let channel = &channels[i];
                let events = select::select(&config, &channel.pools, &batch);
                if !events.is_empty() {
                    deliver(channel, &node, &events, attempts).await;
                }
            });
        }
    }
}

/// Sends with retries; gives up after `attempts` and logs it.
async fn deliver(channel: &Channel, node: &str, events: &[&HealthEvent], attempts: u32) {
    let labels = |result: &'static str| {
        [
            ("channel", channel.name.clone()),
            ("kind", channel.kind().to_string()),
            ("result", result.to_string()),
        ]
    };
    for attempt in 1..=attempts {
        if attempt > 1 {
            tokio::time::sleep(select::backoff(attempt)).await;
            metrics::counter!("meshlb_notifications_total", &labels("retried")).increment(1);
        }
        match tokio::time::timeout(Duration::from_secs(60), channel.send(node, events)).await {
            Ok(Ok(())) => {
                metrics::counter!("meshlb_notifications_total", &labels("sent")).increment(1);
                tracing::info!(channel = %channel.name, changes = events.len(), attempt, "notification sent");
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(channel = %channel.name, attempt, error = %e, "notification failed")
            }
            Err(_) => tracing::warn!(channel = %channel.name, attempt, "notification timed out"),
        }
    }
    metrics::counter!("meshlb_notifications_total", &labels("failed")).increment(1);
    tracing::error!(channel = %channel.name, changes = events.len(), attempts, "notification given up");
}
