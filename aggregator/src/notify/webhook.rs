//! JSON webhooks through reqwest, signed with HMAC-SHA256 when the channel has a secret.

use std::time::Duration;

use hmac::{Hmac, Mac};
use lb_core::config::WebhookChannel;
use sha2::Sha256;

use super::error::{ChannelError, SendError};

pub struct WebhookSender {
    channel: WebhookChannel,
    client: reqwest::Client,
}

/// `sha256=<hex>` of the body under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else {
        return String::new();
    };
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

impl WebhookSender {
    pub fn new(channel: &WebhookChannel) -> Result<WebhookSender, ChannelError> {
        let tls = lb_tls::client_config(false, None)?;
        let client = reqwest::Client::builder()
            .use_preconfigured_tls((*tls).clone())
            .timeout(Duration::from_secs(10))
            .user_agent(concat!("meshlb/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ChannelError::Webhook {
                channel: channel.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(WebhookSender {
            channel: channel.clone(),
            client,
        })
    }

    pub async fn send(&self, body: Vec<u8>) -> Result<(), SendError> {
        let mut request = self
            .client
            .post(&self.channel.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        if let Some(secret) = &self.channel.secret {
            request = request.header(
                "X-Meshlb-Signature",
                signature(secret.read()?.as_bytes(), &body),
            );
        }
        let response = request.body(body).send().await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(SendError::Status(response.status()))
        }
    }
}
