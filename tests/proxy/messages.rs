//! What the proxy answers itself (530, 404, 431), and what it carries between client and
//! origin: large bodies both ways, trailers both ways, the forwarding headers, a Host override.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::world::World;
use crate::curl;

/// 530 with a body naming the load balancer when no pool can serve and there is no fallback.
pub fn a_load_balancer_with_nothing_to_serve_answers_530_naming_itself(w: &mut World) {
    let r = curl(&w.url, "dead.example.test", &[]);
    assert_eq!(r.status, 530);
    assert!(r.body.contains("dead.example.test"), "{r:?}");
}

pub fn an_unknown_host_answers_404(w: &mut World) {
    assert_eq!(curl(&w.url, "nobody.example.test", &[]).status, 404);
}

/// A request head beyond the 64 KiB bound is refused, not buffered without end.
pub fn a_request_head_over_64_kib_is_refused_with_431(w: &mut World) {
    let big = "x".repeat(80 << 10);
    let r = curl(
        &w.url,
        "sticky.example.test",
        &["-H", &format!("X-Big: {big}")],
    );
    assert_eq!(r.status, 431, "{:?}", r.status);
}

pub fn a_1_mib_chunked_answer_streams_to_the_client_intact(w: &mut World) {
    w.wait_steady();
    let r = curl(&format!("{}big", w.url), "weighted.example.test", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.body.bytes().all(|b| b == b'x'), "the body arrived intact");
}

/// An upload of 300 000 bytes (beyond the 64 KiB replay buffer), sent with `extra` curl
/// arguments: the origin received all of it.
fn upload_arrives_whole(w: &World, extra: &[&str]) {
    w.wait_steady();
    let upload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let file = w.dir.join(format!("upload-{}.bin", extra.len()));
    std::fs::write(&file, &upload).expect("upload file");
    let sum: u64 = upload.iter().map(|&b| u64::from(b)).sum();
    let data = format!("@{}", file.display());
    let args = [&["--data-binary", data.as_str()][..], extra].concat();
    let r = curl(&format!("{}upload", w.url), "weighted.example.test", &args);
    assert_eq!(r.status, 200, "{args:?}: {r:?}");
    assert!(
        r.body.contains(&format!("received=300000\nsum={sum}\n")),
        "{args:?}: {r:?}"
    );
}

pub fn an_upload_beyond_the_replay_buffer_reaches_the_origin_whole(w: &mut World) {
    upload_arrives_whole(w, &[]);
}

pub fn a_chunked_upload_beyond_the_replay_buffer_reaches_the_origin_whole(w: &mut World) {
    upload_arrives_whole(w, &["-H", "Transfer-Encoding: chunked"]);
}

/// `request` on its own connection to the proxy; everything it answered.
fn exchange(w: &World, request: &[u8]) -> String {
    let mut s = TcpStream::connect(w.proxy).expect("proxy");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    s.write_all(request).expect("send the request");
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer
}

/// The trailers of a chunked upload reach the origin; those that frame or route do not.
pub fn an_uploads_trailers_reach_the_origin_but_not_framing_ones(w: &mut World) {
    w.wait_steady();
    let answer = exchange(
        w,
        b"POST /upload HTTP/1.1\r\nHost: weighted.example.test\r\nConnection: close\r\n\
          Transfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n\
          5\r\nhello\r\n0\r\nX-Checksum: sha256=2cf2\r\nContent-Length: 7\r\n\r\n",
    );
    assert!(
        answer.contains("received=5\n") && answer.contains("trailers=x-checksum: sha256=2cf2\n"),
        "{answer}"
    );
}

/// An origin's announced trailers reach an HTTP/1.1 client that accepts them, after the last
/// chunk.
pub fn an_origins_trailers_reach_an_http1_client_that_accepts_them(w: &mut World) {
    w.wait_steady();
    let answer = exchange(
        w,
        b"GET /trailers HTTP/1.1\r\nHost: weighted.example.test\r\nTE: trailers\r\n\
          Connection: close, TE\r\n\r\n",
    );
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\ntrailer: x-checksum\r\n")
            && answer.ends_with("\r\n0\r\nx-checksum: sha256=2cf2\r\n\r\n"),
        "{answer}"
    );
}

/// An HTTP/2 client gets them as a trailing HEADERS frame (curl -i prints them after the
/// body).
pub fn an_origins_trailers_reach_an_http2_client(w: &mut World) {
    w.wait_steady();
    let r = curl(
        &format!("{}trailers", w.url),
        "weighted.example.test",
        &["--http2-prior-knowledge"],
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.body.starts_with("hello") && r.body.contains("x-checksum: sha256=2cf2"),
        "{r:?}"
    );
}

/// Every endpoint sees the client's X-Forwarded-For with the client's address appended, and
/// X-Forwarded-Proto `http`.
pub fn x_forwarded_for_and_proto_reach_the_origin(w: &mut World) {
    w.wait_steady();
    for _ in 0..20 {
        let r = curl(
            &w.url,
            "sticky.example.test",
            &["-H", "X-Forwarded-For: 192.0.2.9"],
        );
        assert!(r.body.contains("xff=192.0.2.9, 127.0.0.1"), "{r:?}");
        assert!(r.body.contains("proto=http"), "{r:?}");
    }
}

/// h2 has a `Host` override: it sees `override.example`; the others see the client's Host.
pub fn an_endpoints_host_override_replaces_the_clients_host(w: &mut World) {
    w.wait_steady();
    let mut seen_override = false;
    for _ in 0..40 {
        let r = curl(&w.url, "sticky.example.test", &[]);
        if r.origin() == "h2" {
            assert!(r.body.contains("host=override.example"), "{r:?}");
            seen_override = true;
        } else {
            assert!(r.body.contains("host=sticky.example.test"), "{r:?}");
        }
    }
    assert!(seen_override, "h2 was never chosen in 40 requests");
}

/// TE is hop-by-hop: a client that does not ask for trailers gets none asked for on the
/// proxy's hop either.
pub fn no_te_goes_to_the_origin_when_the_client_takes_no_trailers(w: &mut World) {
    w.wait_steady();
    for _ in 0..10 {
        let r = curl(&w.url, "sticky.example.test", &[]);
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body.contains("\nte=\n"), "{r:?}");
    }
}

/// A client that takes trailers (TE: trailers over HTTP/1.1, or HTTP/2): the proxy asks the
/// origin for them on its own hop.
pub fn the_proxy_asks_for_trailers_when_the_client_takes_them(w: &mut World) {
    let r = curl(&w.url, "sticky.example.test", &["-H", "TE: trailers"]);
    assert!(r.body.contains("\nte=trailers\n"), "{r:?}");
    let r = curl(&w.url, "sticky.example.test", &["--http2-prior-knowledge"]);
    assert!(r.body.contains("\nte=trailers\n"), "{r:?}");
}

/// `Transfer-Encoding` with `chunked` twice, or not last, is refused with 400 and the
/// connection closed (RFC 9112 section 6.1): two readers could frame the body differently.
pub fn a_doubled_or_misplaced_chunked_coding_is_refused_with_400(w: &mut World) {
    for coding in ["chunked, chunked", "chunked, gzip"] {
        let text = exchange(
            w,
            format!(
                "POST /upload HTTP/1.1\r\nHost: sticky.example.test\r\nTransfer-Encoding: {coding}\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: sticky.example.test\r\n\r\n"
            )
            .as_bytes(),
        );
        assert!(text.starts_with("HTTP/1.1 400"), "{coding}: {text}");
        assert_eq!(
            text.matches("HTTP/1.1 ").count(),
            1,
            "{coding}: nothing after the refusal is read as a request: {text}"
        );
    }
}

/// An `Upgrade: h2c` request is answered over HTTP/1.1 and reaches the origin without its
/// `Upgrade` and `HTTP2-Settings` (no HTTP/2 tunnel past the proxy).
pub fn an_h2c_upgrade_is_served_as_http1_without_its_upgrade_fields(w: &mut World) {
    w.wait_steady();
    let text = exchange(
        w,
        b"GET / HTTP/1.1\r\nHost: sticky.example.test\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.contains("\nupgrade=\n"),
        "the origin got no Upgrade: {text}"
    );
    assert!(
        text.contains("\nhttp2_settings=\n"),
        "nor HTTP2-Settings: {text}"
    );
}
