//! The fifty reloads' world (`FIFTY`): an aggregator (DNS and proxy) behind a real mesh,
//! reloaded fifty times under traffic, alternating between two configs, and what each reload
//! and the traffic saw.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use test_support::config::{Config, Endpoint, Lb, Monitor, Pool};
use test_support::*;

use super::clients::{answered_by, dig_answers, exchange};
use crate::{post_reload, TOKEN};

/// The aggregator's two configs. Between them: the weight of `a` changes, `b` is removed and
/// `c` added, the pool `spare`'s monitor changes its kind (a new identity there), and the
/// monitor of `web` changes its cadence (the same identity).
pub fn aggregator_config(second: bool, ports: &[u16; 4]) -> String {
    aggregator(second, ports, false).render()
}

/// `aggregator_config`, or (`broken`) the first config with an unknown field in monitor `tcp`
/// and `www.reload.test` naming a pool that does not exist.
pub fn aggregator(second: bool, ports: &[u16; 4], broken: bool) -> Config {
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
pub fn probers_config(ports: &[u16; 4]) -> String {
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
pub fn events_of(admin: std::net::SocketAddr, endpoint: &str) -> Vec<serde_json::Value> {
    get(admin, &format!("/events?pool=web&endpoint={endpoint}"))
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// What one reload of the fifty saw.
#[derive(Debug)]
pub struct Reload {
    /// `POST /-/reload`'s status and answer.
    pub answer: (u16, serde_json::Value),
    /// Who answered each of six requests begun after the answer (`None`: it failed).
    pub answered_by: Vec<Option<String>>,
    /// The WebSocket's echo of a message sent after it (`Err`: what broke).
    pub echo: Result<(), String>,
    /// Whether requests and queries were answered before the next reload.
    pub traffic_after: bool,
}

/// A mesh whose aggregator (DNS and proxy) was reloaded fifty times under traffic, alternating
/// between `aggregator_config(false)` and `(true)`, and what each reload and the traffic saw.
pub struct Fifty {
    pub admin: std::net::SocketAddr,
    pub reloads: Vec<Reload>,
    /// The streaming download begun before the first reload: its status and length.
    pub download: Option<(u16, usize)>,
    /// What failed among the keep-alive requests, the new connections and the queries.
    pub failures: Vec<String>,
    pub served: usize,
    pub queries: usize,
    /// The time of the last event for `a` before the reloads.
    pub quiet_since: u64,
    _origins: [Origin; 4],
    _scratch: tempfile::TempDir,
    _mesh: Procs,
}

/// Traffic through the proxy and the DNS server until `stop`: one keep-alive connection, a new
/// connection per request, `dig` queries.
pub struct Traffic {
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
pub fn reload_once(
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

pub type WebSocket = tungstenite::WebSocket<std::net::TcpStream>;

pub fn start_fifty() -> Fifty {
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
