//! Hostile clients against a real aggregator and prober: each attack, and the defence that
//! holds (docs/security.md).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

/// Pool `web` of one endpoint `a` at `at`, behind `lb`.
fn one_pool(at: impl test_support::config::Address, lb: Lb) -> Config {
    Config::new()
        .pool(Pool::new("web").origin("a", at))
        .load_balancer(lb.pools(&["web"]))
}

/// Pool `web` of endpoints `a` and `b` at addresses (no ports), behind DNS load balancer `lb`.
fn two_endpoints(a: &str, b: &str, lb: &str) -> String {
    Config::new()
        .pool(Pool::new("web").origin("a", a).origin("b", b))
        .load_balancer(Lb::new(lb).pools(&["web"]))
        .render()
}

/// A proxied `www.hostile.test` in front of a closed port.
fn closed_port_config() -> String {
    one_pool(("127.0.0.1", 9), Lb::new("www.hostile.test").proxied()).render()
}

/// `curl -X method` on the admin API with `headers`: the status code.
fn call(admin: SocketAddr, method: &str, path: &str, headers: &[&str]) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .arg(format!("http://{admin}{path}"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

fn drained(admin: SocketAddr) -> usize {
    get(admin, "/drain")
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(usize::MAX)
}

fn wait_healthz(admin: SocketAddr) {
    wait_for("the admin API", Duration::from_secs(20), || {
        call(admin, "GET", "/healthz", &[]) == 200
    });
}

#[test]
fn admin_changes_need_the_token_and_never_come_from_a_browser() {
    let (scratch, key) = scratch_dir_with_key("hostile-admin");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    // Without a token: reads open, every change refused.
    let open = free_tcp();
    let _open = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        open,
        free_udp(),
        &[],
    )]);
    wait_healthz(open);
    assert_eq!(call(open, "GET", "/status", &[]), 200);
    assert_eq!(call(open, "POST", "/drain?pool=web&endpoint=a", &[]), 403);
    assert_eq!(call(open, "POST", "/-/reload", &[]), 403);
    assert_eq!(drained(open), 0);
    // With a token: a browser's cross-site form post is refused even carrying it.
    let admin = free_tcp();
    let token = admin_token_args(scratch.path());
    let _guarded = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &token,
    )]);
    wait_healthz(admin);
    let bearer = "Authorization: Bearer secret-token";
    let drain = "/drain?pool=web&endpoint=a";
    for browser in [
        "Origin: https://evil.example",
        "Sec-Fetch-Site: cross-site",
        "Content-Type: application/x-www-form-urlencoded",
        "Content-Type: text/plain",
    ] {
        assert_eq!(
            call(admin, "POST", drain, &[bearer, browser]),
            403,
            "{browser}"
        );
    }
    assert_eq!(call(admin, "POST", drain, &[]), 401);
    assert_eq!(drained(admin), 0, "nothing refused was applied");
    assert_eq!(call(admin, "POST", drain, &[bearer]), 200);
    assert_eq!(drained(admin), 1);
}

#[test]
fn a_request_head_that_never_ends_is_cut_at_the_admin_head_timeout() {
    let (scratch, key) = scratch_dir_with_key("hostile-head");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    let admin = free_tcp();
    let _p = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &["--admin-head-timeout-ms".into(), "500".into()],
    )]);
    wait_healthz(admin);
    let mut s = TcpStream::connect(admin).expect("connect");
    s.write_all(b"GET /status HTTP/1.1\r\nHost: a\r\n")
        .expect("partial head");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let start = Instant::now();
    let mut buf = [0u8; 512];
    // hyper answers 408 or just closes; either way the connection ends, long before 20 s.
    let ended = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    assert!(ended, "the connection was still open after 20 s");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
}

/// CPU seconds (user + system) the process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    ticks / 100.0 // USER_HZ is 100 on Linux
}

#[test]
fn connections_that_send_part_of_the_http2_preface_cost_next_to_nothing() {
    let (scratch, key) = scratch_dir_with_key("hostile-preface");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let child = start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        // The proxy's head timeout (10 s) closes them after the measurement.
        &["--proxy".into(), proxy.to_string()],
    );
    let pid = child.id();
    let _p = Procs(vec![child]);
    wait_healthz(admin);
    let window = Duration::from_secs(3);
    let used = |within: Duration| {
        let before = cpu_seconds(pid);
        std::thread::sleep(within);
        cpu_seconds(pid) - before
    };
    let idle = used(window);
    let dribblers: Vec<TcpStream> = (0..300)
        .map(|_| {
            let mut s = TcpStream::connect(proxy).expect("connect");
            s.write_all(b"P").expect("one byte of the preface");
            s
        })
        .collect();
    let busy = used(window);
    let share = (busy - idle) / window.as_secs_f64();
    assert!(
        share < 0.05,
        "300 connections with one byte of the preface cost {:.1} % of a core (idle {idle:.2} s, with them {busy:.2} s)",
        share * 100.0
    );
    drop(dribblers);
}

#[test]
fn a_node_whose_vital_task_ends_exits_non_zero_naming_it() {
    let (scratch, key) = scratch_dir_with_key("hostile-vital");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    // The prober's metrics listener cannot bind: the node must not run on without it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["prober", "--config", &config.display().to_string()])
        .args([
            "--region",
            "WEU",
            "--dc",
            "ams",
            "--metrics",
            &addr.to_string(),
        ])
        .args(["--listen", &free_udp().to_string(), "--key-file"])
        .arg(&key)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prober");
    let status = wait_until(Duration::from_secs(20), || {
        child.try_wait().ok().flatten().is_some()
    });
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        status.is_some(),
        "the prober kept running without its metrics listener"
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the metrics listener failed: cannot listen on"),
        "{stderr}"
    );
    drop(taken);
}

#[test]
fn admin_connections_beyond_the_limit_are_closed_and_counted() {
    let origin = origin();
    let (_p, admin, _proxy) = proxy_with(
        "hostile-admin-conns",
        origin.port,
        &["--admin-max-connections", "2"],
    );
    // Two idle connections fill the admin listener; a third is closed at accept.
    wait_for(
        "a connection over the limit is closed",
        Duration::from_secs(10),
        || {
            let _held: Vec<TcpStream> = (0..2)
                .map(|_| TcpStream::connect(admin).expect("connect"))
                .collect();
            let mut third = TcpStream::connect(admin).expect("connect");
            closed_within(&mut third, Duration::from_millis(500))
                .is_some_and(|(_, got)| got.is_empty())
        },
    );
    // Once they go, the API answers again, and says what it refused.
    wait_for(
        "the admin API answers again",
        Duration::from_secs(10),
        || metric(admin, "meshlb_admin_connections_refused_total") >= 1.0,
    );
}

/// A prober in WEU with `--dc`, its regions table `regions` (none: the embedded one).
fn prober(
    config: &std::path::Path,
    key: &std::path::Path,
    dc: &str,
    regions: Option<&std::path::Path>,
    seed: SocketAddr,
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meshlb"));
    if let Some(r) = regions {
        cmd.arg("--regions").arg(r);
    }
    cmd.args(["prober", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--dc", dc])
        .args([
            "--listen",
            &free_udp().to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .args(["--gossip-interval-ms", "100", "--key-file"])
        .arg(key)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prober")
}

#[test]
fn votes_count_only_from_datacenters_the_regions_table_lists() {
    let (scratch, key) = scratch_dir_with_key("hostile-roster");
    let dir = scratch.path();
    let origin = origin();
    let config = dir.join("meshlb.toml");
    Config::new()
        .monitor(Monitor::tcp("tcp").interval(1).timeout(1))
        .pool(
            Pool::new("web")
                .monitor("tcp")
                .regions(&["WEU"])
                .origin("a", ("127.0.0.1", origin.port)),
        )
        .load_balancer(Lb::new("www.hostile.test").pools(&["web"]))
        .write(&config);
    // The embedded table refuses an unknown datacenter at start, with the ones it knows.
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["prober", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--dc", "rogue", "--key-file"])
        .arg(&key)
        .args(["--listen", &free_udp().to_string()])
        .output()
        .expect("prober");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--dc rogue: not a datacenter of WEU") && stderr.contains("ams, fra, lhr"),
        "{stderr}"
    );
    // An insider with its own regions table claims a datacenter the aggregators' table lacks.
    let rogue_table = dir.join("regions.toml");
    let embedded = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
        .expect("regions.toml");
    std::fs::write(
        &rogue_table,
        embedded.replacen("code = \"ams\"", "code = \"rogue\"", 1),
    )
    .expect("rogue table");
    let admin = free_tcp();
    let seed = free_udp();
    let mut procs = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        seed,
        &[],
    )]);
    // Probers join the aggregator at the gossip address it tells in /members.
    wait_healthz(admin);
    let mut agg_gossip: Option<SocketAddr> = None;
    wait_for(
        "the aggregator in /members",
        Duration::from_secs(10),
        || {
            agg_gossip = get(admin, "/members")
                .and_then(|m| m[0]["address"].as_str().map(str::to_string))
                .and_then(|a| a.parse::<SocketAddr>().ok());
            agg_gossip.is_some()
        },
    );
    let agg_gossip = agg_gossip.expect("aggregator gossip address");
    procs.0.push(prober(
        &config,
        &key,
        "rogue",
        Some(&rogue_table),
        agg_gossip,
    ));
    wait_for(
        "the rogue prober is a live member",
        Duration::from_secs(20),
        || {
            get(admin, "/members").is_some_and(|m| {
                m.as_array().is_some_and(|a| {
                    a.iter()
                        .any(|n| n["datacenter"] == "rogue" && n["alive"] == true)
                })
            })
        },
    );
    wait_for("the off-roster gauge", Duration::from_secs(10), || {
        scrape(admin)
            .lines()
            .any(|l| l.starts_with("meshlb_off_roster_probers{") && l.ends_with(" 1"))
    });
    let verdict = || {
        get(admin, "/status").and_then(|s| {
            s["pools"][0]["endpoints"][0]["verdict"]
                .as_str()
                .map(str::to_string)
        })
    };
    assert_eq!(
        verdict().as_deref(),
        Some("unknown"),
        "the rogue's votes do not count"
    );
    // An honest prober in a listed datacenter: its vote counts.
    procs.0.push(prober(&config, &key, "fra", None, agg_gossip));
    wait_for(
        "a verdict from the honest prober",
        Duration::from_secs(20),
        || verdict().as_deref() == Some("healthy"),
    );
    let status = get(admin, "/status").expect("status");
    let dcs = &status["pools"][0]["endpoints"][0]["regions"][0];
    assert_eq!(
        (dcs["healthy_dcs"].as_u64(), dcs["silent_dcs"].as_u64()),
        (Some(1), Some(0)),
        "{dcs:#}"
    );
}

/// One keep-alive connection sending `n` requests, each with its own invented session id;
/// returns how many were answered 200.
fn invented_sessions(proxy: SocketAddr, host: &str, n: usize) -> usize {
    use std::io::BufRead;
    let s = TcpStream::connect(proxy).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut writer = s.try_clone().expect("clone");
    let mut reader = std::io::BufReader::new(s);
    let mut ok = 0;
    for i in 0..n {
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nX-Session: invented-{i}\r\n\r\n");
        writer.write_all(request.as_bytes()).expect("write");
        // One response: the head line by line, then Content-Length bytes.
        let (mut status, mut len, mut line) = (String::new(), 0usize, String::new());
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return ok;
            }
            if status.is_empty() {
                status = line.clone();
            } else if line == "\r\n" {
                break;
            } else if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).expect("body");
        if status.starts_with("HTTP/1.1 200") {
            ok += 1;
        }
    }
    ok
}

#[test]
fn invented_header_sessions_are_bounded_and_counted() {
    let (scratch, key) = scratch_dir_with_key("hostile-sessions");
    let origin = origin();
    let config = scratch.path().join("meshlb.toml");
    let sticky = Lb::new("sticky.hostile.test")
        .proxied()
        .affinity("header")
        .set(
            "session_affinity_attributes",
            r#"{ headers = ["X-Session"] }"#,
        );
    one_pool(("127.0.0.1", origin.port), sticky).write(&config);
    let (admin, proxy) = (free_tcp(), free_tcp());
    let _p = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &[
            "--proxy".into(),
            proxy.to_string(),
            "--proxy-workers".into(),
            "1".into(),
            "--proxy-max-header-sessions".into(),
            "128".into(),
        ],
    )]);
    wait_healthz(admin);
    wait_for("the proxy", Duration::from_secs(20), || {
        invented_sessions(proxy, "sticky.hostile.test", 1) == 1
    });
    assert_eq!(
        invented_sessions(proxy, "sticky.hostile.test", 1_000),
        1_000
    );
    let evicted = metric(admin, "meshlb_proxy_header_sessions_evicted_total");
    // 1,001 sessions into a table of 128 (16 shards of 8): all but 128 were pushed out (fewer
    // only if some shard got fewer than 8 of them).
    assert!((850.0..=873.0).contains(&evicted), "evicted {evicted}");
}

/// A DNS query for `name` A with id `id`, as bytes.
fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // no RD; one question
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, type A, class IN
    q
}

/// An aggregator serving DNS with `config` and `extra` flags: (processes, admin, DNS).
fn dns_aggregator(name: &str, config: &str, extra: &[&str]) -> (Procs, SocketAddr, SocketAddr) {
    let (scratch, key) = scratch_dir_with_key(name);
    let path = scratch.path().join("meshlb.toml");
    std::fs::write(&path, config).expect("config");
    let (admin, dns) = (free_tcp(), free_tcp_and_udp());
    let mut args = vec!["--dns".to_string(), dns.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let procs = Procs(vec![start_aggregator(
        &path,
        &key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_healthz(admin);
    // The scratch directory lives as long as the test binary (the config is read at start).
    std::mem::forget(scratch);
    (procs, admin, dns)
}

/// Reads one length-framed DNS message from a TCP connection (RFC 1035 section 4.2.2).
fn tcp_dns_answer(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut length = [0u8; 2];
    s.read_exact(&mut length).ok()?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(length))];
    s.read_exact(&mut answer).ok()?;
    Some(answer)
}

fn tcp_dns_query(id: u16, name: &str) -> Vec<u8> {
    let q = dns_query(id, name);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    framed
}

#[test]
fn dns_tcp_connections_are_capped_and_idle_ones_closed() {
    let (_p, admin, dns) = dns_aggregator(
        "hostile-dns-tcp",
        &one_pool("192.0.2.10", Lb::new("dns.hostile.test")).render(),
        &[
            "--dns-tcp-max-connections",
            "2",
            "--dns-tcp-idle-timeout-ms",
            "1000",
        ],
    );
    let answered = |s: &mut TcpStream, id: u16| {
        tcp_dns_answer(s).is_some_and(|a| a.len() > 12 && a[..2] == id.to_be_bytes() && a[7] == 1)
    };
    wait_for("the DNS server over TCP", Duration::from_secs(20), || {
        TcpStream::connect(dns).is_ok_and(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(2))).is_ok()
                && s.write_all(&tcp_dns_query(1, "dns.hostile.test")).is_ok()
                && answered(&mut s, 1)
        })
    });
    // Two clients hold the two connections; each pipelines two queries in one write and gets
    // both answers, in order. (A connection the server has not yet seen the probe above let
    // go of may be closed at accept: tried again.)
    let mut held: Vec<TcpStream> = Vec::new();
    for id in [10u16, 20] {
        wait_for(
            "a connection with pipelined answers",
            Duration::from_secs(10),
            || {
                let Ok(mut s) = TcpStream::connect(dns) else {
                    return false;
                };
                let mut two = tcp_dns_query(id, "dns.hostile.test");
                two.extend(tcp_dns_query(id + 1, "dns.hostile.test"));
                let ok = s.set_read_timeout(Some(Duration::from_secs(5))).is_ok()
                    && s.write_all(&two).is_ok()
                    && answered(&mut s, id)
                    && answered(&mut s, id + 1);
                if ok {
                    held.push(s);
                }
                ok
            },
        );
    }
    // A third is closed at accept, and counted.
    let mut third = TcpStream::connect(dns).expect("connect");
    let (_, got) = closed_within(&mut third, Duration::from_secs(2)).expect("closed at accept");
    assert!(got.is_empty());
    assert!(metric(admin, "meshlb_dns_tcp_refused_total") >= 1.0);
    // The held ones, silent, are closed at the idle timeout, which frees their places.
    for s in &mut held {
        assert!(
            closed_within(s, Duration::from_secs(10)).is_some(),
            "an idle DNS TCP connection was held"
        );
    }
    let out = Command::new("dig")
        .args(["+tcp", "+short", "+tries=1", "+time=3", "-p"])
        .arg(dns.port().to_string())
        .args(["@127.0.0.1", "dns.hostile.test", "A"])
        .output()
        .expect("dig");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "192.0.2.10");
}

#[test]
fn dns_answers_over_the_rate_slip_to_tcp_or_are_dropped() {
    let (_p, admin, dns) = dns_aggregator(
        "hostile-rrl",
        &two_endpoints("192.0.2.10", "192.0.2.11", "dns.hostile.test"),
        &[
            "--dns-sockets",
            "1",
            "--dns-rrl-rate",
            "5",
            // Every answer over the rate slips (the drop rhythm is in lb-core/dns/src/rrl.rs).
            "--dns-rrl-slip",
            "1",
        ],
    );
    // dig asks from 127.0.0.1: this socket shares its /24.
    let local = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    local
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    wait_for("the DNS server", Duration::from_secs(20), || {
        local
            .send_to(&dns_query(1, "dns.hostile.test"), dns)
            .is_ok()
            && local.recv(&mut [0u8; 512]).is_ok()
    });
    // 60 queries at once from another /24, whose bucket is still full (5 per second).
    let sock = std::net::UdpSocket::bind("127.0.1.1:0").expect("udp");
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    for id in 0..60u16 {
        sock.send_to(&dns_query(100 + id, "dns.hostile.test"), dns)
            .expect("send");
    }
    let (mut full, mut truncated) = (0, 0);
    let mut buf = [0u8; 512];
    while let Ok(n) = sock.recv(&mut buf) {
        let ancount = u16::from_be_bytes([buf[6], buf[7]]);
        if buf[2] & 0x02 != 0 {
            assert_eq!(ancount, 0, "a slipped answer is empty");
            truncated += 1;
        } else if n > 12 && ancount > 0 {
            full += 1;
        }
    }
    assert!((5..=7).contains(&full), "full answers: {full}");
    assert!((53..=55).contains(&truncated), "truncated: {truncated}");
    // Empty dig's /24's bucket, then a real resolver's query without DNS cookies (with one, it
    // would get BADCOOKIE and retry over UDP with the cookie: tests/dns/cookies.rs): dig gets
    // the truncated answer and retries over TCP, which is never limited. The bucket refills at 5 per second, so it is
    // kept empty until dig is done, however long dig takes to start: one query at a time from
    // this /24, each sent once the last one's (truncated) answer is back.
    let drain = |id: u16| {
        local
            .send_to(&dns_query(id, "dns.hostile.test"), dns)
            .expect("send");
        let _ = local.recv(&mut [0u8; 512]);
    };
    (200..210).for_each(drain);
    let mut dig = Command::new("dig")
        .args([&format!("@{}", dns.ip()), "-p", &dns.port().to_string()])
        .args([
            "+norec",
            "+nocookie",
            "+tries=1",
            "+time=2",
            "dns.hostile.test",
            "A",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("dig");
    // dig gives up after +time=2 and a TCP retry: bounded by a deadline and a count.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for id in (0..u16::MAX).cycle().take(1_000_000) {
        if dig.try_wait().expect("dig").is_some() || std::time::Instant::now() > deadline {
            break;
        }
        drain(id);
    }
    let out = dig.wait_with_output().expect("dig");
    let dig = String::from_utf8_lossy(&out.stdout);
    assert!(
        dig.contains("Truncated, retrying in TCP mode") && dig.contains("192.0.2.10"),
        "{dig}"
    );
    let text = scrape(admin);
    let slipped = text
        .lines()
        .find(|l| l.starts_with("meshlb_dns_rrl_total") && l.contains("action=\"slipped\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(slipped >= 53.0, "slipped {slipped}");
}

/// A proxied load balancer in front of `port` on 127.0.0.1, served by an aggregator with
/// `extra` proxy flags: (procs, admin, proxy address).
fn proxy_with(name: &str, port: u16, extra: &[&str]) -> (Procs, SocketAddr, SocketAddr) {
    let (scratch, key) = scratch_dir_with_key(name);
    let config = scratch.path().join("meshlb.toml");
    one_pool(("127.0.0.1", port), Lb::new("www.hostile.test").proxied()).write(&config);
    let (admin, proxy) = (free_tcp(), free_tcp());
    let mut args: Vec<String> = vec!["--proxy".into(), proxy.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let procs = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_healthz(admin);
    wait_for("the proxy", Duration::from_secs(20), || {
        TcpStream::connect(proxy).is_ok()
    });
    // The scratch directory lives as long as the test binary (the config is read at start).
    std::mem::forget(scratch);
    (procs, admin, proxy)
}

/// The value of the first series of `name` on the admin listener's /metrics (0 if none).
fn metric(admin: SocketAddr, name: &str) -> f64 {
    scrape(admin)
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Reads until the peer closes (or `within` passes); how long that took, `None` if still open.
fn closed_within(s: &mut TcpStream, within: Duration) -> Option<(Duration, Vec<u8>)> {
    s.set_read_timeout(Some(within)).expect("timeout");
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some((start.elapsed(), got)),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some((start.elapsed(), got))
            }
            Err(_) => return None,
        }
        if start.elapsed() > within {
            return None;
        }
    }
}

#[test]
fn a_request_body_that_dribbles_is_cut_at_the_body_timeout() {
    let origin = origin();
    let (_p, _admin, proxy) = proxy_with(
        "hostile-body",
        origin.port,
        &["--proxy-body-read-timeout-ms", "500"],
    );
    let mut held: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(proxy).expect("connect");
            s.write_all(
                b"POST / HTTP/1.1\r\nHost: www.hostile.test\r\nContent-Length: 65536\r\n\r\nx",
            )
            .expect("one byte of 64 KiB");
            s
        })
        .collect();
    for s in &mut held {
        let (took, answer) = closed_within(s, Duration::from_secs(15)).expect("cut, not held");
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
}

/// An origin that answers 16 MiB to every request and tells, per connection, whether it got
/// it all out when its connection ended.
fn big_origin() -> (u16, std::sync::mpsc::Receiver<bool>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (ended_tx, ended) = std::sync::mpsc::channel::<bool>();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let ended_tx = ended_tx.clone();
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let body = vec![b'x'; 16 << 20];
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                let done = conn
                    .write_all(head.as_bytes())
                    .and_then(|_| conn.write_all(&body))
                    .is_ok();
                let _ = ended_tx.send(done);
            });
        }
    });
    (port, ended)
}

#[test]
fn a_client_that_never_reads_frees_the_origin_at_the_send_timeout() {
    let (port, ended) = big_origin();
    let (_p, _admin, proxy) = proxy_with("hostile-send", port, &["--proxy-send-timeout-ms", "500"]);
    let mut client = TcpStream::connect(proxy).expect("connect");
    client
        .write_all(b"GET /big HTTP/1.1\r\nHost: www.hostile.test\r\n\r\n")
        .expect("request");
    // Never read: the proxy's writes stall, then it gives up and lets the origin go.
    let outcome = ended
        .recv_timeout(Duration::from_secs(20))
        .expect("the origin connection was released");
    assert!(
        !outcome,
        "the origin could not have sent 16 MiB to a client that reads nothing"
    );
    drop(client);
}

/// Reads HTTP/2 frames from `s` until `until(type, stream id)` holds (true) or `within`
/// passes or the connection ends (false).
fn h2_frame_seen(s: &mut TcpStream, within: Duration, until: impl Fn(u8, u32) -> bool) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let mut i = 0;
        while i + 9 <= buf.len() {
            let len =
                usize::from(buf[i]) << 16 | usize::from(buf[i + 1]) << 8 | usize::from(buf[i + 2]);
            let stream =
                u32::from_be_bytes([buf[i + 5], buf[i + 6], buf[i + 7], buf[i + 8]]) & 0x7fff_ffff;
            if until(buf[i + 3], stream) {
                return true;
            }
            i += 9 + len;
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("timeout");
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn an_http2_client_that_opens_no_window_frees_the_origin_at_the_send_timeout() {
    let (port, ended) = big_origin();
    // No PINGs: only the send timeout may free the origin.
    let (_p, admin, proxy) = proxy_with(
        "hostile-h2-send",
        port,
        &[
            "--proxy-send-timeout-ms",
            "500",
            "--proxy-h2-keepalive-ms",
            "0",
        ],
    );
    let mut s = TcpStream::connect(proxy).expect("connect");
    // The preface; SETTINGS with SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 0: the proxy may send
    // no DATA on any stream until this client opens a window (RFC 9113 section 6.9.2).
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .expect("preface");
    s.write_all(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00")
        .expect("settings");
    s.write_all(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
        .expect("settings ack");
    // HEADERS on stream 1 (END_STREAM | END_HEADERS), HPACK: GET, http, then :path and
    // :authority as literals with indexed names (RFC 7541 section 6.2.2).
    let mut block = vec![0x82, 0x86, 0x04, 4];
    block.extend_from_slice(b"/big");
    block.extend_from_slice(&[0x01, 16]);
    block.extend_from_slice(b"www.hostile.test");
    let mut headers = vec![0, 0, block.len() as u8, 0x01, 0x05, 0, 0, 0, 1];
    headers.extend_from_slice(&block);
    s.write_all(&headers).expect("headers");
    assert!(
        h2_frame_seen(&mut s, Duration::from_secs(10), |t, id| t == 1 && id == 1),
        "the answer's head came"
    );
    // The proxy holds the answer for a window that never opens, then lets the origin go.
    let outcome = ended
        .recv_timeout(Duration::from_secs(20))
        .expect("the origin connection was released");
    assert!(
        !outcome,
        "the origin could not have sent 16 MiB through a closed window"
    );
    assert!(metric(admin, "meshlb_proxy_send_timeouts_total") >= 1.0);
    // Opening the window now gets the stream reset (RST_STREAM, type 3), not the answer.
    s.write_all(b"\x00\x00\x04\x08\x00\x00\x00\x00\x01\x00\x00\xff\xff")
        .expect("window update");
    assert!(
        h2_frame_seen(&mut s, Duration::from_secs(10), |t, id| t == 3 && id == 1),
        "stream 1 was reset"
    );
}

#[test]
fn an_idle_http2_connection_is_closed_with_a_goaway() {
    let origin = origin();
    let (_p, _admin, proxy) = proxy_with(
        "hostile-h2",
        origin.port,
        &["--proxy-h2-idle-timeout-ms", "1000"],
    );
    let mut s = TcpStream::connect(proxy).expect("connect");
    // The preface and an empty SETTINGS frame, then the ACK of the server's SETTINGS.
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .expect("preface");
    s.write_all(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
        .expect("settings ack");
    let start = Instant::now();
    let (took, frames) = closed_within(&mut s, Duration::from_secs(15)).expect("closed, not held");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "closed before it was idle"
    );
    // Frames: 9-byte headers; a GOAWAY (type 7) among them.
    let mut i = 0;
    let mut goaway = false;
    while i + 9 <= frames.len() {
        let len = usize::from(frames[i]) << 16
            | usize::from(frames[i + 1]) << 8
            | usize::from(frames[i + 2]);
        goaway |= frames[i + 3] == 7;
        i += 9 + len;
    }
    assert!(goaway, "no GOAWAY in {frames:?}");
}

#[test]
fn connections_beyond_a_workers_limit_are_closed_and_counted() {
    let origin = origin();
    let (_p, admin, proxy) = proxy_with(
        "hostile-conns",
        origin.port,
        &[
            "--proxy-workers",
            "1",
            "--proxy-max-connections-per-worker",
            "10",
        ],
    );
    // 20 connections to a worker serving at most 10: 10 are closed at accept (11 if the
    // connection proxy_with probed with is still being let go), the rest are held.
    let mut opened: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(proxy).expect("connect"))
        .collect();
    let closed = opened
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(500)).is_some())
        .filter(|&c| c)
        .count();
    assert!((10..=11).contains(&closed), "closed at accept: {closed}");
    let refused = metric(admin, "meshlb_proxy_connections_refused_total");
    assert!(refused >= 10.0, "refused {refused}");
    let held = opened;
    // Freed slots serve again.
    drop(held);
    wait_for("a request served again", Duration::from_secs(10), || {
        let mut s = TcpStream::connect(proxy).expect("connect");
        s.write_all(b"GET / HTTP/1.1\r\nHost: www.hostile.test\r\nConnection: close\r\n\r\n")
            .is_ok()
            && closed_within(&mut s, Duration::from_secs(3))
                .is_some_and(|(_, a)| a.starts_with(b"HTTP/1.1 200"))
    });
}

/// Opens a tunnel (`Upgrade: echo`, which the test origin answers 101 and echoes) and
/// checks that it carries bytes both ways.
fn echo_tunnel(proxy: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(proxy).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /ws HTTP/1.1\r\nHost: www.hostile.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        .expect("upgrade");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("101 head");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s.write_all(b"ping").expect("write");
    let mut got = [0u8; 4];
    s.read_exact(&mut got).expect("echo");
    assert_eq!(&got, b"ping");
    s
}

#[test]
fn upgraded_connections_count_against_the_workers_limit() {
    let origin = named_origin("127.0.0.1", "a", Duration::ZERO);
    let (_p, _admin, proxy) = proxy_with(
        "hostile-tunnels",
        origin.port,
        &[
            "--proxy-workers",
            "1",
            "--proxy-max-connections-per-worker",
            "2",
        ],
    );
    // Two tunnels fill the worker (once the connection proxy_with probed with is let go)...
    let tunnels = vec![echo_tunnel(proxy), echo_tunnel(proxy)];
    // ...so a third connection is closed at accept, though the tunnels' HTTP is long done.
    wait_for(
        "a connection over the limit is closed",
        Duration::from_secs(10),
        || {
            let mut s = TcpStream::connect(proxy).expect("connect");
            closed_within(&mut s, Duration::from_millis(500)).is_some_and(|(_, got)| got.is_empty())
        },
    );
    // The tunnels still carry bytes; one ending frees its place.
    let mut tunnels = tunnels;
    for t in &mut tunnels {
        t.write_all(b"more").expect("write");
        let mut got = [0u8; 4];
        t.read_exact(&mut got).expect("echo");
        assert_eq!(&got, b"more");
    }
    drop(tunnels.pop());
    wait_for(
        "a tunnel's place is free again",
        Duration::from_secs(10),
        || {
            let mut s = TcpStream::connect(proxy).expect("connect");
            s.write_all(b"GET / HTTP/1.1\r\nHost: www.hostile.test\r\nConnection: close\r\n\r\n")
                .is_ok()
                && closed_within(&mut s, Duration::from_secs(3))
                    .is_some_and(|(_, a)| a.starts_with(b"HTTP/1.1 200"))
        },
    );
}

#[test]
fn an_http2_answer_that_outlasts_the_idle_timeout_is_not_cut() {
    // An origin that sends its 30-byte body over 3 s.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n");
                for _ in 0..30 {
                    std::thread::sleep(Duration::from_millis(100));
                    if conn.write_all(b"x").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (_p, _admin, proxy) = proxy_with(
        "hostile-h2-long",
        port,
        &["--proxy-h2-idle-timeout-ms", "500"],
    );
    let out = Command::new("curl")
        .args(["-s", "--http2-prior-knowledge", "--max-time", "20"])
        .args(["-H", "Host: www.hostile.test"])
        .arg(format!("http://{proxy}/slow"))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl: {:?}", out.status);
    assert_eq!(
        out.stdout,
        vec![b'x'; 30],
        "the whole body, though it took 3 s"
    );
}

#[test]
fn drains_forged_by_a_prober_or_stamped_in_the_future_change_nothing() {
    use mesh::keys::{encode_drains, DrainDecision, DRAINS};
    let (scratch, key) = scratch_dir_with_key("hostile-drains");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(
        &config,
        two_endpoints("192.0.2.1", "192.0.2.2", "www.hostile.test"),
    )
    .expect("config");
    let admin = free_tcp();
    let _p = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &admin_token_args(scratch.path()),
    )]);
    wait_healthz(admin);
    let mut seed = String::new();
    wait_for(
        "the aggregator in /members",
        Duration::from_secs(10),
        || {
            seed = get(admin, "/members")
                .and_then(|m| m[0]["address"].as_str().map(str::to_string))
                .unwrap_or_default();
            !seed.is_empty()
        },
    );
    let now_ms = lb_core::clock::unix_ms();
    let decision = |endpoint: &str, at_ms: u64| DrainDecision {
        pool: "web".into(),
        endpoint: endpoint.into(),
        draining: true,
        since: now_ms / 1000,
        at_ms,
    };
    let passphrase = std::fs::read_to_string(&key).expect("key");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _insiders = runtime.block_on(async {
        let mut nodes = Vec::new();
        // A prober drains a; a node claiming to be an aggregator drains b for ever.
        for (name, role, d) in [
            ("insider-prober", mesh::Role::Prober, decision("a", now_ms)),
            (
                "insider-aggregator",
                mesh::Role::Aggregator,
                decision("b", u64::MAX),
            ),
        ] {
            let node = mesh::start(
                &mesh::NodeIdentity {
                    node_id: name.into(),
                    role,
                    region: "WEU".into(),
                    datacenter: "fra".into(),
                    config_hash: String::new(),
                    config_loaded_at: 0,
                },
                &mesh::MeshSettings {
                    cluster_id: "meshlb".into(),
                    listen: free_udp(),
                    advertise: None,
                    aliases: Vec::new(),
                    send_format: mesh::SendFormat::Bound,
                    seeds: vec![seed.clone()],
                    gossip_interval: Duration::from_millis(100),
                    keys: mesh::KeyRing::new(passphrase.trim(), None).expect("key"),
                    dead_node_grace: Duration::from_secs(60),
                    max_datagram: None,
                },
            )
            .await
            .expect("insider");
            let value = encode_drains(&[d]);
            node.handle
                .with_chitchat(|c| c.self_node_state().set(DRAINS, &value))
                .await;
            nodes.push(node);
        }
        nodes
    });
    wait_for("both insiders live", Duration::from_secs(20), || {
        get(admin, "/members").is_some_and(|m| {
            m.as_array().is_some_and(|a| {
                a.iter()
                    .filter(|n| {
                        n["node_id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with("insider"))
                    })
                    .filter(|n| n["alive"] == true)
                    .count()
                    == 2
            })
        })
    });
    wait_for(
        "the future-stamped decision refused",
        Duration::from_secs(10),
        || {
            scrape(admin).lines().any(|l| {
                l.starts_with("meshlb_drain_decisions_refused_total") && !l.ends_with(" 0")
            })
        },
    );
    let drained = || {
        get(admin, "/drain")
            .and_then(|v| v.as_array().map(|a| a.len()))
            .unwrap_or(usize::MAX)
    };
    assert_eq!(drained(), 0, "neither forged drain is in force");
    // The operator still drains and undrains.
    let bearer = "Authorization: Bearer secret-token";
    assert_eq!(
        call(admin, "POST", "/drain?pool=web&endpoint=b", &[bearer]),
        200
    );
    assert_eq!(drained(), 1);
    assert_eq!(
        call(admin, "DELETE", "/drain?pool=web&endpoint=b", &[bearer]),
        200
    );
    assert_eq!(drained(), 0);
}
