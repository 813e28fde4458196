//! What a proxy worker holds is bounded: connections beyond a worker's limit (upgraded tunnels
//! included) closed at accept and counted, and invented header sessions evicted and counted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use test_support::config::Lb;
use test_support::*;

use super::world::{closed_within, metric, one_pool, proxy_with, wait_healthz};

/// One keep-alive connection sending `n` requests, each with its own invented session id;
/// returns how many were answered 200.
pub fn invented_sessions(proxy: SocketAddr, host: &str, n: usize) -> usize {
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

pub fn invented_header_sessions_are_bounded_and_counted() {
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

pub fn connections_beyond_a_workers_limit_are_closed_and_counted() {
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
pub fn echo_tunnel(proxy: SocketAddr) -> TcpStream {
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

pub fn upgraded_connections_count_against_the_workers_limit() {
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
