//! Validation of `[notifications]` and pools' `notification_filter`.

use std::collections::HashSet;
use std::time::Duration;

use super::*;
use crate::config::notifications::*;

/// `local@domain` with something on both sides, optionally as `Name <local@domain>`.
fn is_mailbox(s: &str) -> bool {
    let addr = match (s.find('<'), s.strip_suffix('>')) {
        (Some(i), Some(rest)) => &rest[i + 1..],
        _ => s,
    };
    matches!(addr.split_once('@'), Some((l, d)) if !l.is_empty() && !d.is_empty() && !d.contains('@') && !addr.contains(char::is_whitespace))
}

impl Validator<'_> {
    /// A pool's `notification_email`: comma-separated addresses (empty: none).
    pub(super) fn notification_email(&mut self, pool: &str, list: Option<&str>) -> Vec<String> {
        let mut out = Vec::new();
        for address in list.unwrap_or("").split(',').map(str::trim) {
            if address.is_empty() {
                continue;
            }
            if is_mailbox(address) {
                out.push(address.to_string());
            } else {
                self.sink.push(
                    format!("{pool}.notification_email"),
                    format!("`{address}` is not an email address"),
                );
            }
        }
        out
    }

    /// Pools' `notification_email` is sent through an email channel: there must be one.
    pub(super) fn pool_emails_have_a_channel(&mut self, pools: &[Pool], n: &Notifications) {
        if !n.email.is_empty() {
            return;
        }
        for (i, p) in pools.iter().enumerate() {
            if !p.notification_email.is_empty() {
                self.sink.push(
                    format!("pools[{i}].notification_email"),
                    "needs an email channel to send through: add a [[notifications.email]] (its SMTP server and `from` are used)",
                );
            }
        }
    }

    pub(super) fn notification_filter(f: Option<&RawNotificationFilter>) -> NotificationFilter {
        let kind = |k: Option<&RawKindFilter>| {
            k.map_or(KindFilter::default(), |k| KindFilter {
                disable: k.disable,
                healthy: k.healthy,
            })
        };
        f.map_or(NotificationFilter::default(), |f| NotificationFilter {
            origin: kind(f.origin.as_ref()),
            pool: kind(f.pool.as_ref()),
        })
    }

    fn secret(
        &mut self,
        path: &str,
        file: Option<&String>,
        env: Option<&String>,
        what: &str,
    ) -> Option<SecretSource> {
        match (file, env) {
            (Some(f), None) => Some(SecretSource::File(f.into())),
            (None, Some(e)) => Some(SecretSource::Env(e.clone())),
            (None, None) => None,
            (Some(_), Some(_)) => {
                self.sink.push(
                    path.to_string(),
                    format!("give {what}_file or {what}_env, not both"),
                );
                None
            }
        }
    }

    fn channel_pools(&mut self, path: &str, names: &[String]) -> Vec<PoolId> {
        names
            .iter()
            .enumerate()
            .filter_map(|(i, n)| self.pool_ref(&format!("{path}[{i}]"), n))
            .collect()
    }

    pub(super) fn notifications(&mut self, n: &RawNotifications) -> Notifications {
        let defaults = Notifications::default();
        let batch_window = match n.batch_seconds {
            None => defaults.batch_window,
            Some(s) if s <= 3600 => Duration::from_secs(u64::from(s)),
            Some(s) => {
                self.sink.push(
                    "notifications.batch_seconds",
                    format!("must be 0..=3600 seconds (got {s})"),
                );
                defaults.batch_window
            }
        };
        let max_attempts = match n.max_attempts {
            None => defaults.max_attempts,
            Some(a) if (1..=20).contains(&a) => a,
            Some(a) => {
                self.sink.push(
                    "notifications.max_attempts",
                    format!("must be 1..=20 (got {a})"),
                );
                defaults.max_attempts
            }
        };
        let mut names = HashSet::new();
        let email = (n.email.iter().enumerate())
            .map(|(i, e)| self.email_channel(&format!("notifications.email[{i}]"), e, &mut names))
            .collect();
        let webhooks = (n.webhooks.iter().enumerate())
            .map(|(i, w)| self.webhook(&format!("notifications.webhooks[{i}]"), w, &mut names))
            .collect();
        Notifications {
            batch_window,
            max_attempts,
            email,
            webhooks,
        }
    }

    /// A channel's name: valid, and unique among every channel.
    fn channel_name(&mut self, path: &str, name: &str, names: &mut HashSet<String>) {
        if let Some(problem) = name_problem(name) {
            self.sink.push(format!("{path}.name"), problem);
        } else if !names.insert(name.to_string()) {
            self.sink.push(
                format!("{path}.name"),
                format!("duplicate notification channel `{name}`"),
            );
        }
    }

    /// An email channel: its addresses, its SMTP server and how it is reached, its credentials.
    fn email_channel(
        &mut self,
        path: &str,
        e: &RawEmail,
        names: &mut HashSet<String>,
    ) -> EmailChannel {
        self.channel_name(path, &e.name, names);
        if !is_mailbox(&e.from) {
            self.sink.push(
                format!("{path}.from"),
                format!("`{}` is not an email address", e.from),
            );
        }
        if e.to.is_empty() {
            self.sink
                .push(format!("{path}.to"), "needs at least one address");
        }
        for (j, t) in e.to.iter().enumerate() {
            if !is_mailbox(t) {
                self.sink.push(
                    format!("{path}.to[{j}]"),
                    format!("`{t}` is not an email address"),
                );
            }
        }
        if e.smtp_host.trim().is_empty() {
            self.sink
                .push(format!("{path}.smtp_host"), "must not be empty");
        }
        let smtp_tls = match e.smtp_tls.as_deref().unwrap_or("starttls") {
            "tls" => SmtpTls::Implicit,
            raw => self.choice(format!("{path}.smtp_tls"), "value", raw, SmtpTls::StartTls),
        };
        let smtp_port = e.smtp_port.unwrap_or(smtp_tls.default_port());
        if smtp_port == 0 {
            self.sink
                .push(format!("{path}.smtp_port"), "must be 1..=65535");
        }
        let password = self.secret(
            path,
            e.password_file.as_ref(),
            e.password_env.as_ref(),
            "password",
        );
        if password.is_some() != e.username.is_some() {
            self.sink.push(
                format!("{path}.username"),
                "SMTP auth needs both username and password_file/password_env (passwords never sit in the config)",
            );
        }
        if password.is_some() && smtp_tls == SmtpTls::None {
            self.sink.push(
                format!("{path}.smtp_tls"),
                "a password is never sent in clear: use starttls or implicit",
            );
        }
        let pools = self.channel_pools(&format!("{path}.pools"), &e.pools);
        EmailChannel {
            name: e.name.clone(),
            from: e.from.clone(),
            to: e.to.clone(),
            smtp_host: e.smtp_host.clone(),
            smtp_port,
            smtp_tls,
            username: e.username.clone(),
            password,
            ca_file: e.ca_file.as_ref().map(Into::into),
            pools,
        }
    }

    /// A webhook channel: its URL and signing secret.
    fn webhook(
        &mut self,
        path: &str,
        w: &RawWebhook,
        names: &mut HashSet<String>,
    ) -> WebhookChannel {
        self.channel_name(path, &w.name, names);
        let lower = w.url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("https://")
            .or_else(|| lower.strip_prefix("http://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            self.sink.push(
                format!("{path}.url"),
                format!("`{}` is not an http:// or https:// URL", w.url),
            );
        }
        let secret = self.secret(
            path,
            w.secret_file.as_ref(),
            w.secret_env.as_ref(),
            "secret",
        );
        let pools = self.channel_pools(&format!("{path}.pools"), &w.pools);
        WebhookChannel {
            name: w.name.clone(),
            url: w.url.clone(),
            secret,
            pools,
        }
    }
}
