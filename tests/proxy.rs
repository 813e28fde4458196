//! The HTTP reverse proxy of a real `meshlb aggregator`, fed by a real mesh (three probers
//! probing real HTTP origins), driven with curl and plain HTTP clients: weights, least
//! outstanding requests, hash and ip_cookie stickiness, cookie affinity (and a tampered
//! cookie), header override and X-Forwarded-*, trailers both ways, a protocol upgrade tunnel
//! and a real WebSocket session, TLS termination with SNI, 530 when nothing can serve, and
//! zero-downtime failover under a steady stream.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::*;

#[derive(Debug, Default)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// The origin's name: the first line of its body.
    fn origin(&self) -> &str {
        self.body.lines().next().unwrap_or("")
    }
}

/// One request with curl; `extra` are more curl arguments.
fn curl(url: &str, host: &str, extra: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args([
            "-s",
            "-i",
            "--max-time",
            "10",
            "-H",
            &format!("Host: {host}"),
        ])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A plain HTTP/1.1 request on its own connection: the status code (0 when the proxy could
/// not be reached at all).
fn raw_status(proxy: SocketAddr, host: &str, path: &str) -> u16 {
    let Ok(mut s) = TcpStream::connect(proxy) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    if write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return 0;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn proxy_steers_sticks_tunnels_and_fails_over() {
    let (scratch, key) = scratch_dir_with_key("proxy");
    let dir = scratch.path();
    let hold = Duration::from_secs(5);
    let names = [
        ("w1", "127.0.1.1"),
        ("w2", "127.0.1.2"),
        ("slow", "127.0.1.3"),
        ("fast", "127.0.1.4"),
        ("h1", "127.0.1.5"),
        ("h2", "127.0.1.6"),
        ("h3", "127.0.1.7"),
        ("z1", "127.0.1.8"),
        ("z2", "127.0.1.9"),
        ("down", "127.0.1.10"),
        ("x1", "127.0.1.11"),
        ("x2", "127.0.1.12"),
    ];
    let o: BTreeMap<&str, Origin> = names
        .iter()
        .map(|&(name, ip)| {
            // Only `slow` holds /hold requests open.
            let wait = if name == "slow" { hold } else { Duration::ZERO };
            (name, named_origin(ip, name, wait))
        })
        .collect();
    let origin = |name: &str| -> String {
        let ip = names.iter().find(|(n, _)| *n == name).unwrap().1;
        format!(
            "{{ name = \"{name}\", address = \"{ip}\", port = {} }}",
            o[name].port
        )
    };
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
interval = 1
timeout = 1
retries = 0
consecutive_down = 2

[[pools]]
name = "weighted"
monitor = "http"
check_regions = ["WEU"]
origins = [{w1_weight}, {w2}]
[[pools]]
name = "lors"
monitor = "http"
check_regions = ["WEU"]
origins = [{slow}, {fast}]
origin_steering = {{ policy = "least_outstanding_requests" }}
[[pools]]
name = "three"
monitor = "http"
check_regions = ["WEU"]
origins = [{h1}, {h2_override}, {h3}]
[[pools]]
name = "hashed"
monitor = "http"
check_regions = ["WEU"]
origins = [{h1}, {h2}, {h3}]
origin_steering = {{ policy = "hash" }}
[[pools]]
name = "zdt"
monitor = "http"
check_regions = ["WEU"]
origins = [{z1}, {z2}]
[[pools]]
name = "dead"
monitor = "http"
check_regions = ["WEU"]
origins = [{down}]

[[pools]]
name = "solo"
monitor = "http"
check_regions = ["WEU"]
origins = [{x1}]
[[pools]]
name = "spare"
monitor = "http"
check_regions = ["WEU"]
origins = [{x2}]

[[load_balancers]]
name = "weighted.example.test"
proxied = true
default_pools = ["weighted"]
[[load_balancers]]
name = "lors.example.test"
proxied = true
default_pools = ["lors"]
[[load_balancers]]
name = "sticky.example.test"
proxied = true
default_pools = ["three"]
session_affinity = "cookie"
session_affinity_ttl = 1800
[[load_balancers.rules]]
name = "checkout gets time"
condition = 'http.request.uri.path == "/checkout"'
overrides = {{ session_affinity_ttl = 7200 }}
[[load_balancers]]
name = "ipcookie.example.test"
proxied = true
default_pools = ["three"]
session_affinity = "ip_cookie"
[[load_balancers]]
name = "hash.example.test"
proxied = true
default_pools = ["hashed"]
[[load_balancers]]
name = "zdt.example.test"
proxied = true
default_pools = ["zdt"]
session_affinity_attributes = {{ zero_downtime_failover = "temporary" }}
[[load_balancers]]
name = "nozdt.example.test"
proxied = true
default_pools = ["zdt"]
[[load_balancers]]
name = "across.example.test"
proxied = true
default_pools = ["solo", "spare"]
session_affinity_attributes = {{ zero_downtime_failover = "temporary" }}
adaptive_routing = {{ failover_across_pools = true }}
[[load_balancers]]
name = "dead.example.test"
proxied = true
default_pools = ["dead"]
[[load_balancers]]
name = "tls.example.test"
proxied = true
default_pools = ["weighted"]
[[load_balancers]]
name = "other.example.test"
proxied = true
default_pools = ["weighted"]
"#,
            w1_weight = origin("w1").replace(" }", ", weight = 0.25 }"),
            w2 = origin("w2").replace(" }", ", weight = 0.75 }"),
            slow = origin("slow"),
            fast = origin("fast"),
            h1 = origin("h1"),
            h2 = origin("h2"),
            h2_override =
                origin("h2").replace(" }", ", header = { Host = [\"override.example\"] } }"),
            h3 = origin("h3"),
            z1 = origin("z1"),
            z2 = origin("z2"),
            down = origin("down"),
            x1 = origin("x1"),
            x2 = origin("x2"),
        ),
    )
    .expect("config");
    // Two certificates; SNI must pick the right one.
    let mut certs = Vec::new();
    for name in ["tls.example.test", "other.example.test"] {
        let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("cert");
        let (cert, key) = (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&cert, c.cert.pem()).expect("cert");
        std::fs::write(&key, c.signing_key.serialize_pem()).expect("key");
        certs.push((cert, key));
    }
    let admin = free_tcp();
    let proxy = free_tcp();
    let proxy_tls = free_tcp();
    let mut extra: Vec<String> = vec![
        "--proxy".into(),
        proxy.to_string(),
        "--proxy-tls".into(),
        proxy_tls.to_string(),
    ];
    for (c, k) in &certs {
        extra.extend(["--tls-cert".into(), c.display().to_string()]);
        extra.extend(["--tls-key".into(), k.display().to_string()]);
    }
    let _procs = start_mesh(&config, &key, admin, &extra);
    let url = format!("http://{proxy}/");

    // Everything healthy: every endpoint of `three` and `weighted` answers, `dead` is down.
    o["down"].stop();
    wait_for("the mesh voted", Duration::from_secs(30), || {
        let seen: std::collections::BTreeSet<String> = (0..30)
            .map(|_| curl(&url, "sticky.example.test", &[]).origin().to_string())
            .collect();
        seen.len() == 3 && curl(&url, "dead.example.test", &[]).status == 530
    });
    // And every other pool has its verdicts too (until then it is Unknown and takes nothing).
    wait_for("the aggregator ready", Duration::from_secs(30), || {
        get(admin, "/readyz").is_some_and(|r| r["ready"] == true)
    });

    // 530 with a body naming the load balancer when no pool can serve and there is no
    // fallback.
    let r = curl(&url, "dead.example.test", &[]);
    assert_eq!(r.status, 530);
    assert!(r.body.contains("dead.example.test"), "{r:?}");
    // An unknown host: 404.
    assert_eq!(curl(&url, "nobody.example.test", &[]).status, 404);
    // A request head beyond the 64 KiB bound is refused (431), not buffered without end.
    let big = "x".repeat(80 << 10);
    let r = curl(
        &url,
        "sticky.example.test",
        &["-H", &format!("X-Big: {big}")],
    );
    assert_eq!(r.status, 431, "{:?}", r.status);

    // Large bodies stream both ways: a 1 MiB chunked answer, and uploads beyond the 64 KiB
    // replay buffer, of known length and chunked.
    let r = curl(&format!("{url}big"), "weighted.example.test", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.body.bytes().all(|b| b == b'x'), "the body arrived intact");
    let upload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let upload_file = dir.join("upload.bin");
    std::fs::write(&upload_file, &upload).expect("upload file");
    let sum: u64 = upload.iter().map(|&b| u64::from(b)).sum();
    let data = format!("@{}", upload_file.display());
    for extra in [
        vec!["--data-binary", &data],
        vec!["--data-binary", &data, "-H", "Transfer-Encoding: chunked"],
    ] {
        let r = curl(&format!("{url}upload"), "weighted.example.test", &extra);
        assert_eq!(r.status, 200, "{extra:?}: {r:?}");
        assert!(
            r.body.contains(&format!("received=300000\nsum={sum}\n")),
            "{extra:?}: {r:?}"
        );
    }

    // The trailers of a chunked upload reach the origin; those that frame or route do not.
    let mut s = TcpStream::connect(proxy).expect("proxy");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(
        b"POST /upload HTTP/1.1\r\nHost: weighted.example.test\r\nConnection: close\r\n\
          Transfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n\
          5\r\nhello\r\n0\r\nX-Checksum: sha256=2cf2\r\nContent-Length: 7\r\n\r\n",
    )
    .expect("send a chunked upload with trailers");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer.contains("received=5\n") && answer.contains("trailers=x-checksum: sha256=2cf2\n"),
        "{answer}"
    );

    // An origin's announced trailers reach an HTTP/1.1 client that accepts them, after the
    // last chunk.
    let mut s = TcpStream::connect(proxy).expect("proxy");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(
        b"GET /trailers HTTP/1.1\r\nHost: weighted.example.test\r\nTE: trailers\r\n\
          Connection: close, TE\r\n\r\n",
    )
    .expect("ask for trailers");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\ntrailer: x-checksum\r\n")
            && answer.ends_with("\r\n0\r\nx-checksum: sha256=2cf2\r\n\r\n"),
        "{answer}"
    );

    // An HTTP/2 client gets them as a trailing HEADERS frame (curl -i prints them after the
    // body).
    let r = curl(
        &format!("{url}trailers"),
        "weighted.example.test",
        &["--http2-prior-knowledge"],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.body.starts_with("hello") && r.body.contains("x-checksum: sha256=2cf2"),
        "{r:?}"
    );

    // Header override and X-Forwarded-*: h2 sees Host override.example, everyone sees XFF.
    let mut seen_override = false;
    for _ in 0..40 {
        let r = curl(
            &url,
            "sticky.example.test",
            &["-H", "X-Forwarded-For: 192.0.2.9"],
        );
        assert!(r.body.contains("xff=192.0.2.9, 127.0.0.1"), "{r:?}");
        assert!(r.body.contains("proto=http"), "{r:?}");
        // The client's TE is hop-by-hop; none asked for trailers, so none goes on.
        assert!(r.body.contains("\nte=\n"), "{r:?}");
        if r.origin() == "h2" {
            assert!(r.body.contains("host=override.example"), "{r:?}");
            seen_override = true;
        } else {
            assert!(r.body.contains("host=sticky.example.test"), "{r:?}");
        }
    }
    assert!(seen_override, "h2 was never chosen in 40 requests");
    // A client that takes trailers (TE: trailers over HTTP/1.1, or HTTP/2): the proxy asks the
    // origin for them on its own hop.
    let r = curl(&url, "sticky.example.test", &["-H", "TE: trailers"]);
    assert!(r.body.contains("\nte=trailers\n"), "{r:?}");
    let r = curl(&url, "sticky.example.test", &["--http2-prior-knowledge"]);
    assert!(r.body.contains("\nte=trailers\n"), "{r:?}");

    // Weighted: 0.25 / 0.75 over 400 requests (one curl, keep-alive to the proxy).
    wait_for(
        "both weighted endpoints healthy",
        Duration::from_secs(15),
        || {
            let seen: std::collections::BTreeSet<String> = (0..20)
                .map(|_| {
                    curl(&url, "weighted.example.test", &[])
                        .origin()
                        .to_string()
                })
                .collect();
            seen.len() == 2
        },
    );
    let urls: Vec<String> = (0..400).map(|_| url.clone()).collect();
    let out = Command::new("curl")
        .args(["-s", "-H", "Host: weighted.example.test"])
        .args(&urls)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let w2 = text.lines().filter(|l| *l == "w2").count();
    let w1 = text.lines().filter(|l| *l == "w1").count();
    assert_eq!(w1 + w2, 400);
    let share = w2 as f64 / 400.0;
    assert!((0.65..=0.85).contains(&share), "weight 0.75 got {share}");

    // Least outstanding requests: `slow` holds /hold for 5 s, `fast` answers at once. Of 60
    // requests started 50 ms apart (all within `slow`'s hold), random steering would send
    // about 30 to `slow` (P(<= 17) = 0.05 %); LORS, weighing `slow` down by its open requests
    // (P(pick slow) = 1 / (open + 2)), sends about 11 (P(> 17) < 0.01 %).
    let lors_url = format!("http://{proxy}/hold");
    let handles: Vec<_> = (0..60)
        .map(|i| {
            std::thread::sleep(Duration::from_millis(if i == 0 { 0 } else { 50 }));
            let u = lors_url.clone();
            std::thread::spawn(move || curl(&u, "lors.example.test", &[]).origin().to_string())
        })
        .collect();
    let served: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let to_slow = served.iter().filter(|s| *s == "slow").count();
    eprintln!("LORS sent {to_slow} of 60 requests to the endpoint holding them open");
    assert_eq!(
        served.iter().filter(|s| *s == "fast").count() + to_slow,
        60,
        "{served:?}"
    );
    assert!(
        to_slow <= 17,
        "LORS sent {to_slow} of 60 to the endpoint holding requests: {served:?}"
    );

    // Hash: each client address always lands on the same endpoint; clients spread.
    let mut spread = std::collections::BTreeSet::new();
    for c in 2..12 {
        let iface = format!("127.0.2.{c}");
        let picks: std::collections::BTreeSet<String> = (0..5)
            .map(|_| {
                curl(&url, "hash.example.test", &["--interface", &iface])
                    .origin()
                    .to_string()
            })
            .collect();
        assert_eq!(picks.len(), 1, "client {iface} moved: {picks:?}");
        spread.extend(picks);
    }
    assert!(
        spread.len() >= 2,
        "ten clients all on one endpoint: {spread:?}"
    );

    // ip_cookie: sticky per client address even without sending the cookie back.
    for c in 2..6 {
        let iface = format!("127.0.3.{c}");
        let first = curl(&url, "ipcookie.example.test", &["--interface", &iface]);
        assert!(first
            .header("set-cookie")
            .is_some_and(|v| v.starts_with("__meshlb=")));
        for _ in 0..4 {
            let again = curl(&url, "ipcookie.example.test", &["--interface", &iface]);
            assert_eq!(again.origin(), first.origin(), "client {iface}");
        }
    }

    // Cookie affinity: the cookie pins the endpoint; a tampered cookie is ignored.
    let first = curl(&url, "sticky.example.test", &[]);
    let cookie = first
        .header("set-cookie")
        .and_then(|v| v.split(';').next())
        .expect("an affinity cookie")
        .to_string();
    let set_cookie = first.header("set-cookie").unwrap().to_ascii_lowercase();
    assert!(
        set_cookie.contains("httponly") && set_cookie.contains("samesite=lax"),
        "{set_cookie}"
    );
    let bound = first.origin().to_string();
    for _ in 0..10 {
        let r = curl(
            &url,
            "sticky.example.test",
            &["-H", &format!("Cookie: {cookie}")],
        );
        assert_eq!(r.origin(), bound);
        assert!(r.header("set-cookie").is_none(), "never extended elsewhere");
    }
    // A rule that sets the affinity TTL for /checkout resets the session there (seed 000):
    // the same endpoint, the cookie issued again with the rule's TTL.
    assert!(set_cookie.contains("max-age=1800"), "{set_cookie}");
    let checkout = format!("{}checkout", url);
    let r = curl(
        &checkout,
        "sticky.example.test",
        &["-H", &format!("Cookie: {cookie}")],
    );
    assert_eq!(r.origin(), bound);
    let reset = r
        .header("set-cookie")
        .expect("the session is reset on /checkout");
    assert!(
        reset.to_ascii_lowercase().contains("max-age=7200"),
        "{reset}"
    );
    let reset = reset.split(';').next().expect("value").to_string();
    assert_ne!(reset, cookie, "a new cookie");
    let r = curl(
        &url,
        "sticky.example.test",
        &["-H", &format!("Cookie: {reset}")],
    );
    assert_eq!(r.origin(), bound, "the reset session is followed");
    let mut tampered = cookie.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let spread: std::collections::BTreeSet<String> = (0..30)
        .map(|_| {
            let r = curl(
                &url,
                "sticky.example.test",
                &["-H", &format!("Cookie: {tampered}")],
            );
            assert!(
                r.header("set-cookie").is_some(),
                "a forged cookie gets a fresh one"
            );
            r.origin().to_string()
        })
        .collect();
    assert!(
        spread.len() >= 2,
        "a tampered cookie was followed: {spread:?}"
    );
    // An unrelated endpoint fails: the session stays where it is.
    let other = ["h1", "h2", "h3"]
        .into_iter()
        .find(|n| *n != bound)
        .unwrap();
    o[other].stop();
    wait_for(
        "the unrelated endpoint is out",
        Duration::from_secs(15),
        || (0..20).all(|_| curl(&url, "sticky.example.test", &[]).origin() != other),
    );
    for _ in 0..10 {
        let r = curl(
            &url,
            "sticky.example.test",
            &["-H", &format!("Cookie: {cookie}")],
        );
        assert_eq!(r.origin(), bound, "the session survived {other}'s failure");
    }
    o[other].start();

    // A protocol upgrade (the WebSocket mechanism) is tunnelled both ways.
    let mut s = TcpStream::connect(proxy).expect("proxy");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(s, "GET /ws HTTP/1.1\r\nHost: weighted.example.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("101 head");
        head.push(byte[0]);
    }
    assert!(
        String::from_utf8_lossy(&head).starts_with("HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    for msg in ["hello through the tunnel", "and back again"] {
        s.write_all(msg.as_bytes()).unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).expect("echo");
        assert_eq!(String::from_utf8_lossy(&got), msg);
    }
    drop(s);

    // A real WebSocket (tungstenite on both ends): the handshake, text, a binary message
    // larger than a read buffer, ping and pong, and the closing handshake, through the proxy.
    let stream = TcpStream::connect(proxy).expect("proxy");
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let (mut ws, response) = tungstenite::client("ws://weighted.example.test/ws", stream)
        .expect("WebSocket handshake through the proxy");
    assert_eq!(response.status(), 101);
    ws.send(tungstenite::Message::text("hello, websocket"))
        .expect("send text");
    assert_eq!(
        ws.read().expect("echo"),
        tungstenite::Message::text("hello, websocket")
    );
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    ws.send(tungstenite::Message::binary(big.clone()))
        .expect("send binary");
    assert_eq!(ws.read().expect("echo"), tungstenite::Message::binary(big));
    ws.send(tungstenite::Message::Ping("are you there".into()))
        .expect("ping");
    assert_eq!(
        ws.read().expect("pong"),
        tungstenite::Message::Pong("are you there".into())
    );
    ws.close(None).expect("close");
    loop {
        match ws.read() {
            Ok(m) => assert!(m.is_close(), "{m:?}"),
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(e) => panic!("the closing handshake failed: {e}"),
        }
    }

    // TLS termination; SNI picks the certificate valid for each name.
    for (name, (cert, _)) in ["tls.example.test", "other.example.test"]
        .iter()
        .zip(&certs)
    {
        let r = curl(
            &format!("https://{name}:{}/", proxy_tls.port()),
            name,
            &[
                "--cacert",
                cert.to_str().unwrap(),
                "--resolve",
                &format!("{name}:{}:127.0.0.1", proxy_tls.port()),
            ],
        );
        assert_eq!(r.status, 200, "{name}: {r:?}");
        assert!(r.body.contains("proto=https"), "{r:?}");
    }
    let h2 = curl(
        &format!("https://tls.example.test:{}/", proxy_tls.port()),
        "tls.example.test",
        &[
            "--http2",
            "--cacert",
            certs[0].0.to_str().unwrap(),
            "--resolve",
            &format!("tls.example.test:{}:127.0.0.1", proxy_tls.port()),
        ],
    );
    assert_eq!(h2.status, 200, "{h2:?}");
    // HTTP/2 in clear with prior knowledge (h2c) on the plain listener.
    let h2c = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "--max-time",
            "10",
            "--http2-prior-knowledge",
        ])
        .args([
            "-w",
            "%{http_version} %{http_code}",
            "-H",
            "Host: weighted.example.test",
        ])
        .arg(&url)
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&h2c.stdout), "2 200");

    // Zero-downtime failover: z1 dies under a steady stream of requests. With the retry on,
    // no request fails; without it, requests fail only until the mesh marks z1 down.
    let stream = |host: &'static str, kill: &'static str| {
        let stop = Instant::now() + Duration::from_secs(10);
        let killed_at = Instant::now() + Duration::from_secs(1);
        let mut failures = Vec::new();
        let mut total = 0;
        let mut killed = false;
        while Instant::now() < stop {
            if !killed && Instant::now() >= killed_at {
                o[kill].stop();
                killed = true;
            }
            total += 1;
            let status = raw_status(proxy, host, "/");
            if status != 200 {
                failures.push((killed_at.elapsed(), status));
            }
        }
        (total, failures)
    };
    wait_for(
        "both zdt endpoints healthy",
        Duration::from_secs(15),
        || {
            let seen: std::collections::BTreeSet<String> = (0..20)
                .map(|_| curl(&url, "zdt.example.test", &[]).origin().to_string())
                .collect();
            seen.len() == 2
        },
    );
    let (total, failures) = stream("zdt.example.test", "z1");
    assert!(total > 100, "only {total} requests");
    assert!(
        failures.is_empty(),
        "{} of {total} failed with zero-downtime failover: {failures:?}",
        failures.len()
    );
    // With `failover_across_pools`, a pool of one endpoint retries on the next pool.
    wait_for("the solo pool serves", Duration::from_secs(15), || {
        curl(&url, "across.example.test", &[]).origin() == "x1"
    });
    let (total, failures) = stream("across.example.test", "x1");
    assert!(
        failures.is_empty(),
        "{} of {total} failed with failover across pools: {failures:?}",
        failures.len()
    );
    o["z1"].start();
    wait_for("z1 back", Duration::from_secs(15), || {
        (0..20).any(|_| curl(&url, "nozdt.example.test", &[]).origin() == "z1")
    });
    let (total, failures) = stream("nozdt.example.test", "z1");
    assert!(
        !failures.is_empty(),
        "without the retry some of {total} requests must fail"
    );
    // The origin refused the connection: Cloudflare's 521.
    assert!(failures.iter().all(|(_, s)| *s == 521), "{failures:?}");
    // Only until the mesh marks z1 down: interval x consecutive_down + 1 s = 3 s after the
    // kill, with a margin for a loaded machine (tests/mesh.rs allows as much).
    let last = failures.iter().map(|(t, _)| *t).max().unwrap();
    eprintln!(
        "without zero-downtime failover: {} of {total} failed, the last {last:?} after the kill",
        failures.len()
    );
    assert!(
        last < Duration::from_secs(8),
        "failures went on for {last:?}"
    );

    // Per-request metrics.
    let metrics = scrape(admin);
    for needle in [
        "meshlb_proxy_requests_total{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"weighted.example.test\",pool=\"weighted\",endpoint=\"w2\",status_class=\"2xx\"}",
        "load_balancer=\"dead.example.test\",pool=\"\",endpoint=\"\",status_class=\"5xx\"}",
        "meshlb_proxy_retries_total{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"zdt.example.test\"}",
        "meshlb_proxy_affinity_hits_total",
        "meshlb_proxy_request_duration_seconds",
        "meshlb_proxy_origin_requests_total{node_role=\"aggregator\",node_region=\"WEU\",connection=\"resent\"}",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from:\n{metrics}");
    }
    // The test origins answer `Connection: close`: every request went on a new connection,
    // none on one the origin had said it would close.
    let sent = |kind: &str| -> f64 {
        let prefix = format!(
            "meshlb_proxy_origin_requests_total{{node_role=\"aggregator\",node_region=\"WEU\",connection=\"{kind}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    // The proxy's own error answers by Cloudflare's code: the refused origin's 521s, the 530s
    // of the load balancer with nothing left.
    let errors = |lb: &str, code: &str| -> f64 {
        let prefix = format!(
            "meshlb_proxy_errors_total{{node_role=\"aggregator\",node_region=\"WEU\",load_balancer=\"{lb}\",code=\"{code}\"}} "
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    assert_eq!(
        errors("nozdt.example.test", "521"),
        failures.len() as f64,
        "every failure counted as a 521"
    );
    assert!(errors("dead.example.test", "530") >= 1.0);
    assert_eq!(errors("weighted.example.test", "524"), 0.0);
    assert!(
        sent("reused") == 0.0 && sent("new") > 100.0,
        "reused {} new {}",
        sent("reused"),
        sent("new")
    );
}

/// `POST /drain` on the admin API: a drained endpoint takes no new clients, keeps its cookie
/// sessions for `drain_duration`, then they move; `DELETE /drain` brings it back.
#[test]
fn draining_keeps_sessions_for_drain_duration_then_moves_them() {
    let (scratch, key) = scratch_dir_with_key("drain");
    let dir = scratch.path();
    let a = named_origin("127.0.2.1", "a", Duration::ZERO);
    let b = named_origin("127.0.2.2", "b", Duration::ZERO);
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "http"
interval = 1
timeout = 1
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "a", address = "127.0.2.1", port = {} }}, {{ name = "b", address = "127.0.2.2", port = {} }}]
[[load_balancers]]
name = "drain.example.test"
proxied = true
default_pools = ["web"]
session_affinity = "cookie"
session_affinity_attributes = {{ drain_duration = 10 }}
"#,
            a.port, b.port
        ),
    )
    .expect("config");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let token = admin_token_args(dir);
    let (mut mesh, seed) = start_mesh_seeded(
        &config,
        &key,
        admin,
        &[&["--proxy".to_string(), proxy.to_string()][..], &token].concat(),
    );
    // A second aggregator: a drain made on the first holds here too (shared in gossip).
    let (admin2, proxy2) = (free_tcp(), free_tcp());
    mesh.0.push(start_aggregator(
        &config,
        &key,
        "ENAM",
        admin2,
        seed,
        &[&["--proxy".to_string(), proxy2.to_string()][..], &token].concat(),
    ));
    let url = format!("http://{proxy}/");
    let url2 = format!("http://{proxy2}/");
    let host = "drain.example.test";
    wait_for("both origins to serve", Duration::from_secs(20), || {
        let seen: std::collections::BTreeSet<String> = (0..10)
            .map(|_| curl(&url, host, &[]).origin().to_string())
            .collect();
        seen.contains("a") && seen.contains("b")
    });
    // A session bound to `a`.
    let mut cookie = String::new();
    wait_for("a client bound to a", Duration::from_secs(10), || {
        let r = curl(&url, host, &[]);
        cookie = r
            .header("set-cookie")
            .and_then(|v| v.split(';').next())
            .unwrap_or("")
            .to_string();
        r.origin() == "a"
    });
    let with_cookie = |c: &str| curl(&url, host, &["-H", &format!("Cookie: {c}")]);
    // POST, DELETE or GET /drain for `a` on an aggregator; the drained endpoints' names.
    let drain_on = |admin: SocketAddr, method: &str| {
        let out = Command::new("curl")
            .args([
                "-s",
                "-X",
                method,
                "-H",
                "Authorization: Bearer secret-token",
            ])
            .arg(format!("http://{admin}/drain?pool=web&endpoint=a"))
            .output()
            .expect("curl");
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        list.as_array()
            .expect("a list")
            .iter()
            .map(|d| d["endpoint"].as_str().unwrap_or("").to_string())
            .collect::<Vec<String>>()
    };
    let drain = |method: &str| drain_on(admin, method);
    assert_eq!(drain("POST"), vec!["a"]);
    let drained_at = std::time::Instant::now();
    // The next tally (at most 0.5 s) applies it: new clients only get b ...
    wait_for("new clients to avoid a", Duration::from_secs(6), || {
        (0..10).all(|_| curl(&url, host, &[]).origin() == "b")
    });
    // ... while the session stays on a within drain_duration (10 s; the drain starts at the
    // whole second, so it lasts between 9 and 10 s) ...
    let within = with_cookie(&cookie);
    assert!(
        drained_at.elapsed() < Duration::from_secs(9),
        "checked within the drain"
    );
    assert_eq!(
        within.origin(),
        "a",
        "an existing session keeps its endpoint while draining"
    );
    // ... and moves once the drain is over, with a new cookie.
    let mut moved = None;
    wait_for(
        "the session to move after the drain",
        Duration::from_secs(15),
        || {
            let r = with_cookie(&cookie);
            let ok = r.origin() == "b" && r.header("set-cookie").is_some();
            moved = ok.then(|| drained_at.elapsed());
            ok
        },
    );
    let moved = moved.expect("moved");
    assert!(
        moved >= Duration::from_secs(9),
        "not before drain_duration (whole seconds): {moved:?}"
    );
    // The other aggregator has it from gossip: its proxy sends new clients to b only.
    wait_for(
        "the drain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(admin2, "GET") == vec!["a"],
    );
    assert!((0..10).all(|_| curl(&url2, host, &[]).origin() == "b"));
    // Undrained: new clients reach a again.
    assert!(drain("DELETE").is_empty());
    wait_for(
        "the undrain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(admin2, "GET").is_empty(),
    );
    wait_for(
        "a to take new clients again",
        Duration::from_secs(5),
        || (0..10).any(|_| curl(&url, host, &[]).origin() == "a"),
    );

    // A drain outlives the aggregator it was made on: drained on the first, which then dies,
    // it still holds on the second (which adopted the decision and publishes it itself).
    assert_eq!(drain("POST"), vec!["a"]);
    wait_for(
        "the second drain on the second aggregator",
        Duration::from_secs(5),
        || drain_on(admin2, "GET") == vec!["a"],
    );
    let first = &mut mesh.0[0];
    first.kill().expect("kill the first aggregator");
    first.wait().expect("reap it");
    wait_for(
        "the second aggregator to see the first dead",
        Duration::from_secs(30),
        || {
            get(admin2, "/members").is_some_and(|m| {
                m.as_array().into_iter().flatten().any(|m| {
                    m["role"] == "aggregator" && m["region"] == "WEU" && m["alive"] == false
                })
            })
        },
    );
    assert_eq!(
        drain_on(admin2, "GET"),
        vec!["a"],
        "the drain is still in force"
    );
    assert!((0..10).all(|_| curl(&url2, host, &[]).origin() == "b"));
}

/// A lone aggregator with `--state-dir` keeps its drains across a restart (without it, a
/// restart would send traffic back to an endpoint taken out for maintenance).
#[test]
fn drains_survive_a_restart_with_a_state_dir() {
    let (scratch, key) = scratch_dir_with_key("drain-state");
    let dir = scratch.path();
    let (config, state) = (dir.join("meshlb.toml"), dir.join("state"));
    std::fs::write(
        &config,
        r#"
[[pools]]
name = "web"
origins = [{ name = "a", address = "127.0.0.1", port = 9 }, { name = "b", address = "127.0.0.2", port = 9 }]
[[load_balancers]]
name = "state.example.test"
default_pools = ["web"]
"#,
    )
    .expect("config");
    let admin = free_tcp();
    let extra = [
        &["--state-dir".to_string(), state.display().to_string()][..],
        &admin_token_args(dir),
    ]
    .concat();
    let start = || {
        Procs(vec![start_aggregator(
            &config,
            &key,
            "WEU",
            admin,
            free_udp(),
            &extra,
        )])
    };
    let drains = |method: &str| -> Option<Vec<String>> {
        let out = Command::new("curl")
            .args([
                "-s",
                "-X",
                method,
                "-H",
                "Authorization: Bearer secret-token",
            ])
            .arg(format!("http://{admin}/drain?pool=web&endpoint=a"))
            .output()
            .ok()?;
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        Some(
            list.as_array()?
                .iter()
                .map(|d| d["endpoint"].as_str().unwrap_or("").to_string())
                .collect(),
        )
    };
    let mut first = start();
    wait_for("the admin API", Duration::from_secs(20), || {
        drains("GET").is_some()
    });
    assert_eq!(drains("POST"), Some(vec!["a".to_string()]));
    let file = state.join("drains.json");
    wait_for("the drain to be saved", Duration::from_secs(10), || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\"a\""))
    });
    for c in &mut first.0 {
        c.kill().expect("kill");
        c.wait().expect("reap");
    }
    let _second = start();
    wait_for(
        "the restarted aggregator to hold the drain",
        Duration::from_secs(20),
        || drains("GET") == Some(vec!["a".to_string()]),
    );
    // A damaged state file stops the start with an error naming it.
    drop(_second);
    std::fs::write(&file, "{ not json").expect("damage");
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["aggregator", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--admin", &free_tcp().to_string()])
        .args(&extra)
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", &key.display().to_string()])
        .output()
        .expect("aggregator");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("drains.json") && err.contains("line 1"),
        "{err}"
    );
}

/// A TLS origin on `ip` (any port) answering `tls` to every request, with a certificate for
/// `names` (DNS names and IPs) signed by a fresh CA whose PEM is written to `ca`.
fn tls_origin(ip: &str, names: &[&str], ca: &std::path::Path) -> u16 {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "meshlb proxy test CA");
    let issuer =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "meshlb proxy test origin");
    let cert = params.signed_by(&key, &issuer).expect("cert");
    std::fs::write(ca, issuer.pem()).expect("ca file");
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .expect("server config");
    let listener = std::net::TcpListener::bind((ip, 0)).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(|_req| async {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(b"tls\n")),
                        ))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    port
}

/// HTTPS to origins per `origin_tls`: strict with the origin's CA works; strict without it is
/// a 526 (invalid certificate); full towards an origin that does not speak TLS is a 525.
#[test]
fn tls_to_origins_strict_full_525_526() {
    let (scratch, key) = scratch_dir_with_key("origin-tls");
    let dir = scratch.path();
    let ca = dir.join("ca.pem");
    let tls_port = tls_origin(
        "127.0.3.1",
        &["127.0.3.1", "strict.example.test", "noca.example.test"],
        &ca,
    );
    let plain = named_origin("127.0.3.2", "plain", Duration::ZERO);
    let config = dir.join("meshlb.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[monitors]]
name = "https"
type = "https"
interval = 1
timeout = 1
ca_file = "{ca}"
[[monitors]]
name = "http"
interval = 1
timeout = 1
[[pools]]
name = "tls"
monitor = "https"
check_regions = ["WEU"]
origins = [{{ name = "t", address = "127.0.3.1", port = {tls_port} }}]
[[pools]]
name = "plain"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "p", address = "127.0.3.2", port = {plain_port} }}]
[[load_balancers]]
name = "strict.example.test"
proxied = true
default_pools = ["tls"]
origin_tls = "strict"
origin_ca_file = "{ca}"
[[load_balancers]]
name = "noca.example.test"
proxied = true
default_pools = ["tls"]
origin_tls = "strict"
[[load_balancers]]
name = "full.example.test"
proxied = true
default_pools = ["plain"]
origin_tls = "full"
"#,
            ca = ca.display(),
            plain_port = plain.port,
        ),
    )
    .expect("config");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let _mesh = start_mesh(
        &config,
        &key,
        admin,
        &["--proxy".to_string(), proxy.to_string()],
    );
    let url = format!("http://{proxy}/");
    wait_for(
        "the TLS origin to be healthy and served",
        Duration::from_secs(20),
        || {
            let r = curl(&url, "strict.example.test", &[]);
            r.status == 200 && r.body == "tls\n"
        },
    );
    let r = curl(&url, "noca.example.test", &[]);
    assert_eq!(r.status, 526, "{}", r.body);
    assert!(r.body.contains("invalid certificate"), "{}", r.body);
    wait_for(
        "the plain origin to be healthy",
        Duration::from_secs(20),
        || curl(&url, "full.example.test", &[]).status != 530,
    );
    let r = curl(&url, "full.example.test", &[]);
    assert_eq!(r.status, 525, "{}", r.body);
    assert!(r.body.contains("TLS handshake"), "{}", r.body);
}
