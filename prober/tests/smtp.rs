//! SMTP monitors against a real OpenSMTPD, and test servers that misbehave.

mod support;

use std::time::Duration;

use support::servers::Smtpd;
use support::{assert_fail, assert_pass, probe_once};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn ep(port: u16) -> String {
    format!("{{ name = \"e\", address = \"127.0.0.1\", port = {port} }}")
}

#[tokio::test]
async fn real_opensmtpd_passes() {
    let smtpd = Smtpd::start();
    let r = probe_once("type = \"smtp\"\nretries = 0", &ep(smtpd.port)).await;
    assert_pass(&r);
    assert_eq!(r.attempt.code, Some(221), "QUIT answered 221");
}

/// A one-connection SMTP-ish server that sends `script` lines in answer to each line read.
async fn fake(greeting: &'static str, replies: &'static [&'static str]) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            if !greeting.is_empty() {
                let _ = s.write_all(greeting.as_bytes()).await;
            }
            for reply in replies {
                let mut buf = [0u8; 256];
                if s.read(&mut buf).await.unwrap_or(0) == 0 {
                    break;
                }
                let _ = s.write_all(reply.as_bytes()).await;
            }
            // Then hang.
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    port
}

#[tokio::test]
async fn smtp_failures_carry_the_code() {
    let m = "type = \"smtp\"\nretries = 0\ntimeout = 1";
    let p = fake("554 no service\r\n", &[]).await;
    let r = probe_once(m, &ep(p)).await;
    assert_fail(&r, "unexpected code 554 to greeting");
    assert_eq!(r.attempt.code, Some(554));
    // A server that greets and then hangs: timeout.
    let p = fake("220 hello\r\n", &[]).await;
    assert_fail(&probe_once(m, &ep(p)).await, "timeout");
    // A server that never greets.
    let p = fake("", &[]).await;
    assert_fail(&probe_once(m, &ep(p)).await, "timeout");
    // EHLO refused with 550.
    let p = fake("220 hi\r\n", &["550 go away\r\n"]).await;
    assert_fail(&probe_once(m, &ep(p)).await, "unexpected code 550 to EHLO");
    // Multi-line EHLO, then QUIT answered wrongly.
    let p = fake(
        "220-hi\r\n220 there\r\n",
        &["250-a\r\n250 b\r\n", "250 bye?\r\n"],
    )
    .await;
    assert_fail(
        &probe_once(m, &ep(p)).await,
        "unexpected code 250 to QUIT (expected 221)",
    );
    // An old server: EHLO unknown (502), HELO 250, QUIT 221.
    let p = fake(
        "220 old\r\n",
        &["502 what\r\n", "250 ok\r\n", "221 bye\r\n"],
    )
    .await;
    assert_pass(&probe_once(m, &ep(p)).await);
}
