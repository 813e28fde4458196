//! Email through lettre: plain SMTP, STARTTLS or implicit TLS, optional auth with a password
//! read from its file or environment variable at each send (rotation needs no restart).

use std::time::Duration;

use lb_core::config::{EmailChannel, SmtpTls};
use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::error::{ChannelError, SendError, SmtpSetupError};

/// A channel ready to send: addresses parsed once, at start.
pub struct EmailSender {
    channel: EmailChannel,
    from: Mailbox,
    to: Vec<Mailbox>,
}

impl EmailSender {
    /// Checks the addresses and TLS settings now, so a bad channel fails the start.
    pub fn new(channel: &EmailChannel) -> Result<EmailSender, ChannelError> {
        let bad = |field, address: &str, e: lettre::address::AddressError| ChannelError::Address {
            channel: channel.name.clone(),
            field,
            address: address.to_string(),
            reason: e.to_string(),
        };
        let from: Mailbox = channel
            .from
            .parse()
            .map_err(|e| bad("from", &channel.from, e))?;
        let to = channel
            .to
            .iter()
            .map(|t| t.parse().map_err(|e| bad("to", t, e)))
            .collect::<Result<Vec<Mailbox>, ChannelError>>()?;
        let sender = EmailSender {
            channel: channel.clone(),
            from,
            to,
        };
        sender.transport().map_err(|error| ChannelError::Smtp {
            channel: channel.name.clone(),
            error,
        })?;
        Ok(sender)
    }

    fn transport(&self) -> Result<AsyncSmtpTransport<Tokio1Executor>, SmtpSetupError> {
        let c = &self.channel;
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&c.smtp_host)
            .port(c.smtp_port)
            .timeout(Some(Duration::from_secs(20)));
        if c.smtp_tls != SmtpTls::None {
            let mut params = TlsParameters::builder(c.smtp_host.clone());
            if let Some(path) = &c.ca_file {
                let ca_file = |reason: String| SmtpSetupError::CaFile {
                    path: path.clone(),
                    reason,
                };
                let pem = std::fs::read(path).map_err(|e| ca_file(e.to_string()))?;
                let cert = Certificate::from_pem(&pem).map_err(|e| ca_file(e.to_string()))?;
                params = params.add_root_certificate(cert);
            }
            let params = params
                .build_rustls()
                .map_err(|e| SmtpSetupError::Tls(e.to_string()))?;
            builder = builder.tls(match c.smtp_tls {
                SmtpTls::Implicit => Tls::Wrapper(params),
                _ => Tls::Required(params),
            });
        }
        if let (Some(user), Some(secret)) = (&c.username, &c.password) {
            builder = builder.credentials(Credentials::new(user.clone(), secret.read()?));
        }
        Ok(builder.build())
    }

    pub async fn send(&self, subject: &str, body: String) -> Result<(), SendError> {
        let mut message = Message::builder()
            .from(self.from.clone())
            .subject(subject)
            .header(ContentType::TEXT_PLAIN);
        for t in &self.to {
            message = message.to(t.clone());
        }
        let message = message
            .body(body)
            .map_err(|e| SendError::Message(e.to_string()))?;
        self.transport()?.send(message).await?;
        Ok(())
    }
}
