//! Helpers shared by the end-to-end tests: child processes that die with the test, free
//! loopback ports, HTTP origins that can be stopped, the admin API, bounded waits.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills its processes when dropped, so a failed test leaves nothing behind.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("udp port")
}

pub fn free_tcp() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("tcp port")
}

/// A minimal HTTP origin on `ip` that answers 200 until `up` is cleared, then refuses
/// connections.
pub fn origin_on(ip: &str, up: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind((ip, 0)).expect("origin");
    let port = listener.local_addr().expect("addr").port();
    let ip: std::net::IpAddr = ip.parse().expect("ip");
    std::thread::spawn(move || {
        let mut listener = Some(listener);
        loop {
            if !up.load(Ordering::SeqCst) {
                listener = None; // closed: connections are refused
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let l = listener.get_or_insert_with(|| TcpListener::bind((ip, port)).expect("rebind"));
            l.set_nonblocking(true).ok();
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).ok();
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    port
}

/// An origin on 127.0.0.1.
pub fn origin(up: Arc<AtomicBool>) -> u16 {
    origin_on("127.0.0.1", up)
}

pub fn get(admin: SocketAddr, path: &str) -> Option<Value> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer secret-token\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let json = body.split_once("\r\n\r\n")?.1;
    serde_json::from_str(json).ok()
}

pub fn wait_for(what: &str, within: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < within {
        if ok() {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out after {within:?} waiting for {what}");
}
