//! Clients that hold an origin by being slow: a request body that dribbles is cut at the body
//! timeout; a client that never reads (HTTP/1) or opens no flow-control window (HTTP/2) frees
//! the origin at the send timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use test_support::*;

use super::world::{closed_within, metric, proxy_with};

pub fn a_request_body_that_dribbles_is_cut_at_the_body_timeout() {
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
pub fn big_origin() -> (u16, std::sync::mpsc::Receiver<bool>) {
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

pub fn a_client_that_never_reads_frees_the_origin_at_the_send_timeout() {
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

/// The HTTP/2 frames a connection has sent, read as they come and kept between looks: a frame
/// is looked at once it is whole, and what follows the one a look stopped at is left for the
/// next look.
#[derive(Default)]
struct H2Frames {
    buf: Vec<u8>,
}

impl H2Frames {
    /// Reads frames from `s` until `until(type, stream id)` holds for one (true) or `within`
    /// passes or the connection ends (false).
    fn seen(
        &mut self,
        s: &mut TcpStream,
        within: Duration,
        until: impl Fn(u8, u32) -> bool,
    ) -> bool {
        let deadline = Instant::now() + within;
        let mut chunk = [0u8; 16384];
        loop {
            while self.buf.len() >= 9 {
                let b = &self.buf;
                let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
                if b.len() < 9 + len {
                    break;
                }
                let kind = b[3];
                let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
                self.buf.drain(..9 + len);
                if until(kind, stream) {
                    return true;
                }
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("timeout");
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return false,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

pub fn an_http2_client_that_opens_no_window_frees_the_origin_at_the_send_timeout() {
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
    let mut frames = H2Frames::default();
    assert!(
        frames.seen(&mut s, Duration::from_secs(10), |t, id| t == 1 && id == 1),
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
    // The proxy counts the cut before it drops the body
    // (lb-core/proxy/src/client/in_flight.rs), so the count is there once the origin sees its
    // connection end; the wait only bounds the check.
    wait_for("the send timeout counted", Duration::from_secs(10), || {
        metric(admin, "meshlb_proxy_send_timeouts_total") >= 1.0
    });
    // Opening the window now gets the stream reset (RST_STREAM, type 3), not the answer.
    s.write_all(b"\x00\x00\x04\x08\x00\x00\x00\x00\x01\x00\x00\xff\xff")
        .expect("window update");
    assert!(
        frames.seen(&mut s, Duration::from_secs(10), |t, id| t == 3 && id == 1),
        "stream 1 was reset"
    );
}
