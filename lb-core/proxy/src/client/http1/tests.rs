//! The proxy's own HTTP/1 server end to end: a real `Proxy` listening on loopback, a hyper
//! origin with keep-alive, raw TCP clients that control exactly what goes on the wire.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{listen, Proxy, ProxyListener, ProxySettings};
use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::region::Region;
use lb_core::regions_table::RegionsTable;
use lb_edge::{Generation, PopInfo, Serving};

/// A body of three chunks whose size is not known beforehand.
struct Unsized(Vec<Bytes>);

impl Body for Unsized {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready((!self.0.is_empty()).then(|| Ok(Frame::data(self.0.remove(0)))))
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

type OriginBody = http_body_util::Either<http_body_util::Full<Bytes>, Unsized>;

/// A keep-alive origin: `/big` is 100,000 bytes of `x`, `/chunked` three chunks of unknown
/// total size, a POST gets its body's length back, anything else its own path.
async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let service = hyper::service::service_fn(|req: http::Request<Incoming>| async move {
                let path = req.uri().path().to_string();
                let full = |b: Bytes| OriginBody::Left(http_body_util::Full::new(b));
                let body = match (req.method().as_str(), path.as_str()) {
                    ("POST", _) => {
                        let got = req
                            .into_body()
                            .collect()
                            .await
                            .map_or(0, |c| c.to_bytes().len());
                        full(format!("got {got}").into())
                    }
                    (_, "/big") => full(vec![b'x'; 100_000].into()),
                    (_, "/hold") => {
                        // Never answers: only the proxy closing the connection ends it.
                        std::future::pending::<()>().await;
                        full(path.into())
                    }
                    (_, "/chunked") => OriginBody::Right(Unsized(vec![
                        Bytes::from_static(b"one,"),
                        Bytes::from_static(b"two,"),
                        Bytes::from_static(b"three"),
                    ])),
                    _ => full(path.into()),
                };
                Ok::<_, Infallible>(http::Response::new(body))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), service),
            );
        }
    });
    addr
}

/// A proxy for `www.example.test` in front of a fresh origin.
async fn proxy(settings: ProxySettings) -> ProxyListener {
    proxy_and_state(settings).await.0
}

async fn proxy_and_state(settings: ProxySettings) -> (ProxyListener, Arc<Proxy>) {
    let origin = origin().await;
    let regions = RegionsTable::embedded().expect("regions");
    let text = format!(
        r#"
[[pools]]
name = "web"
origins = [{{ name = "o", address = "127.0.0.1", port = {} }}]
[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["web"]
"#,
        origin.port()
    );
    let config = Arc::new(Config::parse("t.toml", &text, &regions).expect("config"));
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    let generation = Arc::new(Generation::new(1, config, snapshot).expect("generation"));
    let pop = PopInfo::new(&regions, Region::Weu, Some("ams"));
    let proxy = Proxy::new(
        generation,
        Arc::new(regions),
        AffinityKey::derive(b"t"),
        pop,
        ProxySettings {
            workers: 1,
            ..settings
        },
    )
    .expect("proxy");
    let proxy = Arc::new(proxy);
    let listener = listen(
        Arc::new(Serving::new_shared(Arc::clone(&proxy))),
        "127.0.0.1:0".parse().expect("addr"),
        None,
    )
    .expect("listen");
    (listener, proxy)
}

async fn connect(p: &ProxyListener) -> TcpStream {
    TcpStream::connect(p.addr).await.expect("connect")
}

/// One response read off `s`: status, lower-case head, body (by Content-Length or chunks).
async fn response(s: &mut TcpStream, head_request: bool) -> (u16, String, Vec<u8>) {
    let within = Duration::from_secs(10);
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(within, s.read(&mut byte))
            .await
            .expect("in time")
            .expect("read");
        assert_eq!(
            n,
            1,
            "closed within a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    let status = head[9..12].parse().expect("status");
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
    };
    let mut body = Vec::new();
    if head_request {
        return (status, head, body);
    }
    if let Some(n) = field("content-length") {
        body.resize(n.parse().expect("length"), 0);
        s.read_exact(&mut body).await.expect("body");
    } else if field("transfer-encoding").as_deref() == Some("chunked") {
        loop {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                s.read_exact(&mut byte).await.expect("size line");
                line.push(byte[0]);
            }
            let size = usize::from_str_radix(std::str::from_utf8(&line).expect("ascii").trim(), 16)
                .expect("hex");
            let mut chunk = vec![0u8; size + 2];
            s.read_exact(&mut chunk).await.expect("chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    (status, head, body)
}

async fn send(s: &mut TcpStream, bytes: impl AsRef<[u8]>) {
    s.write_all(bytes.as_ref()).await.expect("write");
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: www.example.test\r\n\r\n")
}

/// Reads until the proxy closes the connection; what came before is returned.
async fn until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut rest = Vec::new();
    tokio::time::timeout(within, s.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .expect("read");
    rest
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let p = proxy(ProxySettings::default()).await;
    let mut s = connect(&p).await;
    let burst = format!("{}{}{}", get("/a"), get("/b?x=1"), get("/c"));
    send(&mut s, burst).await;
    for want in ["/a", "/b", "/c"] {
        let (status, head, body) = response(&mut s, false).await;
        assert_eq!(status, 200, "{head}");
        assert_eq!(body, want.as_bytes());
        assert!(head.contains("\r\ndate: "), "{head}");
    }
    // An unknown host is the proxy's own answer, on the same connection.
    send(&mut s, b"GET / HTTP/1.1\r\nHost: nobody.test\r\n\r\n").await;
    let (status, _, body) = response(&mut s, false).await;
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("nobody.test"));
}

#[tokio::test]
async fn a_head_that_comes_a_byte_at_a_time_is_answered() {
    let p = proxy(ProxySettings::default()).await;
    let mut s = connect(&p).await;
    s.set_nodelay(true).expect("nodelay");
    for b in get("/slow").bytes() {
        send(&mut s, &[b]).await;
        tokio::task::yield_now().await;
    }
    let (status, _, body) = response(&mut s, false).await;
    assert_eq!((status, body.as_slice()), (200, &b"/slow"[..]));
}

#[tokio::test]
async fn a_connection_goes_on_with_hyper_from_its_first_request_with_a_body() {
    let p = proxy(ProxySettings::default()).await;
    let mut s = connect(&p).await;
    send(&mut s, get("/first")).await;
    assert_eq!(response(&mut s, false).await.2, b"/first");
    // A body, and a plain request right behind it in the same write: both answered.
    let post = "POST /up HTTP/1.1\r\nHost: www.example.test\r\nContent-Length: 5\r\n\r\nhello";
    send(&mut s, format!("{post}{}", get("/after"))).await;
    assert_eq!(response(&mut s, false).await.2, b"got 5");
    assert_eq!(response(&mut s, false).await.2, b"/after");
}

#[tokio::test]
async fn connection_close_is_answered_then_the_connection_closed() {
    let p = proxy(ProxySettings::default()).await;
    let mut s = connect(&p).await;
    send(
        &mut s,
        b"GET /bye HTTP/1.1\r\nHost: www.example.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    let (status, head, body) = response(&mut s, false).await;
    assert_eq!((status, body.as_slice()), (200, &b"/bye"[..]));
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    assert!(until_closed(&mut s, Duration::from_secs(10))
        .await
        .is_empty());
}

#[tokio::test]
async fn head_gets_the_length_without_the_body_and_big_bodies_stream_whole() {
    let p = proxy(ProxySettings::default()).await;
    let mut s = connect(&p).await;
    send(
        &mut s,
        b"HEAD /big HTTP/1.1\r\nHost: www.example.test\r\n\r\n",
    )
    .await;
    let (status, head, _) = response(&mut s, true).await;
    assert_eq!(status, 200);
    assert!(head.contains("\r\ncontent-length: 100000\r\n"), "{head}");
    // No body bytes followed the HEAD answer: the next answer starts right away.
    send(&mut s, get("/big")).await;
    let (status, head, body) = response(&mut s, false).await;
    assert_eq!(status, 200, "{head}");
    assert_eq!(body.len(), 100_000);
    assert!(body.iter().all(|&b| b == b'x'));
    // Unknown size: chunked to the client, whole.
    send(&mut s, get("/chunked")).await;
    let (status, head, body) = response(&mut s, false).await;
    assert_eq!(status, 200);
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert_eq!(body, b"one,two,three");
}

#[tokio::test]
async fn what_this_server_does_not_take_hyper_answers() {
    let p = proxy(ProxySettings {
        max_header_bytes: 4 << 10,
        ..ProxySettings::default()
    })
    .await;
    let mut s = connect(&p).await;
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: www.example.test\r\nX-Big: {}\r\n\r\n",
        "y".repeat(8 << 10)
    );
    send(&mut s, huge).await;
    assert_eq!(response(&mut s, false).await.0, 431);

    // Whole in one read, under hyper's buffer but over the limit: 431 all the same.
    let mut s = connect(&p).await;
    let over = format!(
        "GET / HTTP/1.1\r\nHost: www.example.test\r\nX-Big: {}\r\n\r\n",
        "y".repeat(6000)
    );
    send(&mut s, over).await;
    assert_eq!(response(&mut s, false).await.0, 431);

    let mut s = connect(&p).await;
    send(
        &mut s,
        b"GET / HTTP/1.1\r\nHost: www.example.test\r\nBad Name: x\r\n\r\n",
    )
    .await;
    assert_eq!(response(&mut s, false).await.0, 400);

    // A target the `http` types refuse, after a request served here: hyper gets the head
    // from its first byte and answers 400.
    let mut s = connect(&p).await;
    send(&mut s, get("/fine")).await;
    assert_eq!(response(&mut s, false).await.2, b"/fine");
    send(
        &mut s,
        b"GET /a<b HTTP/1.1\r\nHost: www.example.test\r\n\r\n",
    )
    .await;
    assert_eq!(response(&mut s, false).await.0, 400);

    // HTTP/1.0 is hyper's, and still proxied.
    let mut s = connect(&p).await;
    send(
        &mut s,
        b"GET /old HTTP/1.0\r\nHost: www.example.test\r\n\r\n",
    )
    .await;
    let (status, _, body) = response(&mut s, false).await;
    assert_eq!((status, body.as_slice()), (200, &b"/old"[..]));
}

#[tokio::test]
async fn a_request_whose_host_is_missing_doubled_or_malformed_is_a_bad_request() {
    let p = proxy(ProxySettings::default()).await;
    // RFC 9112 section 3.2: 400, whichever server read the head (HTTP/1.0 is hyper's).
    for head in [
        &b"GET / HTTP/1.1\r\nHost: www.example.test\r\nHost: other.test\r\n\r\n"[..],
        b"GET / HTTP/1.0\r\nHost: www.example.test\r\nHost: other.test\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: www example test\r\n\r\n",
    ] {
        let mut s = connect(&p).await;
        send(&mut s, head).await;
        let (status, _, body) = response(&mut s, false).await;
        assert_eq!(status, 400, "{}", String::from_utf8_lossy(head));
        assert!(
            body.starts_with(b"meshlb: "),
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
    // A well-formed name that no load balancer has is unknown, not bad.
    let mut s = connect(&p).await;
    send(&mut s, b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n").await;
    assert_eq!(response(&mut s, false).await.0, 404);
}

#[tokio::test]
async fn an_idle_or_slow_head_is_cut_off_at_the_header_timeout() {
    // Long enough that a late wake-up of this task on a loaded machine stays within the
    // quarter of it that the second request has left.
    let limit = Duration::from_secs(2);
    let p = proxy(ProxySettings {
        header_read_timeout: limit,
        ..ProxySettings::default()
    })
    .await;
    let margin = Duration::from_millis(50);
    // Idle after a request: closed once the next head is overdue, not before. The second
    // request comes after most of the first wait, so the connection's timer, set for the
    // first wait, fires while the third head is awaited and must be moved, not obeyed.
    let mut s = connect(&p).await;
    send(&mut s, get("/one")).await;
    assert_eq!(response(&mut s, false).await.2, b"/one");
    // Not a wait for a condition but the stimulus: the second request must come late in the
    // first wait, so that the first wait's timer fires during the third.
    let first_answered = tokio::time::Instant::now();
    tokio::time::sleep_until(first_answered + limit * 3 / 4).await;
    send(&mut s, get("/two")).await;
    assert_eq!(response(&mut s, false).await.2, b"/two");
    let waiting = Instant::now();
    assert!(until_closed(&mut s, Duration::from_secs(10))
        .await
        .is_empty());
    assert!(
        waiting.elapsed() >= limit - margin,
        "{:?}",
        waiting.elapsed()
    );
    // A head begun but never finished.
    let mut s = connect(&p).await;
    let waiting = Instant::now();
    send(&mut s, b"GET /never HTTP/1.1\r\nHost: www.ex").await;
    assert!(until_closed(&mut s, Duration::from_secs(10))
        .await
        .is_empty());
    assert!(
        waiting.elapsed() >= limit - margin,
        "{:?}",
        waiting.elapsed()
    );
}

#[tokio::test]
async fn a_client_that_leaves_mid_request_ends_the_origin_exchange() {
    let (p, state) = proxy_and_state(ProxySettings::default()).await;
    let target = lb_core::steering::Target {
        pool: lb_core::config::PoolId(0),
        endpoint: lb_core::config::EndpointId(0),
    };
    // Waits for the count, up to a deadline.
    let outstanding_becomes = |n: u32| {
        let state = Arc::clone(&state);
        async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut every = tokio::time::interval(Duration::from_millis(10));
            while Instant::now() < deadline {
                if state.outstanding(target) == n {
                    return true;
                }
                every.tick().await;
            }
            false
        }
    };
    let mut s = connect(&p).await;
    send(&mut s, get("/hold")).await;
    assert!(
        outstanding_becomes(1).await,
        "the request never reached the origin"
    );
    drop(s);
    // The origin never answers; the exchange ends with the client instead.
    assert!(
        outstanding_becomes(0).await,
        "the request outlived its client"
    );
}

#[tokio::test]
async fn an_origin_silent_past_the_response_timeout_is_a_524() {
    let p = proxy(ProxySettings {
        response_timeout: Duration::from_millis(300),
        ..ProxySettings::default()
    })
    .await;
    let mut s = connect(&p).await;
    send(&mut s, get("/hold")).await;
    let (status, _, body) = response(&mut s, false).await;
    assert_eq!(status, 524);
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("www.example.test") && body.contains("(error 524)"),
        "{body}"
    );
    // The connection stays usable.
    send(&mut s, get("/after")).await;
    assert_eq!(response(&mut s, false).await.2, b"/after");
}
