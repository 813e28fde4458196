//! Reloading a node's configuration: a prober follows its file through a Kubernetes-style
//! ConfigMap update (a new directory, the `..data` symlink swapped) and through SIGHUP, refuses
//! a broken file with its errors and keeps probing with the config it had, and says so in
//! metrics; an aggregator reloads fifty times under traffic (a world started once, whose
//! named trials each check one thing the fifty reloads had to keep), refuses a broken reload,
//! and drains the sessions of an endpoint a reload disabled. A `libtest-mimic` harness (`main`
//! at the end) runs the trials and stops the shared world after them.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use test_support::config::{Config, Endpoint, Lb, Monitor, Pool};
use test_support::*;

/// The value of an unlabelled-but-for-node-labels metric line `name{...} value`, matching
/// `needle` in its labels.
fn metric(text: &str, name: &str, needle: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| l.contains(needle))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Publishes `text` as the ConfigMap's next version, the way the kubelet does: a new
/// timestamped directory, then the `..data` symlink replaced in one rename.
fn publish(dir: &Path, version: u32, text: &str) {
    let data = dir.join(format!("..2026_12_01_{version:02}"));
    std::fs::create_dir(&data).expect("version dir");
    std::fs::write(data.join("meshlb.toml"), text).expect("config");
    let tmp = dir.join("..data_tmp");
    symlink(data.file_name().expect("name"), &tmp).expect("symlink");
    std::fs::rename(&tmp, dir.join("..data")).expect("swap ..data");
}

fn config(endpoints: usize) -> String {
    let pool = (0..endpoints).fold(Pool::new("web").monitor("tcp").regions(&["WEU"]), |p, i| {
        p.origin(&format!("e{i}"), ("127.0.0.1", 9))
    });
    Config::new()
        .monitor(Monitor::tcp("tcp").interval(5).timeout(1))
        .pool(pool)
        .render()
}

fn a_prober_follows_its_config_map_and_refuses_a_broken_file() {
    let (dir, key) = scratch_dir_with_key("reload");
    let map = dir.path();
    publish(map, 1, &config(1));
    symlink("..data/meshlb.toml", map.join("meshlb.toml")).expect("file symlink");
    let log = map.join("prober.log");
    let metrics_addr = free_tcp();
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args([
            "prober",
            "--config",
            map.join("meshlb.toml").to_str().unwrap(),
        ])
        .args(["--region", "WEU", "--dc", "ams"])
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", key.to_str().unwrap()])
        .args(["--metrics", &metrics_addr.to_string()])
        .args(["--watch-config", "--watch-interval-ms", "100"])
        .args(["--admin-token-file", token.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("prober");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let mut procs = Procs(vec![child]);
    let scrape_metric = |name: &str, needle: &str| metric(&scrape(metrics_addr), name, needle);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();

    // The start counts as a successful load.
    wait_for("the first load reported", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_last_reload_successful", "") == Some(1.0)
    });
    let started_at = scrape_metric("meshlb_config_last_reload_success_timestamp_seconds", "")
        .expect("a load time");
    assert!(started_at > 1.7e9, "{started_at}");

    // A ConfigMap update: a new endpoint, seen through the swapped symlink.
    publish(map, 2, &config(2));
    wait_for("the update applied", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(1.0)
    });
    assert!(
        log_text().contains("config reloaded (the file changed): 2 targets"),
        "{}",
        log_text()
    );

    // A broken update: refused with the file, the field and the reason; the old config stays.
    publish(map, 3, &(config(2) + "surprise = true\n"));
    wait_for("the broken file refused", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"failure\"") == Some(1.0)
    });
    assert_eq!(
        scrape_metric("meshlb_config_last_reload_successful", ""),
        Some(0.0)
    );
    let text = log_text();
    assert!(
        text.contains("refused, keeping the running config") && text.contains("surprise"),
        "{text}"
    );
    assert!(
        procs.0[0].try_wait().expect("status").is_none(),
        "the prober runs on"
    );

    // SIGHUP reloads even when the content is the same; a fixed file is taken again.
    publish(map, 4, &config(3));
    wait_for("the fixed file applied", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(2.0)
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the SIGHUP reload", Duration::from_secs(20), || {
        scrape_metric("meshlb_config_reloads_total", "result=\"success\"") == Some(3.0)
    });
    assert!(log_text().contains("config reloaded (SIGHUP): 3 targets"));
    assert_eq!(
        scrape_metric("meshlb_config_last_reload_successful", ""),
        Some(1.0)
    );

    // `POST /-/reload` on the metrics listener, with the token only.
    assert_eq!(post_reload(metrics_addr, None).0, 401);
    let (status, answer) = post_reload(metrics_addr, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["reloaded"], true, "{answer}");
    assert_eq!(
        answer["generation"], 5,
        "the start and four reloads: {answer}"
    );
    publish(map, 5, &(config(3) + "surprise = true\n"));
    let (status, answer) = post_reload(metrics_addr, Some(TOKEN));
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("surprise")),
        "{answer}"
    );
}

const TOKEN: &str = "secret-token";

/// `POST /-/reload` with the token (or `token`): the status and the JSON answer.
fn post_reload(admin: std::net::SocketAddr, token: Option<&str>) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    s.set_read_timeout(Some(Duration::from_secs(40))).ok();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "POST /-/reload HTTP/1.0\r\nHost: admin\r\n{auth}Content-Length: 0\r\n\r\n"
    )
    .expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("answer");
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// One request on `s` (kept alive): the status and the body, read by Content-Length or chunks.
fn exchange(s: &mut std::net::TcpStream, host: &str, path: &str) -> Option<(u16, Vec<u8>)> {
    exchange_with(s, host, path, "").map(|(status, _, body)| (status, body))
}

/// An answer: status, fields (names in lower case), body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// `exchange` with extra header lines (each ending in CRLF); the answer's fields too.
fn exchange_with(
    s: &mut std::net::TcpStream,
    host: &str,
    path: &str,
    extra: &str,
) -> Option<Answer> {
    use std::io::{BufRead, BufReader, Read, Write};
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut chunked) = (0usize, false);
    let mut fields = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        fields.push((k.to_ascii_lowercase(), v.trim().to_string()));
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse().ok()?;
        }
        if k.eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).ok()?;
    }
    // Whatever the reader buffered beyond the answer would be the next one's: none here.
    if !r.buffer().is_empty() {
        return None;
    }
    Some((status, fields, body))
}

/// The origin that answered `www.reload.test`, on a new connection.
fn answered_by(proxy: std::net::SocketAddr) -> Option<String> {
    let mut s = std::net::TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let (status, body) = exchange(&mut s, "www.reload.test", "/")?;
    (status == 200).then(|| {
        String::from_utf8_lossy(&body)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    })
}

/// Whether `dig` gets a NOERROR answer with at least one address for `name`.
fn dig_answers(dns: std::net::SocketAddr, name: &str) -> bool {
    let Ok(out) = Command::new("dig")
        .args([
            &format!("@{}", dns.ip()),
            "-p",
            &dns.port().to_string(),
            "+tries=1",
            "+time=2",
            name,
            "A",
        ])
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("status: NOERROR") && !text.contains("ANSWER: 0,")
}

/// The aggregator's two configs. Between them: the weight of `a` changes, `b` is removed and
/// `c` added, the pool `spare`'s monitor changes its kind (a new identity there), and the
/// monitor of `web` changes its cadence (the same identity).
fn aggregator_config(second: bool, ports: &[u16; 4]) -> String {
    aggregator(second, ports, false).render()
}

/// `aggregator_config`, or (`broken`) the first config with an unknown field in monitor `tcp`
/// and `www.reload.test` naming a pool that does not exist.
fn aggregator(second: bool, ports: &[u16; 4], broken: bool) -> Config {
    let [a, b, c, s] = *ports;
    let (interval, weight, other, spare_monitor) = if second {
        (2, 0.5, Endpoint::new("c", ("127.0.0.1", c)), "tcp")
    } else {
        (1, 1.0, Endpoint::new("b", ("127.0.0.1", b)), "http")
    };
    let tcp = Monitor::tcp("tcp").interval(1).timeout(1);
    let (tcp, www_pools): (Monitor, &[&str]) = if broken {
        (tcp.set("surprise", "true"), &["nowhere"])
    } else {
        (tcp, &["web", "spare"])
    };
    Config::new()
        .monitor(
            Monitor::http("http")
                .path("/")
                .interval(interval)
                .timeout(1),
        )
        .monitor(tcp)
        .pool(
            Pool::new("web")
                .monitor("http")
                .regions(&["WEU"])
                .endpoint(Endpoint::new("a", ("127.0.0.1", a)).weight(weight))
                .endpoint(other),
        )
        .pool(
            Pool::new("spare")
                .monitor(spare_monitor)
                .regions(&["WEU"])
                .origin("s", ("127.0.0.1", s)),
        )
        .load_balancer(Lb::new("www.reload.test").proxied().pools(www_pools))
        .load_balancer(Lb::new("dns.reload.test").pools(&["web", "spare"]).ttl(30))
}

/// What the probers run: every endpoint of both.
fn probers_config(ports: &[u16; 4]) -> String {
    let [a, b, c, s] = *ports;
    let web = ["a", "b", "c"].iter().zip([a, b, c]).fold(
        Pool::new("web").monitor("http").regions(&["WEU"]),
        |p, (n, port)| p.origin(n, ("127.0.0.1", port)),
    );
    Config::new()
        .monitor(Monitor::http("http").path("/").interval(1).timeout(1))
        .pool(web)
        .pool(
            Pool::new("spare")
                .monitor("http")
                .regions(&["WEU"])
                .origin("s", ("127.0.0.1", s)),
        )
        .render()
}

/// The events the aggregator logged for endpoint `endpoint` of `web` (not initial ones).
fn events_of(admin: std::net::SocketAddr, endpoint: &str) -> Vec<serde_json::Value> {
    get(admin, &format!("/events?pool=web&endpoint={endpoint}"))
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// What one reload of the fifty saw.
#[derive(Debug)]
struct Reload {
    /// `POST /-/reload`'s status and answer.
    answer: (u16, serde_json::Value),
    /// Who answered each of six requests begun after the answer (`None`: it failed).
    answered_by: Vec<Option<String>>,
    /// The WebSocket's echo of a message sent after it (`Err`: what broke).
    echo: Result<(), String>,
    /// Whether requests and queries were answered before the next reload.
    traffic_after: bool,
}

/// A mesh whose aggregator (DNS and proxy) was reloaded fifty times under traffic, alternating
/// between `aggregator_config(false)` and `(true)`, and what each reload and the traffic saw.
struct Fifty {
    admin: std::net::SocketAddr,
    reloads: Vec<Reload>,
    /// The streaming download begun before the first reload: its status and length.
    download: Option<(u16, usize)>,
    /// What failed among the keep-alive requests, the new connections and the queries.
    failures: Vec<String>,
    served: usize,
    queries: usize,
    /// The time of the last event for `a` before the reloads.
    quiet_since: u64,
    _origins: [Origin; 4],
    _scratch: tempfile::TempDir,
    _mesh: Procs,
}

/// Traffic through the proxy and the DNS server until `stop`: one keep-alive connection, a new
/// connection per request, `dig` queries.
struct Traffic {
    stop: Arc<AtomicBool>,
    failures: Arc<Mutex<Vec<String>>>,
    served: Arc<AtomicUsize>,
    queries: Arc<AtomicUsize>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(proxy: std::net::SocketAddr, dns: std::net::SocketAddr) -> Traffic {
        let t = Traffic {
            stop: Arc::default(),
            failures: Arc::default(),
            served: Arc::default(),
            queries: Arc::default(),
            threads: Vec::new(),
        };
        let mut threads = Vec::new();
        let (stop, failures, served) = (t.stop.clone(), t.failures.clone(), t.served.clone());
        threads.push(std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(proxy).expect("proxy");
            s.set_read_timeout(Some(Duration::from_secs(10))).ok();
            while !stop.load(Ordering::Relaxed) {
                match exchange(&mut s, "www.reload.test", "/") {
                    Some((200, _)) => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        let failure = format!("keep-alive: {other:?}");
                        failures.lock().unwrap().push(failure);
                        return;
                    }
                }
            }
        }));
        let (stop, failures, served) = (t.stop.clone(), t.failures.clone(), t.served.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match answered_by(proxy) {
                    Some(_) => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    None => failures
                        .lock()
                        .unwrap()
                        .push("new connection: failed".into()),
                }
            }
        }));
        let (stop, failures, queries) = (t.stop.clone(), t.failures.clone(), t.queries.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if dig_answers(dns, "dns.reload.test") {
                    queries.fetch_add(1, Ordering::Relaxed);
                } else {
                    failures.lock().unwrap().push("dig: no answer".into());
                }
            }
        }));
        Traffic { threads, ..t }
    }

    /// Whether more requests (5) and queries were answered within 10 s.
    fn flows(&self) -> bool {
        let (requests, answered) = (
            self.served.load(Ordering::Relaxed),
            self.queries.load(Ordering::Relaxed),
        );
        wait_until(Duration::from_secs(10), || {
            self.served.load(Ordering::Relaxed) > requests + 5
                && self.queries.load(Ordering::Relaxed) > answered
        })
        .is_some()
    }

    /// Stops the traffic: the failures, the requests answered and the queries answered.
    fn stop(self) -> (Vec<String>, usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("traffic thread");
        }
        let failures = std::mem::take(&mut *self.failures.lock().unwrap());
        (
            failures,
            self.served.load(Ordering::Relaxed),
            self.queries.load(Ordering::Relaxed),
        )
    }
}

/// Reload `reload` of the fifty: the file written in place and renamed over (as an editor or
/// a config tool does), `POST /-/reload`, then requests, a WebSocket message and traffic.
fn reload_once(
    reload: u32,
    agg: &Path,
    ports: &[u16; 4],
    admin: std::net::SocketAddr,
    proxy: std::net::SocketAddr,
    ws: &mut Option<WebSocket>,
    traffic: &Traffic,
) -> Reload {
    let second = reload % 2 == 1;
    let tmp = agg.with_extension("toml.new");
    std::fs::write(&tmp, aggregator_config(second, ports)).expect("write");
    std::fs::rename(&tmp, agg).expect("rename");
    let answer = post_reload(admin, Some(TOKEN));
    let answered_by = (0..6).map(|_| answered_by(proxy)).collect();
    let msg = tungstenite::Message::text(format!("message {reload}"));
    let echo = match ws.as_mut() {
        None => Err("closed by an earlier reload".to_string()),
        Some(ws) => match ws.send(msg.clone()).and_then(|()| ws.read()) {
            Ok(echo) if echo == msg => Ok(()),
            Ok(other) => Err(format!("echoed {other:?}")),
            Err(e) => Err(e.to_string()),
        },
    };
    if echo.is_err() {
        *ws = None;
    }
    Reload {
        answer,
        answered_by,
        echo,
        traffic_after: traffic.flows(),
    }
}

type WebSocket = tungstenite::WebSocket<std::net::TcpStream>;

fn start_fifty() -> Fifty {
    let origins = ["a", "b", "c", "s"].map(|n| named_origin("127.0.0.1", n, Duration::ZERO));
    let ports = [0, 1, 2, 3].map(|i| origins[i].port);
    let (dir, key) = scratch_dir_with_key("live-config");
    let agg = dir.path().join("aggregator.toml");
    let probers = dir.path().join("probers.toml");
    std::fs::write(&agg, aggregator_config(false, &ports)).expect("config");
    std::fs::write(&probers, probers_config(&ports)).expect("config");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let (admin, dns, proxy) = (free_tcp(), free_tcp_and_udp(), free_tcp());
    let extra: Vec<String> = ["--admin-token-file", token.to_str().unwrap()]
        .into_iter()
        .chain(["--dns", &dns.to_string(), "--proxy", &proxy.to_string()])
        .chain(["--proxy-workers", "2"])
        .map(String::from)
        .collect();
    let (mesh, _) = start_mesh_split(&agg, &probers, &key, admin, &extra);
    wait_for("a verdict for a and b", Duration::from_secs(40), || {
        answered_by(proxy).is_some()
            && get(admin, "/status").is_some_and(|s| {
                s["pools"][0]["endpoints"]
                    .as_array()
                    .is_some_and(|e| e.iter().all(|e| e["verdict"] == "healthy"))
            })
    });
    wait_for("DNS answers", Duration::from_secs(20), || {
        dig_answers(dns, "dns.reload.test")
    });
    let quiet_since = events_of(admin, "a")
        .iter()
        .filter_map(|e| e["at_ms"].as_u64())
        .max()
        .unwrap_or(0);
    let traffic = Traffic::start(proxy, dns);
    // One long streaming download (8 s), begun before the first reload.
    let download = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(proxy).expect("proxy");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        exchange(&mut s, "www.reload.test", "/drip").map(|(status, body)| (status, body.len()))
    });
    // One WebSocket, open through every reload.
    let ws_stream = std::net::TcpStream::connect(proxy).expect("proxy");
    ws_stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .ok();
    let (ws, _) =
        tungstenite::client("ws://www.reload.test/ws", ws_stream).expect("WebSocket handshake");
    let mut ws = Some(ws);
    let reloads = (1..=50)
        .map(|r| reload_once(r, &agg, &ports, admin, proxy, &mut ws, &traffic))
        .collect();
    let download = download.join().expect("download");
    let (failures, served, queries) = traffic.stop();
    Fifty {
        admin,
        reloads,
        download,
        failures,
        served,
        queries,
        quiet_since,
        _origins: origins,
        _scratch: dir,
        _mesh: mesh,
    }
}

static FIFTY: Shared<Fifty> = Shared::new(start_fifty);

/// The endpoint reload `reload` (1 to 50) removed: `b` by the odd ones, `c` by the even ones.
fn removed_by(reload: usize) -> &'static str {
    if reload % 2 == 1 {
        "b"
    } else {
        "c"
    }
}

fn every_reload_answers_that_it_reloaded_with_the_next_generation(w: &mut Fifty) {
    for (i, r) in w.reloads.iter().enumerate() {
        let (status, answer) = &r.answer;
        assert_eq!(*status, 200, "reload {}: {answer}", i + 1);
        assert_eq!(answer["reloaded"], true, "reload {}: {answer}", i + 1);
        assert_eq!(answer["generation"], i + 2, "reload {}: {answer}", i + 1);
    }
}

fn requests_begun_after_a_reload_are_answered_and_never_by_the_endpoint_it_removed(w: &mut Fifty) {
    for (i, r) in w.reloads.iter().enumerate() {
        for by in &r.answered_by {
            let by = by
                .as_deref()
                .unwrap_or_else(|| panic!("reload {}: a request failed", i + 1));
            assert_ne!(
                by,
                removed_by(i + 1),
                "reload {}: the removed endpoint answered",
                i + 1
            );
        }
    }
}

fn an_endpoint_a_reload_adds_takes_traffic_once_voted(w: &mut Fifty) {
    let saw_c = w
        .reloads
        .iter()
        .flat_map(|r| &r.answered_by)
        .filter(|by| by.as_deref() == Some("c"))
        .count();
    assert!(
        saw_c > 0,
        "c never answered after the reloads that added it"
    );
}

fn a_websocket_stays_open_through_every_reload(w: &mut Fifty) {
    for (i, r) in w.reloads.iter().enumerate() {
        assert_eq!(r.echo, Ok(()), "the WebSocket after reload {}", i + 1);
    }
}

fn traffic_flows_between_two_reloads(w: &mut Fifty) {
    let stalled: Vec<usize> = (1..=50)
        .filter(|i| !w.reloads[i - 1].traffic_after)
        .collect();
    assert!(
        stalled.is_empty(),
        "no traffic for 10 s after reloads {stalled:?}"
    );
}

fn a_streaming_download_begun_before_the_reloads_completes(w: &mut Fifty) {
    let download = w.download.expect("the download broke off");
    assert_eq!(
        download,
        (200, 80 * 1024),
        "the streaming download completes"
    );
}

fn no_request_or_query_fails_while_the_aggregator_reloads(w: &mut Fifty) {
    let failures = &w.failures;
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(w.served > 100, "traffic flowed: {}", w.served);
    assert!(w.queries > 20, "queries flowed: {}", w.queries);
}

fn an_endpoint_no_reload_changed_gets_no_event(w: &mut Fifty) {
    let a_events: Vec<_> = events_of(w.admin, "a")
        .into_iter()
        .filter(|e| e["at_ms"].as_u64().unwrap_or(0) > w.quiet_since)
        .collect();
    assert!(
        a_events.is_empty(),
        "events for the unchanged endpoint: {a_events:?}"
    );
}

fn each_reload_that_removes_an_endpoint_logs_one_removal_event(w: &mut Fifty) {
    let removed_b = events_of(w.admin, "b")
        .iter()
        .filter(|e| e["kind"] == "endpoint_removed")
        .count();
    assert_eq!(removed_b, 25, "one removal event per reload that removed b");
}

fn the_generation_and_the_reload_metrics_count_every_reload(w: &mut Fifty) {
    let status = get(w.admin, "/status").expect("status");
    assert_eq!(status["config_generation"], 51);
    let metrics = scrape(w.admin);
    let success = metric(
        &metrics,
        "meshlb_config_reloads_total",
        "result=\"success\"",
    );
    assert_eq!(success, Some(50.0));
    let last = metric(&metrics, "meshlb_config_last_reload_successful", "");
    assert_eq!(last, Some(1.0));
}

fn an_endpoint_the_last_reload_removed_no_longer_shows_healthy(w: &mut Fifty) {
    let metrics = scrape(w.admin);
    let c_healthy: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("meshlb_endpoint_state{"))
        .filter(|l| l.contains("endpoint=\"c\"") && l.contains("state=\"healthy\""))
        .collect();
    assert!(
        !c_healthy.is_empty() && c_healthy.iter().all(|l| l.ends_with(" 0")),
        "no alert on the gone: {c_healthy:?}"
    );
}

fn an_aggregator_refuses_a_broken_reload_and_keeps_serving() {
    let origin = named_origin("127.0.0.1", "a", Duration::ZERO);
    let ports = [origin.port, origin.port, origin.port, origin.port];
    let (dir, key) = scratch_dir_with_key("live-config-broken");
    let agg = dir.path().join("aggregator.toml");
    let good = aggregator_config(false, &ports);
    std::fs::write(&agg, &good).expect("config");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let log = dir.path().join("aggregator.log");
    let child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["aggregator", "--config", agg.to_str().unwrap()])
        .args(["--region", "WEU", "--admin", &admin.to_string()])
        .args(["--admin-token-file", token.to_str().unwrap()])
        .args(["--proxy", &proxy.to_string(), "--proxy-workers", "1"])
        .args(["--listen", &free_udp().to_string()])
        .args(["--key-file", key.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("aggregator");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let mut procs = Procs(vec![child]);
    wait_for("the admin API", Duration::from_secs(20), || {
        get(admin, "/status").is_some()
    });
    let hash = get(admin, "/status").expect("status")["config_hash"].clone();

    // Without the token, or with none configured, no reload.
    assert_eq!(post_reload(admin, None).0, 401);
    assert_eq!(post_reload(admin, Some("wrong")).0, 401);
    // The same file: nothing to do.
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(
        (status, &answer["unchanged"]),
        (200, &serde_json::json!(true)),
        "{answer}"
    );

    // An unknown field and a pool reference to nothing: both reported, nothing changed.
    let broken = aggregator(false, &ports, true).render();
    std::fs::write(&agg, &broken).expect("broken");
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["reloaded"], false);
    let errors: Vec<String> = answer["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(errors.iter().any(|e| e.contains("surprise")), "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("default_pools") && e.contains("nowhere")),
        "{errors:?}"
    );
    assert!(
        errors.iter().all(|e| e.contains("aggregator.toml")),
        "each names the file: {errors:?}"
    );
    let status = get(admin, "/status").expect("status");
    assert_eq!(status["config_generation"], 1);
    assert_eq!(status["config_hash"], hash);
    let metrics = scrape(admin);
    assert_eq!(
        metric(&metrics, "meshlb_config_last_reload_successful", ""),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "meshlb_config_reloads_total",
            "result=\"failure\""
        ),
        Some(1.0)
    );

    // SIGHUP: refused again, logged; the aggregator lives on and serves the old config.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the SIGHUP refusal", Duration::from_secs(20), || {
        metric(
            &scrape(admin),
            "meshlb_config_reloads_total",
            "result=\"failure\"",
        ) == Some(2.0)
    });
    // The refusal is counted before it is logged.
    let mut text = String::new();
    wait_for("the refusal logged", Duration::from_secs(10), || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("config reload (SIGHUP) refused, keeping generation 1")
    });
    assert!(text.contains("surprise"), "{text}");
    assert!(procs.0[0].try_wait().expect("status").is_none(), "alive");

    // Fixed: taken, by SIGHUP as by the API.
    std::fs::write(&agg, aggregator_config(true, &ports)).expect("fixed");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for("the fixed file taken", Duration::from_secs(20), || {
        get(admin, "/status").is_some_and(|s| s["config_generation"] == 2)
    });
    // The new generation shows in /status before the frontends are swapped and it is counted.
    wait_for("the reload counted", Duration::from_secs(10), || {
        metric(&scrape(admin), "meshlb_config_last_reload_successful", "") == Some(1.0)
    });
    drop(procs);
}

/// A config with cookie affinity over `a` and `b` (`b_enabled` or not), `drain_duration = 10`:
/// long enough for the checks made within it on a loaded machine.
fn drain_config(b_enabled: bool, a: u16, b: u16) -> Config {
    let web = Pool::new("web")
        .monitor("http")
        .regions(&["WEU"])
        .origin("a", ("127.0.0.1", a))
        .endpoint(Endpoint::new("b", ("127.0.0.1", b)).enabled(b_enabled));
    drain_config_with(web)
}

/// `drain_config` with pool `web` as given.
fn drain_config_with(web: Pool) -> Config {
    Config::new()
        .monitor(Monitor::http("http").path("/").interval(1).timeout(1))
        .pool(web)
        .load_balancer(
            Lb::new("www.reload.test")
                .proxied()
                .pools(&["web"])
                .affinity("cookie")
                .drain_duration(10),
        )
}

/// Who answered, and the affinity cookie it set (name=value), when it set one.
fn with_cookie(
    proxy: std::net::SocketAddr,
    cookie: Option<&str>,
) -> Option<(String, Option<String>)> {
    let mut s = std::net::TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let extra = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    let (status, fields, body) = exchange_with(&mut s, "www.reload.test", "/", &extra)?;
    if status != 200 {
        return None;
    }
    let set = fields
        .iter()
        .find(|(k, _)| k == "set-cookie")
        .and_then(|(_, v)| v.split(';').next())
        .map(str::to_string);
    Some((
        String::from_utf8_lossy(&body).lines().next()?.to_string(),
        set,
    ))
}

fn an_endpoint_disabled_by_a_reload_drains_its_sessions_for_drain_duration() {
    let (a, b) = (
        named_origin("127.0.0.1", "a", Duration::ZERO),
        named_origin("127.0.0.1", "b", Duration::ZERO),
    );
    let (dir, key) = scratch_dir_with_key("live-config-drain");
    let agg = dir.path().join("aggregator.toml");
    let probers = dir.path().join("probers.toml");
    drain_config(true, a.port, b.port).write(&agg);
    drain_config(true, a.port, b.port).write(&probers);
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let extra: Vec<String> = [
        "--admin-token-file",
        token.to_str().unwrap(),
        "--proxy",
        &proxy.to_string(),
        "--proxy-workers",
        "1",
    ]
    .map(String::from)
    .to_vec();
    let (_mesh, _) = start_mesh_split(&agg, &probers, &key, admin, &extra);
    wait_for("both endpoints healthy", Duration::from_secs(40), || {
        get(admin, "/status").is_some_and(|s| {
            s["pools"][0]["endpoints"]
                .as_array()
                .is_some_and(|e| e.iter().all(|e| e["verdict"] == "healthy"))
        })
    });
    // A session bound to b.
    let mut cookie = None;
    wait_for(
        "a session on b",
        Duration::from_secs(20),
        || match with_cookie(proxy, None) {
            Some((by, Some(c))) if by == "b" => {
                cookie = Some(c);
                true
            }
            _ => false,
        },
    );
    let cookie = cookie.expect("cookie");
    assert_eq!(with_cookie(proxy, Some(&cookie)).expect("answer").0, "b");

    // b disabled by a reload: its session stays for drain_duration; no new client lands there.
    drain_config(false, a.port, b.port).write(&agg);
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    let disabled = std::time::Instant::now();
    let drain = get(admin, "/status").expect("status")["pools"][0]["endpoints"][1]["drain"].clone();
    assert_eq!(drain["by"], serde_json::json!(["config"]), "{drain}");
    assert_eq!(drain["drain_duration"], 10, "{drain}");
    let left = drain["seconds_left"].as_u64().expect("seconds left");
    assert!((8..=10).contains(&left), "{drain}");
    for _ in 0..20 {
        let (by, _) = with_cookie(proxy, None).expect("a new client");
        assert_eq!(by, "a", "a new client landed on the draining endpoint");
    }
    assert_eq!(
        with_cookie(proxy, Some(&cookie)).expect("the session").0,
        "b",
        "the session stays on b while it drains"
    );
    // Then it moves (the promise: about drain_duration; asserted with a margin).
    wait_for("the session moved", Duration::from_secs(25), || {
        with_cookie(proxy, Some(&cookie)).is_some_and(|(by, _)| by == "a")
    });
    let moved_after = disabled.elapsed();
    assert!(
        moved_after >= Duration::from_secs(8),
        "the session left b after {moved_after:?}, before its drain_duration"
    );
    let after = get(admin, "/status").expect("status")["pools"][0]["endpoints"][1]["drain"].clone();
    assert_eq!(after["seconds_left"], 0, "{after}");

    // A reload that makes the pool critical (minimum_origins 2, one endpoint enabled) is news,
    // not a first verdict: its event is not marked initial, so it is notified.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0));
    let web = Pool::new("web")
        .monitor("http")
        .regions(&["WEU"])
        .minimum_origins(2)
        .origin("a", ("127.0.0.1", a.port))
        .endpoint(Endpoint::new("b", ("127.0.0.1", b.port)).enabled(false));
    drain_config_with(web).write(&agg);
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    let mut event = None;
    wait_for("the pool's critical event", Duration::from_secs(20), || {
        event = get(admin, &format!("/events?pool=web&since={since}"))
            .and_then(|v| v.as_array().cloned())
            .and_then(|list| {
                list.into_iter()
                    .find(|e| e["kind"] == "pool" && e["to"] == "critical")
            });
        event.is_some()
    });
    let event = event.expect("event");
    assert_eq!(event["from"], "healthy", "{event}");
    assert!(
        event.get("initial").is_none(),
        "not a first verdict: {event}"
    );
}

fn main() {
    let alone = trials![
        // The trials with worlds of their own first, beside the fifty reloads' world.
        a_prober_follows_its_config_map_and_refuses_a_broken_file,
        an_aggregator_refuses_a_broken_reload_and_keeps_serving,
        an_endpoint_disabled_by_a_reload_drains_its_sessions_for_drain_duration,
    ];
    let fifty = trials![FIFTY =>
        every_reload_answers_that_it_reloaded_with_the_next_generation,
        requests_begun_after_a_reload_are_answered_and_never_by_the_endpoint_it_removed,
        an_endpoint_a_reload_adds_takes_traffic_once_voted,
        a_websocket_stays_open_through_every_reload,
        traffic_flows_between_two_reloads,
        a_streaming_download_begun_before_the_reloads_completes,
        no_request_or_query_fails_while_the_aggregator_reloads,
        an_endpoint_no_reload_changed_gets_no_event,
        each_reload_that_removes_an_endpoint_logs_one_removal_event,
        the_generation_and_the_reload_metrics_count_every_reload,
        an_endpoint_the_last_reload_removed_no_longer_shows_healthy,
    ];
    let all = [alone, fifty].into_iter().flatten().collect();
    // The fifty reloads' mesh and the other trials' nodes run side by side, as the tests of
    // this file always did.
    trials::run(all, Threads::Cores);
}
