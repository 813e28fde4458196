//! Notifications from a real aggregator fed by a real mesh: an origin stops and starts; the
//! change arrives by email through a real OpenSMTPD on loopback (read back from the mailbox)
//! and by a signed JSON webhook whose receiver fails the first attempt (so the retry is
//! exercised); a third channel points at a dead SMTP port and must delay nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;
use support::*;

/// OpenSMTPD in the foreground, delivering every message to the local user's mbox.
struct Smtpd {
    port: u16,
    child: Child,
}

impl Smtpd {
    fn start(dir: &std::path::Path) -> Smtpd {
        let port = free_tcp().port();
        let conf = dir.join("smtpd.conf");
        std::fs::write(
            &conf,
            format!("listen on 127.0.0.1 port {port}\naction \"local\" mbox\nmatch from any for any action \"local\"\n"),
        )
        .expect("smtpd.conf");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let child = Command::new("/usr/sbin/smtpd")
            .args(["-d", "-f"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("smtpd (package opensmtpd)");
        wait_for("OpenSMTPD to listen", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Smtpd { port, child }
    }
}

impl Drop for Smtpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One webhook delivery as received.
#[derive(Debug, Clone)]
struct Delivery {
    signature: String,
    body: String,
}

type Deliveries = Arc<Mutex<Vec<Delivery>>>;

/// An HTTP receiver answering 500 to its first request and 204 to the rest; returns its
/// address, what it accepted, and how many requests it saw.
fn webhook_receiver() -> (SocketAddr, Deliveries, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let got = Arc::new(Mutex::new(Vec::new()));
    let attempts = Arc::new(Mutex::new(0usize));
    let (g, a) = (Arc::clone(&got), Arc::clone(&attempts));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut reader = BufReader::new(s.try_clone().expect("clone"));
            let (mut length, mut signature) = (0usize, String::new());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if lower.starts_with("x-meshlb-signature:") {
                    signature = line["x-meshlb-signature:".len()..].trim().to_string();
                }
                line.clear();
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let n = {
                let mut a = a.lock().expect("attempts");
                *a += 1;
                *a
            };
            if n == 1 {
                let _ = s.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                continue;
            }
            g.lock().expect("got").push(Delivery {
                signature,
                body: String::from_utf8_lossy(&body).to_string(),
            });
            let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
        }
    });
    (addr, got, attempts)
}

fn mailbox() -> String {
    std::fs::read_to_string("/var/mail/root").unwrap_or_default()
}

#[test]
fn health_changes_are_emailed_and_posted() {
    let dir = std::env::temp_dir().join(format!("meshlb-notify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("key");
    std::fs::write(&key, "the meshlb notification test key").expect("key");
    let secret = dir.join("hook-secret");
    std::fs::write(&secret, "webhook-signing-secret\n").expect("secret");
    let smtpd = Smtpd::start(&dir);
    let dead_smtp = free_tcp().port();
    let (hook, deliveries, attempts) = webhook_receiver();
    let origin = origin();
    // A name unique to this run, to find its mail among older ones in the mailbox.
    let endpoint = format!("origin-{}", std::process::id());
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
port = {port}
interval = 1
timeout = 1
consecutive_down = 1
consecutive_up = 1
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "{endpoint}", address = "127.0.0.1", port = {port} }}]
notification_filter = {{ pool = {{ disable = true }} }}
[[load_balancers]]
name = "www.example.test"
default_pools = ["web"]
[notifications]
batch_seconds = 1
max_attempts = 3
[[notifications.email]]
name = "ops"
from = "meshlb <meshlb@localhost>"
to = ["root@localhost"]
smtp_host = "127.0.0.1"
smtp_port = {smtp}
smtp_tls = "none"
[[notifications.email]]
name = "dead"
from = "meshlb@localhost"
to = ["root@localhost"]
smtp_host = "127.0.0.1"
smtp_port = {dead_smtp}
smtp_tls = "none"
[[notifications.webhooks]]
name = "hook"
url = "http://{hook}/meshlb"
secret_file = "{secret}"
"#,
            port = origin.port,
            smtp = smtpd.port,
            secret = secret.display(),
        ),
    )
    .expect("config");
    let admin = free_tcp();
    let _mesh = start_mesh(&config, &key, admin, &[]);
    let status = |want: &str| {
        get(admin, "/status").is_some_and(|s| {
            s.to_string().contains(&format!("\"{endpoint}\"")) && s.to_string().contains(want)
        })
    };
    wait_for(
        "the endpoint to be healthy",
        Duration::from_secs(20),
        || {
            get(admin, "/events").is_some_and(|e| e.to_string().contains("\"to\":\"healthy\""))
                || status("\"healthy\"")
        },
    );

    origin.stop();
    // The tally records the change at once, whatever the dead SMTP server does.
    let down = wait_for("the change in /events", Duration::from_secs(10), || {
        get(admin, "/events").is_some_and(|e| e.to_string().contains("\"to\":\"unhealthy\""))
    });
    println!("unhealthy recorded {down:?} after the stop");
    let posted = wait_for(
        "the webhook (second attempt)",
        Duration::from_secs(20),
        || !deliveries.lock().expect("got").is_empty(),
    );
    println!("webhook delivered {posted:?} after the change");
    let first = deliveries.lock().expect("got")[0].clone();
    assert!(
        *attempts.lock().expect("attempts") >= 2,
        "the 500 was retried"
    );
    let json: serde_json::Value = serde_json::from_str(&first.body).expect("json body");
    assert_eq!(json["source"], "meshlb");
    let event = &json["events"][0];
    assert_eq!(event["endpoint"], endpoint.as_str());
    assert_eq!(
        (event["from"].as_str(), event["to"].as_str()),
        (Some("healthy"), Some("unhealthy"))
    );
    assert!(
        json["events"]
            .as_array()
            .is_some_and(|a| a.iter().all(|e| e["kind"] == "endpoint")),
        "pool changes are filtered out by notification_filter: {json}"
    );
    // The signature is HMAC-SHA256 of the body with the secret file's content.
    let expected =
        aggregator::notify::webhook::signature(b"webhook-signing-secret", first.body.as_bytes());
    assert_eq!(first.signature, expected);

    let subject = format!("endpoint {endpoint} of pool web: healthy -> unhealthy");
    wait_for(
        "the email in /var/mail/root",
        Duration::from_secs(20),
        || mailbox().contains(&subject),
    );

    origin.start();
    let back = format!("endpoint {endpoint} of pool web: unhealthy -> healthy");
    wait_for("the recovery email", Duration::from_secs(20), || {
        mailbox().contains(&back)
    });
    wait_for("the recovery webhook", Duration::from_secs(20), || {
        deliveries
            .lock()
            .expect("got")
            .iter()
            .any(|d| d.body.contains("\"from\":\"unhealthy\",\"to\":\"healthy\""))
    });
    // The dead channel kept retrying and is counted, without holding anything up.
    wait_for(
        "the dead channel's retries in /metrics",
        Duration::from_secs(10),
        || {
            scrape(admin).lines().any(|l| {
                l.starts_with("meshlb_notifications_total")
                    && l.contains("channel=\"dead\"")
                    && l.contains("result=\"retried\"")
                    && !l.ends_with(" 0")
            })
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}
