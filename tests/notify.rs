//! Notifications from a real aggregator fed by a real mesh: an origin stops and starts; the
//! change arrives by email through a real OpenSMTPD on loopback — over plain SMTP, STARTTLS and
//! implicit TLS (verified against a test CA) — read back from the mailbox, and by a signed JSON
//! webhook whose receiver fails the first attempt (so the retry is exercised); another channel
//! points at a dead SMTP port and must delay nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;
use support::*;

/// OpenSMTPD in the foreground on `port`, delivering every message to the local user's mbox;
/// `starttls` and `smtps` are TLS fronts for it (see `tls_front`).
struct Smtpd {
    port: u16,
    starttls: u16,
    smtps: u16,
    child: Child,
}

/// A CA (PEM, written to `dir/ca.pem` for the channels' `ca_file`) and a server config with a
/// certificate it signed for 127.0.0.1.
fn test_pki(dir: &std::path::Path) -> Arc<rustls::ServerConfig> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "meshlb test CA");
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "meshlb test SMTP server");
    let cert = params.signed_by(&key, &ca).expect("cert");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("ca.pem");
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .expect("server config");
    Arc::new(config)
}

/// A TLS front for the SMTP server on `upstream`: with `starttls`, it relays the server's
/// greeting, answers EHLO offering STARTTLS and switches to TLS when asked; otherwise it speaks
/// TLS from the first byte (SMTPS). After the handshake every byte goes to the real server.
///
/// Why a front: Debian 12's OpenSMTPD 6.8.0p2 cannot do TLS with OpenSSL 3 (every handshake
/// fails with "EVP lib", OpenSMTPD issues #1171/#1239, fixed only in later releases), so the
/// TLS is done here and the mail is still delivered by the real server.
fn tls_front(upstream: u16, starttls: bool, tls: Arc<rustls::ServerConfig>) -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    let mut server = BufReader::new(server);
                    let mut client = BufReader::new(client);
                    if starttls {
                        let mut line = String::new();
                        // Greeting, then EHLO (STARTTLS added to the answer) until STARTTLS.
                        if server.read_line(&mut line).await.is_err()
                            || client.get_mut().write_all(line.as_bytes()).await.is_err()
                        {
                            return;
                        }
                        loop {
                            line.clear();
                            if client.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line.to_ascii_uppercase().starts_with("STARTTLS") {
                                let ready = b"220 2.0.0 Ready to start TLS\r\n";
                                if client.get_mut().write_all(ready).await.is_err() {
                                    return;
                                }
                                break;
                            }
                            // The first EHLO is answered here (the server gets the one sent
                            // over TLS: it refuses a second).
                            let answer: &[u8] = if line.to_ascii_uppercase().starts_with("EHLO") {
                                b"250-127.0.0.1 Hello\r\n250-STARTTLS\r\n250 8BITMIME\r\n"
                            } else {
                                b"530 5.7.0 Must issue a STARTTLS command first\r\n"
                            };
                            if client.get_mut().write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                    let Ok(mut tls) = acceptor.accept(client.into_inner()).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                });
            }
        });
    });
    port
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
        let tls = test_pki(dir);
        Smtpd {
            port,
            starttls: tls_front(port, true, Arc::clone(&tls)),
            smtps: tls_front(port, false, tls),
            child,
        }
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
    let (scratch, key) = scratch_dir_with_key("notify");
    let dir = scratch.path();
    let secret = dir.join("hook-secret");
    std::fs::write(&secret, "webhook-signing-secret\n").expect("secret");
    let smtpd = Smtpd::start(dir);
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
name = "starttls"
from = "meshlb@localhost"
to = ["root+starttls@localhost"]
smtp_host = "127.0.0.1"
smtp_port = {starttls}
smtp_tls = "starttls"
ca_file = "{ca}"
[[notifications.email]]
name = "smtps"
from = "meshlb@localhost"
to = ["root+smtps@localhost"]
smtp_host = "127.0.0.1"
smtp_port = {smtps}
smtp_tls = "implicit"
ca_file = "{ca}"
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
            starttls = smtpd.starttls,
            smtps = smtpd.smtps,
            ca = dir.join("ca.pem").display(),
            secret = secret.display(),
        ),
    )
    .expect("config");
    let admin = free_tcp();
    let (mut mesh, seed) = start_mesh_seeded(&config, &key, admin, &[]);
    // A second aggregator on the same mesh: it sees the same changes, but only one of the two
    // sends (one webhook delivery per change, not two).
    let admin2 = free_tcp();
    mesh.0
        .push(start_aggregator(&config, &key, "ENAM", admin2, seed, &[]));
    wait_for(
        "the two aggregators to elect one sender",
        Duration::from_secs(10),
        || {
            let sender = |a| {
                scrape(a)
                    .lines()
                    .any(|l| l.starts_with("meshlb_notifier_sender{") && l.ends_with(" 1"))
            };
            let quiet = |a| {
                scrape(a)
                    .lines()
                    .any(|l| l.starts_with("meshlb_notifier_sender{") && l.ends_with(" 0"))
            };
            (sender(admin) && quiet(admin2)) || (sender(admin2) && quiet(admin))
        },
    );
    // Both aggregators (either may be the sender) have a healthy verdict before the origin
    // stops: a change from unknown is not notified (aggregator/src/notify/select.rs).
    let healthy = |a| {
        get(a, "/status").is_some_and(|s| s["pools"][0]["endpoints"][0]["verdict"] == "healthy")
    };
    wait_for(
        "the endpoint to be healthy on both aggregators",
        Duration::from_secs(20),
        || healthy(admin) && healthy(admin2),
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
    // One message per channel: plain, STARTTLS and implicit TLS (told apart by recipient).
    let delivered = |to: &str| {
        mailbox()
            .split("\nFrom ")
            .any(|m| m.contains(&subject) && m.contains(&format!("To: {to}\n")))
    };
    wait_for(
        "the emails in /var/mail/root",
        Duration::from_secs(20),
        || {
            delivered("root@localhost")
                && delivered("root+starttls@localhost")
                && delivered("root+smtps@localhost")
        },
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
    // By now a second sender's copy would have arrived too.
    let posts = |to: &str| {
        deliveries
            .lock()
            .expect("got")
            .iter()
            .filter(|d| d.body.contains(&format!("\"to\":\"{to}\"")))
            .count()
    };
    assert_eq!(
        (posts("unhealthy"), posts("healthy")),
        (1, 1),
        "one sender for two aggregators"
    );
    // The dead channel kept retrying and is counted, without holding anything up.
    wait_for(
        "the dead channel's retries in /metrics",
        Duration::from_secs(10),
        || {
            // On whichever aggregator is the sender.
            [admin, admin2].iter().any(|a| {
                scrape(*a).lines().any(|l| {
                    l.starts_with("meshlb_notifications_total")
                        && l.contains("channel=\"dead\"")
                        && l.contains("result=\"retried\"")
                        && !l.ends_with(" 0")
                })
            })
        },
    );
}
