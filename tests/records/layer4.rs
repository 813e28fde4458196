//! The layer-4 log: a record per TCP connection and per UDP flow.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use test_support::wait_for;

use super::world::World;

/// The layer-4 record whose client port is `port`, once written.
fn record_from(path: &Path, protocol: &str, port: u16) -> Value {
    let mut found = None;
    wait_for("the layer-4 record", Duration::from_secs(10), || {
        found = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["client_port"] == port && r["protocol"] == protocol);
        found.is_some()
    });
    found.expect("found")
}

pub fn a_tcp_connection_leaves_one_record_with_its_bytes_and_close(w: &mut World) {
    let mut s = None;
    wait_for("the layer-4 TCP port", Duration::from_secs(10), || {
        s = TcpStream::connect(("127.0.0.1", w.tcp_port)).ok();
        s.is_some()
    });
    let mut s = s.expect("connected");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let port = s.local_addr().expect("addr").port();
    s.write_all(b"hello, origin").expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("half-close");
    let mut back = Vec::new();
    s.read_to_end(&mut back).expect("read");
    assert_eq!(back, b"hello, origin");
    drop(s);
    let r = record_from(&w.l4_log, "tcp", port);
    assert_eq!(r["load_balancer"], "tcp.example.test", "{r}");
    assert_eq!(
        (&r["pool"], &r["endpoint"]),
        (&"tcp".into(), &"echo".into()),
        "{r}"
    );
    assert_eq!(
        (&r["bytes_in"], &r["bytes_out"]),
        (&13.into(), &13.into()),
        "{r}"
    );
    assert_eq!(r["close_reason"], "done", "{r}");
    assert_eq!(r["listen_port"], w.tcp_port, "{r}");
    assert!(r["duration_ms"].as_f64().is_some(), "{r}");
}

pub fn a_udp_flow_leaves_one_record_when_it_idles_out(w: &mut World) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let port = socket.local_addr().expect("addr").port();
    let mut buf = [0u8; 64];
    // The port may not be bound yet on a fresh world: send until the echo comes back.
    wait_for("the layer-4 UDP echo", Duration::from_secs(10), || {
        socket.send_to(b"ping", ("127.0.0.1", w.udp_port)).is_ok()
            && socket
                .recv_from(&mut buf)
                .is_ok_and(|(n, _)| &buf[..n] == b"ping")
    });
    // The flow idles out (300 ms) and is recorded with what went each way.
    let r = record_from(&w.l4_log, "udp", port);
    assert_eq!(r["close_reason"], "idle_timeout", "{r}");
    assert_eq!(r["load_balancer"], "udp.example.test", "{r}");
    let (sent, echoed) = (r["datagrams_in"].as_u64(), r["datagrams_out"].as_u64());
    assert!(
        sent.is_some_and(|n| n >= 1) && echoed.is_some_and(|n| n >= 1),
        "{r}"
    );
    assert_eq!(r["bytes_in"].as_u64(), sent.map(|n| 4 * n), "{r}");
    assert!(r["last_datagram_ms"].as_f64().is_some(), "{r}");
}
