//! Notifications: a pool's `notification_email` list and the email channel it needs, and the
//! email and webhook channels with their errors.

use super::*;

/// MINIMAL's pool with `notification_email = "{emails}"`, and `channel` after it.
fn pool_emails(emails: &str, channel: &str) -> String {
    let pool = format!("origins = [{{ name = \"e\", address = \"192.0.2.1\" }}]\nnotification_email = \"{emails}\"");
    format!(
        "{}{channel}",
        MINIMAL.replace(
            r#"origins = [{ name = "e", address = "192.0.2.1" }]"#,
            &pool
        )
    )
}

const EMAIL_CHANNEL: &str = r#"
[[notifications.email]]
name = "ops"
from = "meshlb@example.test"
to = ["ops@example.test"]
smtp_host = "smtp.example.test"
"#;

#[test]
fn a_pools_notification_email_is_a_comma_separated_list() {
    let c = parse(&pool_emails(
        "a@example.test, b@example.test",
        EMAIL_CHANNEL,
    ))
    .expect("valid");
    assert_eq!(
        c.pools[0].notification_email,
        ["a@example.test", "b@example.test"]
    );
    let e = errors(&pool_emails("a@example.test, nobody", EMAIL_CHANNEL));
    has(
        &e,
        "pools[0].notification_email: `nobody` is not an email address",
    );
}

#[test]
fn a_pools_notification_email_needs_an_email_channel() {
    let e = errors(&pool_emails("a@example.test", ""));
    has(&e, "pools[0].notification_email: needs an email channel");
    parse(&pool_emails("", "")).expect("an empty list needs none");
}

#[test]
fn notifications_channels_and_their_errors() {
    let ok = format!(
        r#"{MINIMAL}
[notifications]
batch_seconds = 2
[[notifications.email]]
name = "ops"
from = "meshlb <meshlb@example.test>"
to = ["ops@example.test"]
smtp_host = "smtp.example.test"
username = "meshlb"
password_env = "SMTP_PASSWORD"
pools = ["p"]
[[notifications.webhooks]]
name = "hook"
url = "https://hooks.example.test/x"
secret_env = "HOOK_SECRET"
"#
    );
    let c = parse(&ok).expect("valid");
    let n = &c.notifications;
    assert_eq!(n.batch_window, std::time::Duration::from_secs(2));
    assert_eq!(n.max_attempts, 5);
    assert_eq!(n.email[0].smtp_tls, SmtpTls::StartTls);
    assert_eq!(n.email[0].smtp_port, 587, "STARTTLS's submission port");
    assert_eq!(n.email[0].pools, vec![PoolId(0)]);
    assert_eq!(n.webhooks[0].url, "https://hooks.example.test/x");
    let bad = format!(
        r#"{MINIMAL}
[notifications]
batch_seconds = 7200
max_attempts = 0
[[notifications.email]]
name = "ops"
from = "nobody"
to = []
smtp_host = "smtp.example.test"
smtp_tls = "ssl"
password_file = "/etc/meshlb/smtp"
pools = ["nope"]
[[notifications.email]]
name = "clear"
from = "a@b.test"
to = ["c@d", "not an address"]
smtp_host = "127.0.0.1"
smtp_tls = "none"
username = "u"
password_env = "P"
[[notifications.webhooks]]
name = "ops"
url = "ftp://example.test/"
secret_file = "a"
secret_env = "B"
"#
    );
    let e = errors(&bad);
    has(
        &e,
        "notifications.batch_seconds: must be 0..=3600 seconds (got 7200)",
    );
    has(&e, "notifications.max_attempts: must be 1..=20 (got 0)");
    has(
        &e,
        "notifications.email[0].from: `nobody` is not an email address",
    );
    has(&e, "notifications.email[0].to: needs at least one address");
    has(
        &e,
        "notifications.email[0].smtp_tls: unknown value `ssl` (expected none, starttls or implicit)",
    );
    has(&e, "notifications.email[0].username: SMTP auth needs both username and password_file/password_env");
    has(&e, "notifications.email[0].pools[0]");
    has(
        &e,
        "notifications.email[1].to[1]: `not an address` is not an email address",
    );
    has(
        &e,
        "notifications.email[1].smtp_tls: a password is never sent in clear",
    );
    has(
        &e,
        "notifications.webhooks[0].name: duplicate notification channel `ops`",
    );
    has(
        &e,
        "notifications.webhooks[0].url: `ftp://example.test/` is not an http:// or https:// URL",
    );
    has(
        &e,
        "notifications.webhooks[0]: give secret_file or secret_env, not both",
    );
}
