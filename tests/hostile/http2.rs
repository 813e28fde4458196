//! HTTP/2 connections that hold the proxy: part of the preface costs next to nothing, an idle
//! connection is closed with a GOAWAY, and an answer that outlasts the idle timeout is not cut.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::*;

use super::world::{closed_port_config, closed_within, proxy_with, wait_healthz};

/// CPU seconds (user + system) the process has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    ticks / 100.0 // USER_HZ is 100 on Linux
}

pub fn connections_that_send_part_of_the_http2_preface_cost_next_to_nothing() {
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

pub fn an_idle_http2_connection_is_closed_with_a_goaway() {
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

pub fn an_http2_answer_that_outlasts_the_idle_timeout_is_not_cut() {
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
