//! HTTP/1.1 towards origins against scripted origins on loopback: how requests are framed
//! and what each kind of response (lengths, chunked with extensions and trailers, interim
//! 1xx, HEAD/204/304, until-close) does to the body and to the connection's reuse.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::origin::head::OriginHead;
use crate::origin::pool::{Origin, Reply, Upstream, UpstreamError};

/// What a scripted origin does with the `n`th request on its `c`th connection: answer these
/// bytes, or close without answering.
type Script = fn(c: usize, n: usize, request: &[u8]) -> Option<Vec<u8>>;

/// Requests the origin read, raw, with the connection they came on.
type Seen = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// Reads one request (head, then a Content-Length or chunked body) from `s`.
async fn read_request(s: &mut tokio::net::TcpStream, have: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&have[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let chunked = head.contains("transfer-encoding: chunked");
            let complete = match (length, chunked) {
                // The last chunk, then its trailer section up to the empty line.
                (_, true) => {
                    let body = &have[end + 4..];
                    let last = if body.starts_with(b"0\r\n") {
                        Some(0)
                    } else {
                        body.windows(5)
                            .position(|w| w == b"\r\n0\r\n")
                            .map(|p| p + 2)
                    };
                    last.and_then(|z| {
                        body[z + 1..]
                            .windows(4)
                            .position(|w| w == b"\r\n\r\n")
                            .map(|p| end + 4 + z + 1 + p + 4)
                    })
                }
                (Some(n), false) => (have.len() >= end + 4 + n).then_some(end + 4 + n),
                (None, false) => Some(end + 4),
            };
            if let Some(total) = complete {
                return Some(have.drain(..total).collect());
            }
        }
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => have.extend_from_slice(&buf[..n]),
        }
    }
}

async fn scripted(script: Script) -> (SocketAddr, Seen) {
    scripted_origin(script, false).await
}

/// A scripted origin that closes each connection after its first answer.
async fn scripted_closing(script: Script) -> (SocketAddr, Seen) {
    scripted_origin(script, true).await
}

async fn scripted_origin(script: Script, close_after_answer: bool) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut c = 0;
        while let Ok((mut s, _)) = listener.accept().await {
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                let mut have = Vec::new();
                let mut n = 0;
                while let Some(req) = read_request(&mut s, &mut have).await {
                    if let Ok(mut r) = record.lock() {
                        r.push((c, req.clone()));
                    }
                    match script(c, n, &req) {
                        Some(answer) => {
                            if s.write_all(&answer).await.is_err() || close_after_answer {
                                return;
                            }
                        }
                        None => return,
                    }
                    n += 1;
                }
            });
            c += 1;
        }
    });
    (addr, seen)
}

fn pool() -> Arc<Upstream> {
    pool_reading_within(Duration::from_secs(10))
}

/// A pool whose streamed bodies give up after `read_timeout` of the origin's silence.
fn pool_reading_within(read_timeout: Duration) -> Arc<Upstream> {
    Upstream::new(
        Duration::from_secs(2),
        Duration::from_secs(90),
        read_timeout,
        None,
    )
}

fn host_only() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::HOST, HeaderValue::from_static("origin.test"));
    h
}

async fn send(
    up: &Arc<Upstream>,
    addr: SocketAddr,
    method: Method,
    headers: &HeaderMap,
    body: ProxyBody,
    buffer_up_to: u64,
) -> Result<(OriginHead, Reply), UpstreamError> {
    let authority = addr.to_string();
    let origin = Origin {
        authority: &authority,
        tls: None,
        opened: None,
        private: None,
    };
    let head = RequestHead {
        method: &method,
        target: "/path?q=1",
        headers,
        forwarded: None,
        host: None,
        trailers: false,
    };
    up.send(origin, &head, body, buffer_up_to).await
}

async fn text(reply: Reply) -> String {
    let bytes = match reply {
        Reply::Whole(b) => b,
        Reply::Streamed(s) => s.collect().await.expect("body").to_bytes(),
        Reply::Upgraded(..) => panic!("an upgrade"),
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `GET /path?q=1` that must get an answer.
async fn get(up: &Arc<Upstream>, addr: SocketAddr, buffer_up_to: u64) -> (OriginHead, Reply) {
    send(
        up,
        addr,
        Method::GET,
        &host_only(),
        ProxyBody::Empty,
        buffer_up_to,
    )
    .await
    .expect("an answer")
}

/// A hyper server in front of `origin` for one connection, handing its client's request
/// body on as it comes, as the proxy does (`POST`, short answers only).
async fn front(origin: SocketAddr) -> SocketAddr {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let front = listener.local_addr().expect("addr");
    let up = pool();
    tokio::spawn(async move {
        let Ok((s, _)) = listener.accept().await else {
            return;
        };
        let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let up = Arc::clone(&up);
            async move {
                let body = ProxyBody::Stream(req.into_body());
                let (resp, reply) = send(&up, origin, Method::POST, &host_only(), body, 1024)
                    .await
                    .expect("forwarded");
                let Reply::Whole(b) = reply else {
                    panic!("a short answer");
                };
                let mut answer = http::Response::new(ProxyBody::bytes(b));
                *answer.status_mut() = resp.status;
                *answer.headers_mut() = resp.fields.to_map();
                Ok::<_, std::convert::Infallible>(answer)
            }
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(s), service)
            .await;
    });
    front
}

/// Reads from `from` until what came ends with `ending`, each read within `within`.
async fn read_until_ending<R: tokio::io::AsyncRead + Unpin>(
    from: &mut R,
    ending: &[u8],
    within: Duration,
) -> Vec<u8> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(ending) {
        let n = tokio::time::timeout(within, from.read(&mut buf))
            .await
            .expect("the answer came in time")
            .expect("read");
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    answer
}

fn connections(seen: &Seen) -> Vec<usize> {
    seen.lock().expect("seen").iter().map(|(c, _)| *c).collect()
}

#[tokio::test]
async fn chunked_bodies_are_decoded_and_their_connection_reused() {
    let (addr, seen) = scripted(|_, _, _| {
        Some(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
                .to_vec(),
        )
    })
    .await;
    let up = pool();
    for _ in 0..2 {
        let (resp, reply) = get(&up, addr, 1 << 20).await;
        assert_eq!(resp.status, StatusCode::OK);
        let Reply::Streamed(body) = reply else {
            panic!("a chunked body streams");
        };
        let whole = body.collect().await.expect("body");
        let trailers = whole.trailers().cloned().expect("the trailer fields");
        assert_eq!(
            trailers.get("x-trailer").map(|v| v.as_bytes()),
            Some(&b"t"[..])
        );
        assert_eq!(whole.to_bytes(), "hello, world");
    }
    assert_eq!(connections(&seen), vec![0, 0], "one connection for both");
}

#[tokio::test]
async fn long_bodies_stream_and_short_ones_come_whole() {
    let (addr, seen) = scripted(|_, _, _| {
        let body = "x".repeat(100_000);
        Some(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
        )
    })
    .await;
    let up = pool();
    let (resp, reply) = get(&up, addr, 16 << 10).await;
    // Noted, not among the fields: the client's hop announces the length.
    assert_eq!(resp.fields.get("content-length"), None);
    assert_eq!(resp.fields.length(), Some(100_000));
    let Reply::Streamed(body) = reply else {
        panic!("a long body streams");
    };
    assert_eq!(body.size_hint().exact(), Some(100_000));
    assert_eq!(
        body.collect().await.expect("body").to_bytes().len(),
        100_000
    );
    let (_, reply) = get(&up, addr, 1 << 20).await;
    assert!(matches!(&reply, Reply::Whole(b) if b.len() == 100_000));
    assert_eq!(connections(&seen), vec![0, 0]);
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let (addr, _) = scripted(|_, _, _| {
        Some(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
              HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
                .to_vec(),
        )
    })
    .await;
    let (resp, reply) = send(
        &pool(),
        addr,
        Method::POST,
        &host_only(),
        ProxyBody::bytes("x"),
        1024,
    )
    .await
    .expect("sent");
    assert_eq!(resp.status, StatusCode::CREATED);
    assert_eq!(text(reply).await, "ok");
}

#[tokio::test]
async fn head_204_and_304_have_no_body_whatever_their_length_says() {
    let (addr, seen) = scripted(|_, n, _| {
        Some(match n {
            0 => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec(),
            1 => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
            2 => b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n".to_vec(),
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlast".to_vec(),
        })
    })
    .await;
    let up = pool();
    for method in [Method::HEAD, Method::GET, Method::GET] {
        let (_, reply) = send(&up, addr, method, &host_only(), ProxyBody::Empty, 1024)
            .await
            .expect("sent");
        assert_eq!(text(reply).await, "");
    }
    let (_, reply) = get(&up, addr, 1024).await;
    assert_eq!(text(reply).await, "last");
    assert_eq!(
        connections(&seen),
        vec![0, 0, 0, 0],
        "all on one connection"
    );
}

#[tokio::test]
async fn a_body_until_close_is_read_to_its_end_and_its_connection_not_reused() {
    // HTTP/1.0 without a length: the body ends with the connection.
    let (addr, seen) =
        scripted_closing(|_, _, _| Some(b"HTTP/1.0 200 OK\r\n\r\nall of it".to_vec())).await;
    let up = pool();
    for _ in 0..2 {
        let (_, reply) = get(&up, addr, 1024).await;
        assert!(matches!(reply, Reply::Streamed(_)));
        assert_eq!(text(reply).await, "all of it");
    }
    assert_eq!(connections(&seen), vec![0, 1], "a connection each");
}

#[tokio::test]
async fn conflicting_lengths_and_garbage_are_exchange_failures() {
    let (addr, seen) = scripted(|c, _, _| {
        Some(match c {
            0 => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok".to_vec(),
            1 => b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok".to_vec(),
            _ => b"SSH-2.0-OpenSSH\r\n\r\n".to_vec(),
        })
    })
    .await;
    let up = pool();
    for _ in 0..3 {
        let e = send(&up, addr, Method::GET, &host_only(), ProxyBody::Empty, 1024).await;
        assert_eq!(e.err(), Some(UpstreamError::Exchange));
    }
    assert_eq!(connections(&seen), vec![0, 1, 2], "none of them reused");
}

#[tokio::test]
async fn requests_are_framed_by_this_hop() {
    let (addr, seen) =
        scripted(|_, _, _| Some(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec())).await;
    let up = pool();
    // The client's framing headers do not pass: a body in hand goes with its own length.
    let mut headers = host_only();
    headers.insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("99"));
    headers.append("x-twice", HeaderValue::from_static("1"));
    headers.append("x-twice", HeaderValue::from_static("2"));
    send(
        &up,
        addr,
        Method::PUT,
        &headers,
        ProxyBody::bytes("body"),
        1024,
    )
    .await
    .expect("put");
    // An empty POST says so; a GET without a body carries no length.
    send(
        &up,
        addr,
        Method::POST,
        &host_only(),
        ProxyBody::Empty,
        1024,
    )
    .await
    .expect("post");
    get(&up, addr, 1024).await;
    // The endpoint's Host override replaces the client's Host.
    let over = HeaderValue::from_static("override.test");
    let authority = addr.to_string();
    let head = RequestHead {
        method: &Method::GET,
        target: "/",
        headers: &host_only(),
        forwarded: None,
        host: Some(&over),
        trailers: true,
    };
    let origin = Origin {
        authority: &authority,
        tls: None,
        opened: None,
        private: None,
    };
    up.send(origin, &head, ProxyBody::Empty, 1024)
        .await
        .expect("override");
    let seen: Vec<String> = seen
        .lock()
        .expect("seen")
        .iter()
        .map(|(_, r)| String::from_utf8_lossy(r).into_owned())
        .collect();
    assert_eq!(
        seen[0],
        "PUT /path?q=1 HTTP/1.1\r\nhost: origin.test\r\nx-twice: 1\r\nx-twice: 2\r\n\
         content-length: 4\r\n\r\nbody"
    );
    assert_eq!(
        seen[1],
        "POST /path?q=1 HTTP/1.1\r\nhost: origin.test\r\ncontent-length: 0\r\n\r\n"
    );
    assert_eq!(
        seen[2],
        "GET /path?q=1 HTTP/1.1\r\nhost: origin.test\r\n\r\n"
    );
    // A client that takes trailers: the origin is asked for them, TE listed in Connection.
    assert_eq!(
        seen[3],
        "GET / HTTP/1.1\r\nhost: override.test\r\nte: trailers\r\nconnection: te\r\n\r\n"
    );
}

#[tokio::test]
async fn a_request_the_origin_drops_on_a_reused_connection_is_resent_when_idempotent() {
    // Every connection answers its first request and closes on its second unanswered, as an
    // origin does whose keep-alive timeout fires as the request arrives.
    let (addr, seen) = scripted(|_, n, _| {
        (n == 0).then(|| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec())
    })
    .await;
    let up = pool();
    let (_, reply) = get(&up, addr, 1024).await;
    assert_eq!(text(reply).await, "ok");
    // GET again: lost on the idle connection, sent again on a new one.
    let (_, reply) = get(&up, addr, 1024).await;
    assert_eq!(text(reply).await, "ok");
    assert_eq!(connections(&seen), vec![0, 0, 1]);
    // A POST lost the same way is not sent twice: the origin may have acted on it.
    let e = send(
        &up,
        addr,
        Method::POST,
        &host_only(),
        ProxyBody::bytes("x"),
        1024,
    )
    .await;
    assert_eq!(e.err(), Some(UpstreamError::Exchange));
    assert_eq!(connections(&seen), vec![0, 0, 1, 1]);
}

/// Sends `request` through a hyper front and the upstream to an origin that answers `done`;
/// returns the request as the origin read it.
async fn upload_through_front(request: &[u8]) -> String {
    let (origin, seen) =
        scripted(|_, _, _| Some(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone".to_vec()))
            .await;
    let front = front(origin).await;
    let mut client = tokio::net::TcpStream::connect(front)
        .await
        .expect("connect");
    client.write_all(request).await.expect("write");
    read_until_ending(&mut client, b"done", Duration::from_secs(5)).await;
    let request = String::from_utf8_lossy(&seen.lock().expect("seen")[0].1).into_owned();
    request
}

#[tokio::test]
async fn a_streamed_upload_of_unknown_length_goes_out_chunked() {
    let request = upload_through_front(
        b"POST / HTTP/1.1\r\nHost: front\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    )
    .await;
    assert!(
        request.contains("transfer-encoding: chunked\r\n"),
        "{request}"
    );
    // Decode the chunks the origin got.
    let body = &request[request.find("\r\n\r\n").expect("head end") + 4..];
    let mut rest = body;
    let mut decoded = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("size line");
        let size = usize::from_str_radix(size, 16).expect("hex size");
        if size == 0 {
            break;
        }
        decoded.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    assert_eq!(decoded, "abcde");
}

/// Trailers of a chunked upload follow its last chunk to the origin, except fields that
/// frame, route or control the message.
#[tokio::test]
async fn the_trailers_of_a_chunked_upload_are_passed_on() {
    let request = upload_through_front(
        b"POST / HTTP/1.1\r\nHost: front\r\nTransfer-Encoding: chunked\r\n\
              Trailer: X-Checksum\r\n\r\n\
              3\r\nabc\r\n0\r\nX-Checksum: sha256=abc\r\nContent-Length: 99\r\n\
              Host: elsewhere\r\n\r\n",
    )
    .await;
    let body = &request[request.find("\r\n\r\n").expect("head end") + 4..];
    assert!(body.starts_with("3\r\nabc\r\n"), "{request}");
    assert!(
        body.ends_with("\r\n0\r\nx-checksum: sha256=abc\r\n\r\n"),
        "{request}"
    );
    assert!(
        !body.contains("99") && !body.contains("elsewhere"),
        "{request}"
    );
}

#[tokio::test]
async fn an_origin_silent_in_the_middle_of_a_body_times_it_out() {
    // Half a chunked body, then nothing (the connection stays open).
    let (addr, _) = scripted(|_, _, _| {
        Some(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec())
    })
    .await;
    let up = pool_reading_within(Duration::from_millis(300));
    let (_, reply) = get(&up, addr, 1024).await;
    let Reply::Streamed(mut body) = reply else {
        panic!("a chunked body streams");
    };
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().expect("data"), "hello");
    // The bound on this wait is the test's own; the body must give up well before it.
    let next = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("the body gave up");
    let e = next.expect("an outcome").expect_err("a timeout");
    assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    assert!(body.is_end_stream());
}

#[tokio::test]
async fn transfer_encoding_overrides_content_length_which_is_not_passed_on() {
    let (addr, seen) = scripted(|c, _, _| {
        Some(match c {
            0 => b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n\
                  c\r\nhello, world\r\n0\r\n\r\n"
                .to_vec(),
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok".to_vec(),
        })
    })
    .await;
    let up = pool();
    let (resp, reply) = get(&up, addr, 1024).await;
    assert_eq!(resp.fields.length(), None);
    assert_eq!(text(reply).await, "hello, world");
    // Not trusted with another request: the next goes on a new connection, where a list of
    // equal lengths is one length.
    let (_, reply) = get(&up, addr, 1024).await;
    assert_eq!(text(reply).await, "ok");
    assert_eq!(connections(&seen), vec![0, 1]);
}

#[tokio::test]
async fn a_chunk_size_line_without_digits_is_an_error_not_the_end() {
    // A stray CRLF where a chunk size belongs would read as size 0 and cut the body short.
    let (addr, _) = scripted(|_, _, _| {
        Some(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n\r\n5\r\nworld\r\n0\r\n\r\n"
                .to_vec(),
        )
    })
    .await;
    let (_, reply) = get(&pool(), addr, 1 << 20).await;
    let Reply::Streamed(body) = reply else {
        panic!("a chunked body streams");
    };
    assert!(body.collect().await.is_err());
}

#[tokio::test]
async fn an_answer_that_breaks_off_after_its_head_is_not_sent_again() {
    let (addr, seen) = scripted_closing(|_, _, _| {
        Some(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec())
    })
    .await;
    let e = send(
        &pool(),
        addr,
        Method::GET,
        &host_only(),
        ProxyBody::Empty,
        1024,
    )
    .await;
    assert_eq!(e.err(), Some(UpstreamError::BrokenAnswer));
    assert_eq!(connections(&seen), vec![0], "sent once");
}

#[tokio::test]
async fn an_origin_answering_before_it_has_read_an_upload_is_heard() {
    // The origin reads the head only, refuses the body (413) and stops reading, keeping
    // the connection open: the upload stalls, the answer still comes through.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let origin = listener.local_addr().expect("addr");
    let (test_done, done) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let Ok((mut s, _)) = listener.accept().await else {
            return;
        };
        let mut have = Vec::new();
        let mut buf = [0u8; 1024];
        while !have.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => have.extend_from_slice(&buf[..n]),
            }
        }
        let refusal = b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big\n";
        let _ = s.write_all(refusal).await;
        // Holds the connection open, unread, until the test has its answer (or gives up).
        let _ = tokio::time::timeout(Duration::from_secs(30), done).await;
        drop(s);
    });
    let front = front(origin).await;
    let mut client = tokio::net::TcpStream::connect(front)
        .await
        .expect("connect");
    client
        .write_all(b"POST / HTTP/1.1\r\nHost: front\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .expect("head");
    let (mut from_front, mut to_front) = client.into_split();
    // 16 MiB in chunks of 64 KiB, more than the sockets between here and the origin hold.
    tokio::spawn(async move {
        let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
        for _ in 0..256 {
            if to_front.write_all(chunk.as_bytes()).await.is_err() {
                return;
            }
        }
    });
    let answer = read_until_ending(&mut from_front, b"too big\n", Duration::from_secs(10)).await;
    let _ = test_done.send(());
    assert!(
        answer.starts_with(b"HTTP/1.1 413"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}
