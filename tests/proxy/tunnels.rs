//! Protocol upgrades through the proxy (a raw upgrade, a real WebSocket), TLS termination with
//! SNI, and HTTP/2 over TLS and in clear.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use super::world::{World, TLS_NAMES};
use crate::curl;

/// A protocol upgrade (the WebSocket mechanism, any protocol) is tunnelled both ways.
pub fn a_protocol_upgrade_is_tunnelled_both_ways(w: &mut World) {
    w.wait_steady();
    let mut s = TcpStream::connect(w.proxy).expect("proxy");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        s,
        "GET /ws HTTP/1.1\r\nHost: weighted.example.test\r\nConnection: Upgrade\r\n\
         Upgrade: echo\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).expect("101 head");
        head.push(byte[0]);
    }
    assert!(
        String::from_utf8_lossy(&head).starts_with("HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    for msg in ["hello through the tunnel", "and back again"] {
        s.write_all(msg.as_bytes()).unwrap();
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got).expect("echo");
        assert_eq!(String::from_utf8_lossy(&got), msg);
    }
}

/// A real WebSocket (tungstenite on both ends): the handshake, text, a binary message larger
/// than a read buffer, ping and pong, and the closing handshake, through the proxy.
pub fn a_websocket_session_runs_through_the_proxy(w: &mut World) {
    w.wait_steady();
    let stream = TcpStream::connect(w.proxy).expect("proxy");
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let (mut ws, response) = tungstenite::client("ws://weighted.example.test/ws", stream)
        .expect("WebSocket handshake through the proxy");
    assert_eq!(response.status(), 101);
    ws.send(tungstenite::Message::text("hello, websocket"))
        .expect("send text");
    assert_eq!(
        ws.read().expect("echo"),
        tungstenite::Message::text("hello, websocket")
    );
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    ws.send(tungstenite::Message::binary(big.clone()))
        .expect("send binary");
    assert_eq!(ws.read().expect("echo"), tungstenite::Message::binary(big));
    ws.send(tungstenite::Message::Ping("are you there".into()))
        .expect("ping");
    assert_eq!(
        ws.read().expect("pong"),
        tungstenite::Message::Pong("are you there".into())
    );
    ws.close(None).expect("close");
    loop {
        match ws.read() {
            Ok(m) => assert!(m.is_close(), "{m:?}"),
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(e) => panic!("the closing handshake failed: {e}"),
        }
    }
}

/// curl over TLS to the proxy's TLS listener for `name`, trusting only `cert`.
fn curl_tls(w: &World, name: &str, cert: &std::path::Path, extra: &[&str]) -> crate::Reply {
    let port = w.proxy_tls.port();
    let resolve = format!("{name}:{port}:127.0.0.1");
    let trust = ["--cacert", cert.to_str().unwrap(), "--resolve", &resolve];
    let args = [extra, &trust[..]].concat();
    curl(&format!("https://{name}:{port}/"), name, &args)
}

/// Each name gets the certificate valid for it (curl trusts only that one), and the origin
/// sees X-Forwarded-Proto `https`.
pub fn tls_termination_picks_the_certificate_by_sni(w: &mut World) {
    w.wait_steady();
    for (name, (cert, _)) in TLS_NAMES.iter().zip(&w.certs) {
        let r = curl_tls(w, name, cert, &[]);
        assert_eq!(r.status, 200, "{name}: {r:?}");
        assert!(r.body.contains("proto=https"), "{r:?}");
    }
}

pub fn http2_over_tls_is_served(w: &mut World) {
    w.wait_steady();
    let r = curl_tls(w, TLS_NAMES[0], &w.certs[0].0, &["--http2"]);
    assert_eq!(r.status, 200, "{r:?}");
}

/// HTTP/2 in clear with prior knowledge (h2c) on the plain listener.
pub fn http2_in_clear_with_prior_knowledge_is_served(w: &mut World) {
    w.wait_steady();
    let h2c = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "10"])
        .args([
            "--http2-prior-knowledge",
            "-w",
            "%{http_version} %{http_code}",
        ])
        .args(["-H", "Host: weighted.example.test"])
        .arg(&w.url)
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&h2c.stdout), "2 200");
}
