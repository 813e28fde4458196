//! Notifications from a real aggregator fed by a real mesh: an origin stops and starts; the
//! change arrives by email through a real OpenSMTPD on loopback — over plain SMTP, STARTTLS and
//! implicit TLS (verified against a test CA) — read back from the mailbox, and by a signed JSON
//! webhook whose receiver fails the first attempt (so the retry is exercised); another channel
//! points at a dead SMTP port and must delay nothing.
//!
//! One world (`World`), started once; the origin's outage happens once in it, and each named
//! trial checks one thing that outage had to bring about. A `libtest-mimic` harness (`main` at
//! the end) runs the trials and stops the world after them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use test_support::config::{quote, Config, Lb, Monitor, Pool};
use test_support::*;

/// OpenSMTPD in the foreground on `port`, delivering every message to the local user's mbox;
/// `starttls` and `smtps` are TLS fronts for it (see `tls_front`).
struct Smtpd {
    port: u16,
    starttls: u16,
    smtps: u16,
    child: Child,
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
        let tls = test_support::pki::server_signed_by_test_ca(&["127.0.0.1"], &dir.join("ca.pem"));
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

/// A mesh with two aggregators over one origin, whose changes go by email to a real OpenSMTPD
/// (plain, STARTTLS, implicit TLS, and a dead SMTP port) and by a signed webhook whose receiver
/// fails the first attempt; and when the origin's outage (stop, then start) was recorded.
struct World {
    admin: SocketAddr,
    admin2: SocketAddr,
    endpoint: String,
    deliveries: Deliveries,
    attempts: Arc<Mutex<usize>>,
    origin: Origin,
    /// How long after the origin stopped `/events` showed it unhealthy (`None`: not within
    /// 10 s); `None` before the outage.
    outage: Option<Option<Duration>>,
    _smtpd: Smtpd,
    _scratch: tempfile::TempDir,
    _mesh: Procs,
}

/// The aggregators' config: the origin's endpoint `endpoint` alone in pool `web`, notified
/// through the channels named in `World`.
fn notify_config(
    dir: &std::path::Path,
    endpoint: &str,
    port: u16,
    smtpd: &Smtpd,
    dead_smtp: u16,
    hook: SocketAddr,
) -> String {
    let email = |name: &str, from: &str, to: &str, port: u16, tls: &str| {
        let ca = if tls == "none" {
            String::new()
        } else {
            format!(
                "ca_file = {}\n",
                quote(&dir.join("ca.pem").display().to_string())
            )
        };
        format!(
            "[[notifications.email]]\nname = {}\nfrom = {}\nto = [{}]\nsmtp_host = \"127.0.0.1\"\n\
             smtp_port = {port}\nsmtp_tls = {}\n{ca}",
            quote(name),
            quote(from),
            quote(to),
            quote(tls)
        )
    };
    let secret = quote(&dir.join("hook-secret").display().to_string());
    Config::new()
        .monitor(Monitor::http("http").port(port).interval(1).timeout(1).consecutive(1, 1))
        .pool(
            Pool::new("web")
                .monitor("http")
                .regions(&["WEU"])
                .origin(endpoint, ("127.0.0.1", port))
                .set("notification_filter", "{ pool = { disable = true } }")
                .set("notification_email", "\"root+pool@localhost\""),
        )
        .load_balancer(Lb::new("www.example.test").pools(&["web"]))
        .extra("[notifications]\nbatch_seconds = 1\nmax_attempts = 3")
        .extra(email("ops", "meshlb <meshlb@localhost>", "root@localhost", smtpd.port, "none"))
        .extra(email("starttls", "meshlb@localhost", "root+starttls@localhost", smtpd.starttls, "starttls"))
        .extra(email("smtps", "meshlb@localhost", "root+smtps@localhost", smtpd.smtps, "implicit"))
        .extra(email("dead", "meshlb@localhost", "root@localhost", dead_smtp, "none"))
        .extra(format!(
            "[[notifications.webhooks]]\nname = \"hook\"\nurl = \"http://{hook}/meshlb\"\nsecret_file = {secret}"
        ))
        .render()
}

/// Whether `/metrics` at `admin` says this aggregator sends (`1`) or not (`0`).
fn sender_is(admin: SocketAddr, value: &str) -> bool {
    scrape(admin)
        .lines()
        .any(|l| l.starts_with("meshlb_notifier_sender{") && l.ends_with(&format!(" {value}")))
}

fn start_world() -> World {
    let (scratch, key) = scratch_dir_with_key("notify");
    let dir = scratch.path();
    std::fs::write(dir.join("hook-secret"), "webhook-signing-secret\n").expect("secret");
    let smtpd = Smtpd::start(dir);
    let dead_smtp = free_tcp().port();
    let (hook, deliveries, attempts) = webhook_receiver();
    let origin = origin();
    // A name unique to this run, to find its mail among older ones in the mailbox.
    let endpoint = format!("origin-{}", std::process::id());
    let config = dir.join("meshlb.toml");
    let text = notify_config(dir, &endpoint, origin.port, &smtpd, dead_smtp, hook);
    std::fs::write(&config, text).expect("config");
    let admin = free_tcp();
    let (mut mesh, seed) = start_mesh_seeded(&config, &key, admin, &[]);
    // A second aggregator on the same mesh: it sees the same changes, but only one of the two
    // sends (one webhook delivery per change, not two).
    let admin2 = free_tcp();
    mesh.0
        .push(start_aggregator(&config, &key, "ENAM", admin2, seed, &[]));
    World {
        admin,
        admin2,
        endpoint,
        deliveries,
        attempts,
        origin,
        outage: None,
        _smtpd: smtpd,
        _scratch: scratch,
        _mesh: mesh,
    }
}

static WORLD: Shared<World> = Shared::new(start_world);

impl World {
    /// Waits for one sender among the two aggregators, and a healthy verdict on both (a change
    /// from unknown is not notified: aggregator/src/notify/select.rs).
    fn wait_ready(&self) {
        let (a, b) = (self.admin, self.admin2);
        wait_for(
            "the two aggregators to elect one sender",
            Duration::from_secs(10),
            || (sender_is(a, "1") && sender_is(b, "0")) || (sender_is(b, "1") && sender_is(a, "0")),
        );
        let healthy = |a| {
            get(a, "/status").is_some_and(|s| s["pools"][0]["endpoints"][0]["verdict"] == "healthy")
        };
        wait_for(
            "the endpoint to be healthy on both aggregators",
            Duration::from_secs(20),
            || healthy(a) && healthy(b),
        );
    }

    /// The origin's outage, once per world: it stops until its change was recorded and sent
    /// (webhook and the three emails, waited for without failing: the trials check them), then
    /// starts again.
    fn outage(&mut self) -> Option<Duration> {
        if let Some(recorded) = self.outage {
            return recorded;
        }
        self.wait_ready();
        self.origin.stop();
        let recorded = wait_until(Duration::from_secs(10), || {
            get(self.admin, "/events")
                .is_some_and(|e| e.to_string().contains("\"to\":\"unhealthy\""))
        });
        self.outage = Some(recorded);
        let subject = self.subject("healthy -> unhealthy");
        wait_until(Duration::from_secs(20), || {
            !self.deliveries.lock().expect("got").is_empty()
                && ["root", "root+starttls", "root+smtps"]
                    .iter()
                    .all(|to| delivered(&subject, &format!("{to}@localhost")))
        });
        self.origin.start();
        recorded
    }

    /// The subject of the email for a change (`"healthy -> unhealthy"`) of the endpoint.
    fn subject(&self, change: &str) -> String {
        format!("endpoint {} of pool web: {change}", self.endpoint)
    }

    /// The webhook deliveries whose body contains `needle`, waited for (20 s) to be one.
    fn delivery(&self, needle: &str) -> Delivery {
        let find = || {
            let got = self.deliveries.lock().expect("got");
            got.iter().find(|d| d.body.contains(needle)).cloned()
        };
        wait_for("the webhook delivery", Duration::from_secs(20), || {
            find().is_some()
        });
        find().expect("delivery")
    }

    /// The first webhook delivery, the down change's.
    fn first_delivery(&self) -> Delivery {
        self.delivery("\"to\":\"unhealthy\"")
    }
}

/// Whether a message with `subject` to `to` is in root's mailbox.
fn delivered(subject: &str, to: &str) -> bool {
    mailbox()
        .split("\nFrom ")
        .any(|m| m.contains(subject) && m.contains(&format!("To: {to}\n")))
}

/// Waits for the down change's email to `to`.
fn down_emailed_to(w: &mut World, to: &str) {
    w.outage();
    let subject = w.subject("healthy -> unhealthy");
    wait_for(
        &format!("the email to {to}"),
        Duration::from_secs(20),
        || delivered(&subject, to),
    );
}

fn a_change_is_recorded_at_once_whatever_a_dead_smtp_server_does(w: &mut World) {
    let recorded = w.outage();
    let after = recorded.expect("the change in /events within 10 s of the stop");
    println!("unhealthy recorded {after:?} after the stop");
}

fn a_webhook_post_answered_500_is_retried(w: &mut World) {
    w.outage();
    w.first_delivery();
    assert!(
        *w.attempts.lock().expect("attempts") >= 2,
        "the 500 was retried"
    );
}

fn the_webhook_body_names_the_endpoint_and_its_change(w: &mut World) {
    w.outage();
    let json: serde_json::Value =
        serde_json::from_str(&w.first_delivery().body).expect("json body");
    assert_eq!(json["source"], "meshlb");
    let event = &json["events"][0];
    assert_eq!(event["endpoint"], w.endpoint.as_str());
    assert_eq!(
        (event["from"].as_str(), event["to"].as_str()),
        (Some("healthy"), Some("unhealthy"))
    );
}

fn the_notification_filter_keeps_pool_changes_out(w: &mut World) {
    w.outage();
    let json: serde_json::Value =
        serde_json::from_str(&w.first_delivery().body).expect("json body");
    let events = json["events"].as_array();
    assert!(
        events.is_some_and(|a| a.iter().all(|e| e["kind"] == "endpoint")),
        "pool changes are filtered out by notification_filter: {json}"
    );
}

fn the_webhook_is_signed_with_hmac_sha256_of_the_secret_file(w: &mut World) {
    w.outage();
    let first = w.first_delivery();
    let expected =
        aggregator::notify::webhook::signature(b"webhook-signing-secret", first.body.as_bytes());
    assert_eq!(first.signature, expected);
}

fn a_change_is_emailed_over_plain_smtp(w: &mut World) {
    down_emailed_to(w, "root@localhost");
}

fn a_pools_notification_email_is_mailed_through_the_first_email_channel(w: &mut World) {
    down_emailed_to(w, "root+pool@localhost");
}

fn a_change_is_emailed_over_starttls(w: &mut World) {
    down_emailed_to(w, "root+starttls@localhost");
}

fn a_change_is_emailed_over_implicit_tls(w: &mut World) {
    down_emailed_to(w, "root+smtps@localhost");
}

fn a_recovery_is_emailed_and_posted(w: &mut World) {
    w.outage();
    let back = w.subject("unhealthy -> healthy");
    wait_for("the recovery email", Duration::from_secs(20), || {
        mailbox().contains(&back)
    });
    w.delivery("\"from\":\"unhealthy\",\"to\":\"healthy\"");
}

fn two_aggregators_send_one_post_per_change(w: &mut World) {
    w.outage();
    // Once the recovery is posted, a second sender's copy of the first would have arrived too.
    w.delivery("\"from\":\"unhealthy\",\"to\":\"healthy\"");
    let posts = |to: &str| {
        let got = w.deliveries.lock().expect("got");
        got.iter()
            .filter(|d| d.body.contains(&format!("\"to\":\"{to}\"")))
            .count()
    };
    assert_eq!(
        (posts("unhealthy"), posts("healthy")),
        (1, 1),
        "one sender for two aggregators"
    );
}

fn a_dead_smtp_channel_is_retried_and_counted_without_holding_anything_up(w: &mut World) {
    w.outage();
    // The other channels' emails were not held up by it.
    let subject = w.subject("healthy -> unhealthy");
    wait_for("the emails", Duration::from_secs(20), || {
        delivered(&subject, "root@localhost")
    });
    let retried = |a: SocketAddr| {
        scrape(a).lines().any(|l| {
            l.starts_with("meshlb_notifications_total")
                && l.contains("channel=\"dead\"")
                && l.contains("result=\"retried\"")
                && !l.ends_with(" 0")
        })
    };
    // On whichever aggregator is the sender.
    wait_for(
        "the dead channel's retries in /metrics",
        Duration::from_secs(10),
        || retried(w.admin) || retried(w.admin2),
    );
}

fn main() {
    let all = trials![WORLD =>
        a_change_is_recorded_at_once_whatever_a_dead_smtp_server_does,
        a_webhook_post_answered_500_is_retried,
        the_webhook_body_names_the_endpoint_and_its_change,
        the_notification_filter_keeps_pool_changes_out,
        the_webhook_is_signed_with_hmac_sha256_of_the_secret_file,
        a_change_is_emailed_over_plain_smtp,
        a_change_is_emailed_over_starttls,
        a_change_is_emailed_over_implicit_tls,
        a_pools_notification_email_is_mailed_through_the_first_email_channel,
        a_recovery_is_emailed_and_posted,
        two_aggregators_send_one_post_per_change,
        a_dead_smtp_channel_is_retried_and_counted_without_holding_anything_up,
    ];
    trials::run(all, Threads::One);
}
