//! A response body streamed from an origin: decoded by its framing (length, chunked with
//! trailers, or until the close), its connection given back for reuse once read to the end,
//! closed when dropped before, and given up when the origin goes silent too long.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::{Conn, Framing, MAX_CHUNK_LINE, MAX_HEAD_BYTES, READ_RESERVE};

/// Where a connection goes once its response body has been read to the end.
pub type Release = Box<dyn FnOnce(Conn) + Send>;

#[derive(Debug, Clone, Copy)]
enum BodyState {
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailers,
    UntilClose,
    Done,
}

/// A response body streamed from an origin; the connection goes back to the pool when the
/// body has been read to its end, and is closed when the body is dropped before that.
pub struct OriginBody {
    conn: Option<Conn>,
    state: BodyState,
    release: Option<Release>,
    /// The longest the origin may go silent in the middle of the body.
    idle_timeout: Duration,
    /// The silence timer (boxed, made on the first wait: only slow bodies need one) and
    /// whether it counts the current wait; reset, not remade, for each later wait.
    silence: Option<Pin<Box<Sleep>>>,
    waiting: bool,
}

impl OriginBody {
    /// `release` is called with the connection when the body ends and it can be reused.
    pub fn new(
        conn: Conn,
        framing: Framing,
        keep_alive: bool,
        release: Release,
        idle_timeout: Duration,
    ) -> OriginBody {
        let state = match framing {
            Framing::Length(n) => BodyState::Length(n),
            Framing::Chunked => BodyState::ChunkSize,
            Framing::UntilClose => BodyState::UntilClose,
            Framing::Empty | Framing::Upgrade => BodyState::Done,
        };
        let mut body = OriginBody {
            conn: Some(conn),
            state,
            release: keep_alive.then_some(release),
            idle_timeout,
            silence: None,
            waiting: false,
        };
        if matches!(state, BodyState::Done) {
            body.finish();
        }
        body
    }

    fn finish(&mut self) {
        self.state = BodyState::Done;
        if let (Some(conn), Some(release)) = (self.conn.take(), self.release.take()) {
            release(conn);
        }
    }

    fn fail(&mut self, e: io::Error) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        self.state = BodyState::Done;
        self.conn = None;
        Poll::Ready(Some(Err(e)))
    }
}

/// The trailer section of a chunked body (its fields and the empty line ending it).
fn trailer_fields(section: &Bytes) -> Option<HeaderMap> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let httparse::Status::Complete((_, parsed)) =
        httparse::parse_headers(section, &mut fields).ok()?
    else {
        return None;
    };
    let mut trailers = HeaderMap::with_capacity(parsed.len());
    for field in parsed {
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        let value = HeaderValue::from_maybe_shared(section.slice_ref(field.value)).ok()?;
        trailers.append(name, value);
    }
    Some(trailers)
}

fn broken(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("origin body: {what}"))
}

impl Body for OriginBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = self.get_mut();
        loop {
            let state = this.state;
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            // Decode what is in the buffer; `need_more` when it takes another read.
            let need_more = match state {
                BodyState::Done => return Poll::Ready(None),
                BodyState::Length(0) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                BodyState::Length(left) | BodyState::ChunkData(left) if !conn.buf.is_empty() => {
                    let take = conn
                        .buf
                        .len()
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    let data = conn.buf.split_to(take).freeze();
                    let left = left - take as u64;
                    match state {
                        BodyState::Length(_) if left == 0 => this.finish(),
                        BodyState::Length(_) => this.state = BodyState::Length(left),
                        _ if left == 0 => this.state = BodyState::ChunkEnd,
                        _ => this.state = BodyState::ChunkData(left),
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                BodyState::Length(_) | BodyState::ChunkData(_) => true,
                // httparse takes a line without digits for size 0; a chunk-size starts with one.
                BodyState::ChunkSize
                    if conn.buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) =>
                {
                    return this.fail(broken("bad chunk size"));
                }
                BodyState::ChunkSize => match httparse::parse_chunk_size(&conn.buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        conn.buf.advance(used);
                        this.state = if size == 0 {
                            BodyState::Trailers
                        } else {
                            BodyState::ChunkData(size)
                        };
                        false
                    }
                    Ok(httparse::Status::Partial) if conn.buf.len() < MAX_CHUNK_LINE => true,
                    _ => return this.fail(broken("bad chunk size")),
                },
                BodyState::ChunkEnd if conn.buf.len() >= 2 => {
                    if &conn.buf[..2] != b"\r\n" {
                        return this.fail(broken("chunk not followed by CRLF"));
                    }
                    conn.buf.advance(2);
                    this.state = BodyState::ChunkSize;
                    false
                }
                BodyState::ChunkEnd => true,
                BodyState::Trailers => {
                    if conn.buf.starts_with(b"\r\n") {
                        conn.buf.advance(2);
                        this.finish();
                        return Poll::Ready(None);
                    }
                    match conn.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(end) => {
                            let section = conn.buf.split_to(end + 4).freeze();
                            let Some(trailers) = trailer_fields(&section) else {
                                return this.fail(broken("bad trailer fields"));
                            };
                            this.finish();
                            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                        }
                        None if conn.buf.len() < MAX_HEAD_BYTES => true,
                        None => return this.fail(broken("trailers too large")),
                    }
                }
                BodyState::UntilClose if !conn.buf.is_empty() => {
                    let data = conn.buf.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                BodyState::UntilClose => true,
            };
            if !need_more {
                continue;
            }
            if conn.buf.capacity() - conn.buf.len() < 1024 {
                conn.buf.reserve(READ_RESERVE);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut conn.io), cx, &mut conn.buf) {
                Poll::Pending => {
                    // Waiting on the origin: give up when it stays silent too long.
                    let idle = this.idle_timeout;
                    let silence = match &mut this.silence {
                        Some(timer) if !this.waiting => {
                            timer.as_mut().reset(tokio::time::Instant::now() + idle);
                            timer
                        }
                        Some(timer) => timer,
                        None => this.silence.insert(Box::pin(tokio::time::sleep(idle))),
                    };
                    this.waiting = true;
                    if silence.as_mut().poll(cx).is_ready() {
                        return this.fail(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "origin body: the origin went silent",
                        ));
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Ok(0)) if matches!(state, BodyState::UntilClose) => {
                    this.state = BodyState::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Poll::Ready(Ok(0)) => return this.fail(io::ErrorKind::UnexpectedEof.into()),
                // Something came: the next wait starts its own count.
                Poll::Ready(Ok(_)) => this.waiting = false,
                Poll::Ready(Err(e)) => return this.fail(e),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, BodyState::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            BodyState::Length(n) => SizeHint::with_exact(n),
            BodyState::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
