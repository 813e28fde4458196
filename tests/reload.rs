//! Reloading a node's configuration: a prober follows its file through a Kubernetes-style
//! ConfigMap update (a new directory, the `..data` symlink swapped) and through SIGHUP, refuses
//! a broken file with its errors and keeps probing with the config it had, and says so in
//! metrics.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::*;

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
    let origins: Vec<String> = (0..endpoints)
        .map(|i| format!("{{ name = \"e{i}\", address = \"127.0.0.1\", port = 9 }}"))
        .collect();
    format!(
        "[[monitors]]\nname = \"tcp\"\ntype = \"tcp\"\ninterval = 5\ntimeout = 1\n\
         [[pools]]\nname = \"web\"\nmonitor = \"tcp\"\ncheck_regions = [\"WEU\"]\n\
         origins = [{}]\n",
        origins.join(", ")
    )
}

#[test]
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
    let [a, b, c, s] = *ports;
    let (interval, weight, other, spare_monitor) = if second {
        (
            2,
            0.5,
            format!("{{ name = \"c\", address = \"127.0.0.1\", port = {c} }}"),
            "tcp",
        )
    } else {
        (
            1,
            1.0,
            format!("{{ name = \"b\", address = \"127.0.0.1\", port = {b} }}"),
            "http",
        )
    };
    format!(
        r#"
[[monitors]]
name = "http"
path = "/"
interval = {interval}
timeout = 1
[[monitors]]
name = "tcp"
type = "tcp"
interval = 1
timeout = 1
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "a", address = "127.0.0.1", port = {a}, weight = {weight} }}, {other}]
[[pools]]
name = "spare"
monitor = "{spare_monitor}"
check_regions = ["WEU"]
origins = [{{ name = "s", address = "127.0.0.1", port = {s} }}]
[[load_balancers]]
name = "www.reload.test"
proxied = true
default_pools = ["web", "spare"]
[[load_balancers]]
name = "dns.reload.test"
default_pools = ["web", "spare"]
ttl = 30
"#
    )
}

/// What the probers run: every endpoint of both.
fn probers_config(ports: &[u16; 4]) -> String {
    let [a, b, c, s] = *ports;
    format!(
        r#"
[[monitors]]
name = "http"
path = "/"
interval = 1
timeout = 1
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "a", address = "127.0.0.1", port = {a} }}, {{ name = "b", address = "127.0.0.1", port = {b} }}, {{ name = "c", address = "127.0.0.1", port = {c} }}]
[[pools]]
name = "spare"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "s", address = "127.0.0.1", port = {s} }}]
"#
    )
}

/// The events the aggregator logged for endpoint `endpoint` of `web` (not initial ones).
fn events_of(admin: std::net::SocketAddr, endpoint: &str) -> Vec<serde_json::Value> {
    get(admin, &format!("/events?pool=web&endpoint={endpoint}"))
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn an_aggregator_reloads_fifty_times_under_traffic_without_a_failure() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

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
    let extra: Vec<String> = [
        "--admin-token-file",
        token.to_str().unwrap(),
        "--dns",
        &dns.to_string(),
        "--proxy",
        &proxy.to_string(),
        "--proxy-workers",
        "2",
    ]
    .map(String::from)
    .to_vec();
    let (_mesh, _) = support::start_mesh_split(&agg, &probers, &key, admin, &extra);
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
    let quiet_since = {
        let events = events_of(admin, "a");
        events
            .iter()
            .filter_map(|e| e["at_ms"].as_u64())
            .max()
            .unwrap_or(0)
    };

    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let served = Arc::new(AtomicUsize::new(0));
    let mut load = Vec::new();
    // Keep-alive: one connection for the whole run.
    {
        let (stop, failures, served) = (
            Arc::clone(&stop),
            Arc::clone(&failures),
            Arc::clone(&served),
        );
        load.push(std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(proxy).expect("proxy");
            s.set_read_timeout(Some(Duration::from_secs(10))).ok();
            while !stop.load(Ordering::Relaxed) {
                match exchange(&mut s, "www.reload.test", "/") {
                    Some((200, _)) => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("keep-alive: {other:?}"));
                        return;
                    }
                }
            }
        }));
    }
    // A new connection per request.
    {
        let (stop, failures, served) = (
            Arc::clone(&stop),
            Arc::clone(&failures),
            Arc::clone(&served),
        );
        load.push(std::thread::spawn(move || {
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
    }
    // DNS queries with `dig`.
    let queries = Arc::new(AtomicUsize::new(0));
    {
        let (stop, failures, queries) = (
            Arc::clone(&stop),
            Arc::clone(&failures),
            Arc::clone(&queries),
        );
        load.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if dig_answers(dns, "dns.reload.test") {
                    queries.fetch_add(1, Ordering::Relaxed);
                } else {
                    failures.lock().unwrap().push("dig: no answer".into());
                }
            }
        }));
    }
    // One long streaming download, begun before the first reload (8 s).
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
    let (mut ws, _) =
        tungstenite::client("ws://www.reload.test/ws", ws_stream).expect("WebSocket handshake");

    let mut saw_c = 0;
    for reload in 1..=50u32 {
        let second = reload % 2 == 1;
        // Written in place and renamed over, as an editor or a config tool does.
        let tmp = dir.path().join("aggregator.toml.new");
        std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(aggregator_config(second, &ports).as_bytes()))
            .expect("write");
        std::fs::rename(&tmp, &agg).expect("rename");
        let (status, answer) = post_reload(admin, Some(TOKEN));
        assert_eq!(status, 200, "reload {reload}: {answer}");
        assert_eq!(answer["reloaded"], true, "reload {reload}: {answer}");
        assert_eq!(answer["generation"], u64::from(reload) + 1);
        // Requests begun after the answer see the new config: never the removed endpoint.
        for _ in 0..6 {
            let by =
                answered_by(proxy).unwrap_or_else(|| panic!("reload {reload}: a request failed"));
            let gone = if second { "b" } else { "c" };
            assert_ne!(by, gone, "reload {reload}: the removed endpoint answered");
            saw_c += usize::from(by == "c");
        }
        let msg = format!("message {reload}");
        ws.send(tungstenite::Message::text(msg.clone()))
            .expect("WebSocket send");
        assert_eq!(
            ws.read().expect("WebSocket echo"),
            tungstenite::Message::text(msg)
        );
        // Traffic flows between two reloads: more requests answered, more queries too.
        let (requests, answered) = (
            served.load(Ordering::Relaxed),
            queries.load(Ordering::Relaxed),
        );
        wait_for(
            "traffic between two reloads",
            Duration::from_secs(10),
            || {
                served.load(Ordering::Relaxed) > requests + 5
                    && queries.load(Ordering::Relaxed) > answered
            },
        );
    }
    // The added endpoint took traffic once voted (its votes were there: at its first tally).
    assert!(
        saw_c > 0,
        "c never answered after the reloads that added it"
    );
    let (status, len) = download
        .join()
        .expect("download")
        .expect("the download broke off");
    assert_eq!(
        (status, len),
        (200, 80 * 1024),
        "the streaming download completes"
    );
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().expect("load thread");
    }
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(served.load(Ordering::Relaxed) > 100, "traffic flowed");
    assert!(queries.load(Ordering::Relaxed) > 20, "queries flowed");

    // No event for the endpoint that stayed; one removal per reload that removed b.
    let a_events: Vec<_> = events_of(admin, "a")
        .into_iter()
        .filter(|e| e["at_ms"].as_u64().unwrap_or(0) > quiet_since)
        .collect();
    assert!(
        a_events.is_empty(),
        "events for the unchanged endpoint: {a_events:?}"
    );
    let removed_b = events_of(admin, "b")
        .iter()
        .filter(|e| e["kind"] == "endpoint_removed")
        .count();
    assert_eq!(removed_b, 25, "one removal event per reload that removed b");
    let status = get(admin, "/status").expect("status");
    assert_eq!(status["config_generation"], 51);
    let metrics = scrape(admin);
    assert_eq!(
        metric(
            &metrics,
            "meshlb_config_reloads_total",
            "result=\"success\""
        ),
        Some(50.0)
    );
    assert_eq!(
        metric(&metrics, "meshlb_config_last_reload_successful", ""),
        Some(1.0)
    );
    // The endpoint the last reload removed no longer shows as healthy (no alert on the gone).
    let c_healthy: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("meshlb_endpoint_state{"))
        .filter(|l| l.contains("endpoint=\"c\"") && l.contains("state=\"healthy\""))
        .collect();
    assert!(
        !c_healthy.is_empty() && c_healthy.iter().all(|l| l.ends_with(" 0")),
        "{c_healthy:?}"
    );
}

#[test]
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
    let broken = good
        .replacen("[[pools]]", "surprise = true\n[[pools]]", 1)
        .replace(
            "default_pools = [\"web\", \"spare\"]\n[[load_balancers]]\nname = \"dns.reload.test\"",
            "default_pools = [\"nowhere\"]\n[[load_balancers]]\nname = \"dns.reload.test\"",
        );
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
fn drain_config(b_enabled: bool, a: u16, b: u16) -> String {
    format!(
        r#"
[[monitors]]
name = "http"
path = "/"
interval = 1
timeout = 1
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{{ name = "a", address = "127.0.0.1", port = {a} }}, {{ name = "b", address = "127.0.0.1", port = {b}, enabled = {b_enabled} }}]
[[load_balancers]]
name = "www.reload.test"
proxied = true
default_pools = ["web"]
session_affinity = "cookie"
session_affinity_attributes = {{ drain_duration = 10 }}
"#
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

#[test]
fn an_endpoint_disabled_by_a_reload_drains_its_sessions_for_drain_duration() {
    let (a, b) = (
        named_origin("127.0.0.1", "a", Duration::ZERO),
        named_origin("127.0.0.1", "b", Duration::ZERO),
    );
    let (dir, key) = scratch_dir_with_key("live-config-drain");
    let agg = dir.path().join("aggregator.toml");
    let probers = dir.path().join("probers.toml");
    std::fs::write(&agg, drain_config(true, a.port, b.port)).expect("config");
    std::fs::write(&probers, drain_config(true, a.port, b.port)).expect("config");
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
    let (_mesh, _) = support::start_mesh_split(&agg, &probers, &key, admin, &extra);
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
    std::fs::write(&agg, drain_config(false, a.port, b.port)).expect("config");
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
    let critical = drain_config(false, a.port, b.port).replacen(
        "check_regions = [\"WEU\"]",
        "check_regions = [\"WEU\"]\nminimum_origins = 2",
        1,
    );
    std::fs::write(&agg, critical).expect("config");
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
