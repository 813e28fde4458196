//! Serving a large document over a real connection (`serve.rs` behind `guard::serve_connection`,
//! as the admin and metrics listeners serve it): a follower that stops reading keeps its
//! serving slot — the bound means fetches in flight, not answers begun — until the listener's
//! send timeout cuts it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;

use super::serve::{respond, PATH};
use super::signing::{NODE_HEADER, TIME_HEADER};
use super::{ConfigRole, ControlKey, ControlPlane, DocumentSettings, Versioned};
use crate::guard::{serve_connection, Limits};

/// Larger than what loopback's socket buffers and hyper's write queue hold between a stalled
/// reader and the body (a few MiB), so a stalled fetch stays in flight.
const DOCUMENT_BYTES: usize = 24 << 20;

/// A primary serving one fetch at once, its document `DOCUMENT_BYTES` long, on a listener whose
/// writes wait at most `send_timeout` for the client; and word of each connection it has done
/// with (its body, and any slot, dropped).
async fn holder(
    send_timeout: Duration,
) -> (Arc<ControlPlane>, SocketAddr, mpsc::UnboundedReceiver<()>) {
    let text = format!("a = 1\n{}\n", "#".repeat(DOCUMENT_BYTES));
    let documents = DocumentSettings {
        serve_max: 1,
        ..DocumentSettings::default()
    };
    let key = ControlKey::new("a cluster key, long enough", None);
    let (plane, _) = ControlPlane::new(
        ConfigRole::Primary,
        Versioned::new(3, &text),
        key,
        64 << 20,
        documents,
    );
    let plane = Arc::new(plane);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let limits = Limits {
        head_timeout: Duration::from_secs(10),
        send_timeout,
        max_connections: 16,
    };
    let serving = Arc::clone(&plane);
    let (ended, ends) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let plane = Arc::clone(&serving);
            let ended = ended.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let r = respond(&plane, req.headers(), req.uri().query().unwrap_or(""));
                    async move { Ok::<_, Infallible>(r) }
                });
                serve_connection(tcp, None, limits, service).await;
                let _ = ended.send(());
            });
        }
    });
    (plane, addr, ends)
}

/// Sends a signed fetch of the whole document, uncompressed, on a connection whose receive
/// buffer is small; returns once the answer's status line has arrived, with the status.
async fn fetch(plane: &ControlPlane, addr: SocketAddr) -> (u16, TcpStream) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("buffer");
    let mut tcp = socket.connect(addr).await.expect("connect");
    let now = lb_core::clock::unix_secs();
    let request = format!(
        "GET {PATH} HTTP/1.1\r\nHost: holder\r\n{NODE_HEADER}: f\r\n{TIME_HEADER}: {now}\r\nAuthorization: {}\r\n\r\n",
        plane.key.sign_fetch("f", now)
    );
    tcp.write_all(request.as_bytes()).await.expect("request");
    let mut head = [0u8; 12];
    tcp.read_exact(&mut head).await.expect("status line");
    let status = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, tcp)
}

#[tokio::test]
async fn a_follower_that_stops_reading_keeps_its_serving_slot() {
    let (plane, addr, _) = holder(Duration::from_secs(60)).await;
    let (first, _stalled) = fetch(&plane, addr).await;
    assert_eq!(first, 200);
    let (second, _) = fetch(&plane, addr).await;
    assert_eq!(
        second, 503,
        "the first fetch's body is still being sent: its slot is held"
    );
}

#[tokio::test]
async fn a_follower_that_stops_reading_is_cut_at_the_send_timeout_and_frees_its_slot() {
    let (plane, addr, mut ended) = holder(Duration::from_millis(300)).await;
    let (first, mut stalled) = fetch(&plane, addr).await;
    assert_eq!(first, 200);
    // The timeout is 300 ms; 20 s is the test's patience, not the figure.
    let cut = tokio::time::timeout(Duration::from_secs(20), ended.recv()).await;
    assert!(
        matches!(cut, Ok(Some(()))),
        "the stalled fetch was never cut"
    );
    let (next, _) = fetch(&plane, addr).await;
    assert_eq!(next, 200, "the cut fetch's slot is free");
    // The stalled connection was closed before its document was all sent.
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = stalled.read(&mut buf).await {
        if n == 0 {
            break;
        }
        received += n;
    }
    assert!(received < DOCUMENT_BYTES, "received {received} bytes");
}
