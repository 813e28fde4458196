//! The proxy's listeners: HTTP/1.1 and HTTP/2 (ALPN over TLS, prior knowledge in clear) on
//! hyper's connection builders, with upgrades for WebSockets.
//!
//! Shaped like nginx's workers: each worker is one OS thread with a single-threaded runtime,
//! its own SO_REUSEPORT listening socket (the kernel spreads connections over them) and its
//! own pool of origin connections, so a request never crosses threads. On one pinned core this
//! serves ~25 % more requests than a work-stealing runtime (bench/proxy.sh).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::body::ProxyBody;
use crate::client::http1::{self, Served};
use crate::client::in_flight::{Activity, Answer, Busy};
use crate::client::prefixed::Prefixed;
use crate::lazy_timer::LazyTimer;
use crate::origin::pool::Upstream;
use crate::route::{Peer, Proxy};
use lb_edge::Serving;
use lb_edge::TimedWrite;

/// Connections and HTTP/2 streams cut because the client did not take its answer in time.
const SEND_TIMEOUTS: &str = "meshlb_proxy_send_timeouts_total";

/// Running listener workers; they stop when this is dropped.
#[derive(Debug)]
pub struct ProxyListener {
    pub addr: SocketAddr,
    stop: watch::Sender<bool>,
    /// Told when a worker thread ends (`take_ended`).
    ended: Option<lb_edge::Ended>,
}

impl ProxyListener {
    /// Where the end of the first worker to end is told (once; for supervision).
    pub fn take_ended(&mut self) -> Option<lb_edge::Ended> {
        self.ended.take()
    }
}

impl Drop for ProxyListener {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Which HTTP a connection speaks: ALPN says over TLS, the first bytes in clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Http {
    One,
    Two,
}

/// The smallest read buffer hyper's HTTP/1 server accepts.
const HYPER_MIN_BUFFER: usize = 8 << 10;

/// What an HTTP/2 client sends first (RFC 9113 section 3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Tells HTTP/2 with prior knowledge from HTTP/1 by the first bytes; `None` when the client
/// sends nothing in time or closes. The first bytes are peeked: a client sends its request or
/// preface whole, so one peek decides and nothing is read. Only a client that has sent part of
/// the preface so far makes it read, each read waiting for data (a peek would see the same
/// bytes at once, again and again); what was read is put back in front of the connection.
async fn sniff(stream: TcpStream, within: Duration) -> Option<(Http, Prefixed<TcpStream>)> {
    let deadline = tokio::time::Instant::now() + within;
    let mut first = [0u8; 24];
    let n = tokio::time::timeout_at(deadline, stream.peek(&mut first))
        .await
        .ok()?
        .ok()?;
    let seen = first.get(..n)?;
    if n == 0 {
        return None;
    }
    if !H2_PREFACE.starts_with(seen) {
        return Some((Http::One, Prefixed::new(Bytes::new(), stream)));
    }
    if n == H2_PREFACE.len() {
        return Some((Http::Two, Prefixed::new(Bytes::new(), stream)));
    }
    let mut stream = stream;
    let mut read = 0;
    while read < first.len() {
        let got = tokio::time::timeout_at(deadline, stream.read(&mut first[read..]))
            .await
            .ok()?
            .ok()?;
        if got == 0 {
            return None;
        }
        read += got;
        if !H2_PREFACE.starts_with(&first[..read]) {
            break;
        }
    }
    let http = if first[..read] == H2_PREFACE[..] {
        Http::Two
    } else {
        Http::One
    };
    Some((
        http,
        Prefixed::new(Bytes::copy_from_slice(&first[..read]), stream),
    ))
}

/// What every request of a connection needs, behind one reference count: where the current
/// proxy is, this worker's origin connections, the client.
type Connection = Arc<(Arc<Serving<Proxy>>, Arc<Upstream>, Peer)>;

/// A connection's place under its worker's `--proxy-max-connections-per-worker`. An upgraded
/// connection (a WebSocket) outlives the task that served its HTTP, so an upgrade request
/// carries a share of it (in its extensions) to the tunnel, which holds it to the end.
#[derive(Clone)]
pub struct ConnectionSlot {
    _permit: Arc<tokio::sync::OwnedSemaphorePermit>,
}

/// Serves one client connection: HTTP/1 with the proxy's own server until a request it does
/// not take, then with hyper's; HTTP/2 with hyper's (rather than hyper's automatic builder,
/// which wraps every read to sniff the protocol).
async fn serve_connection<I>(
    serving: Arc<Serving<Proxy>>,
    upstream: Arc<Upstream>,
    io: I,
    peer: Peer,
    http: Http,
    slot: ConnectionSlot,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn: Connection = Arc::new((serving, upstream, peer));
    match http {
        Http::One => {
            let (serving, upstream, peer) = &*conn;
            if let Served::ToHyper(io) = http1::serve(serving, upstream, peer, io).await {
                serve_with_hyper(conn, io, http, slot).await;
            }
        }
        Http::Two => serve_with_hyper(conn, io, http, slot).await,
    }
}

async fn serve_with_hyper<I>(conn: Connection, io: I, http: Http, slot: ConnectionSlot)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (header_read_timeout, max_buf, h2_idle, h2_keep_alive, send_timeout) = {
        let proxy = conn.0.load();
        let s = &proxy.settings;
        (
            s.header_read_timeout,
            s.max_header_bytes,
            s.h2_idle_timeout,
            Some(s.h2_keep_alive_interval).filter(|d| !d.is_zero()),
            s.send_timeout,
        )
    };
    let activity = Arc::new(Activity::default());
    let seen = Arc::clone(&activity);
    let service = service_fn(move |mut req: Request<Incoming>| {
        let conn = Arc::clone(&conn);
        let seen = Arc::clone(&seen);
        let busy = Busy::new(&seen);
        if req.headers().contains_key(http::header::UPGRADE) {
            req.extensions_mut().insert(slot.clone());
        }
        // Boxed: hyper spawns each HTTP/2 stream's future as a task, and this one is about
        // 4 KiB (the proxy's whole request path). Unboxed, it was copied by value at each step
        // from here into tokio's task cell, and the cell (as large) again when the task ended;
        // memmove was 7 % of the proxy's CPU under `ROWS=h2 ./bench/proxy-tls.sh`.
        Box::pin(async move {
            let (serving, upstream, peer) = &*conn;
            // The proxy of the moment the request arrives; it serves the request to its end.
            let proxy = serving.load_full();
            let req = req.map(|b| {
                ProxyBody::client(
                    b,
                    proxy.settings.body_read_timeout,
                    proxy.settings.body_timeout,
                )
            });
            // HTTP/2 streams run at once, so each request has its own.
            let mut answer_timer = LazyTimer::default();
            let response = proxy.handle(upstream, req, peer, &mut answer_timer).await;
            // In flight until the answer's body has gone out, not just its head.
            Ok::<_, Infallible>(response.map(|body| match http {
                Http::One => Answer::Whole { body, _busy: busy },
                Http::Two => seen.watch(body, busy),
            }))
        })
    });
    match http {
        Http::One => {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                // The head's own bound: the buffer's alone let a head that arrived in one
                // read through, whatever its size.
                .max_header_size(max_buf)
                // hyper refuses (panics on) a buffer smaller than its initial 8 KiB.
                .max_buf_size(max_buf.max(HYPER_MIN_BUFFER));
            let _ = builder
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades()
                .await;
        }
        Http::Two => {
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            builder
                .timer(TokioTimer::new())
                // A client that stops answering PINGs is cut after one more interval.
                .keep_alive_interval(h2_keep_alive)
                .keep_alive_timeout(h2_keep_alive.unwrap_or(Duration::from_secs(20)));
            let conn = builder.serve_connection(TokioIo::new(io), service);
            serve_h2_until_idle(conn, activity, h2_idle, send_timeout).await;
        }
    }
}

/// Serves an HTTP/2 connection, shutting it down gracefully (GOAWAY; streams in progress
/// finish) once no request has been in flight for `idle`: a client that sends its preface and
/// goes silent holds nothing for long. hyper's graceful shutdown waits for the client to
/// acknowledge a PING; a client that does not is dropped `idle` later (at most 10 s). Every
/// check also cuts the answers whose client has not taken a handed frame for `send_timeout`
/// (in_flight.rs), so a check comes every quarter of the shorter of the two.
async fn serve_h2_until_idle<F>(
    conn: F,
    activity: Arc<Activity>,
    idle: Duration,
    send_timeout: Duration,
) where
    F: Future + GracefulShutdown,
{
    let conn = std::pin::pin!(conn);
    let mut conn = conn;
    let check = (idle.min(send_timeout) / 4).max(Duration::from_millis(10));
    let grace = idle.min(Duration::from_secs(10));
    let mut shutting_down = false;
    let mut give_up = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            () = tokio::time::sleep_until(give_up), if shutting_down => return,
            () = tokio::time::sleep(check) => {
                // Counted before the bodies (and their origin connections) are dropped.
                activity.cut_stalled(send_timeout, SEND_TIMEOUTS);
                if !shutting_down && activity.idle_for(idle) {
                    conn.as_mut().shutdown_gracefully();
                    shutting_down = true;
                    give_up = tokio::time::Instant::now() + grace;
                }
            }
        }
    }
}

/// hyper's `graceful_shutdown`, for the HTTP/2 connection future.
trait GracefulShutdown {
    fn shutdown_gracefully(self: Pin<&mut Self>);
}

impl<I, S, E, B> GracefulShutdown for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn shutdown_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

fn reuseport_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

async fn accept_loop(
    listener: TcpListener,
    serving: Arc<Serving<Proxy>>,
    acceptor: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    // Settings are the listener's, not the config's: a reload does not change them.
    let (upstream, header_read_timeout, send_timeout, max_connections) = {
        let proxy = serving.load();
        let s = &proxy.settings;
        (
            proxy.upstream(),
            s.header_read_timeout,
            s.send_timeout,
            s.max_connections_per_worker.max(1),
        )
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let refused = metrics::counter!("meshlb_proxy_connections_refused_total");
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::debug!(error = %e, "proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        // At the worker's connection limit: closed at once, counted.
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            refused.increment(1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let serving = Arc::clone(&serving);
        let upstream = Arc::clone(&upstream);
        let acceptor = acceptor.clone();
        let slot = ConnectionSlot {
            _permit: Arc::new(slot),
        };
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => {
                    if let Ok(Ok(tls_stream)) =
                        tokio::time::timeout(header_read_timeout, acceptor.accept(stream)).await
                    {
                        let http = match tls_stream.get_ref().1.alpn_protocol() {
                            Some(b"h2") => Http::Two,
                            _ => Http::One,
                        };
                        let peer = Peer::over_tls(
                            peer,
                            crate::access::TlsFacts::of(tls_stream.get_ref().1),
                        );
                        let io = TimedWrite::new(tls_stream, send_timeout, SEND_TIMEOUTS);
                        serve_connection(serving, upstream, io, peer, http, slot).await;
                    }
                }
                None => {
                    if let Some((http, stream)) = sniff(stream, header_read_timeout).await {
                        let io = TimedWrite::new(stream, send_timeout, SEND_TIMEOUTS);
                        let peer = Peer::new(peer, false);
                        serve_connection(serving, upstream, io, peer, http, slot).await;
                    }
                }
            }
        });
    }
}

/// Binds `addr` once per worker (`settings.workers` of the proxy `serving` holds) and serves
/// it, with TLS when `tls` is given. Port 0 picks a port for the first worker; the others
/// share it. Each request is served by the proxy `serving` holds when it arrives.
pub fn listen(
    serving: Arc<Serving<Proxy>>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> io::Result<ProxyListener> {
    let workers = serving.load().settings.workers.max(1);
    let context = |e: io::Error| io::Error::new(e.kind(), format!("proxy listener on {addr}: {e}"));
    let first = reuseport_listener(addr).map_err(context)?;
    let addr = first.local_addr()?;
    let mut sockets = vec![first];
    for _ in 1..workers {
        sockets.push(reuseport_listener(addr).map_err(context)?);
    }
    let (stop, stopped) = watch::channel(false);
    let (signal, ended) = lb_edge::end_signal();
    let acceptor = tls.map(TlsAcceptor::from);
    for (i, socket) in sockets.into_iter().enumerate() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (serving, acceptor, stopped) =
            (Arc::clone(&serving), acceptor.clone(), stopped.clone());
        let end = signal.guard(format!("proxy-{}-{i}", addr.port()));
        std::thread::Builder::new()
            .name(format!("proxy-{}-{i}", addr.port()))
            .spawn(move || {
                let _end = end;
                runtime.block_on(async move {
                    match TcpListener::from_std(socket) {
                        Ok(listener) => accept_loop(listener, serving, acceptor, stopped).await,
                        Err(e) => tracing::error!(error = %e, "proxy worker cannot listen"),
                    }
                });
                // Dropping the runtime here cancels this worker's connections.
            })?;
    }
    Ok(ProxyListener {
        addr,
        stop,
        ended: Some(ended),
    })
}
