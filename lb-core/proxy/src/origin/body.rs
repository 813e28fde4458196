//! A response body streamed from an origin: decoded by its framing (length, chunked with
//! trailers, or until the close), its connection given back for reuse once read to the end,
//! closed when dropped before, and given up when the origin goes silent too long.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use crate::origin::decode::{Decoder, Step};
use crate::origin::head::Framing;
use crate::origin::http1::{Conn, READ_RESERVE};

/// Where a connection goes once its response body has been read to the end.
pub type Release = Box<dyn FnOnce(Conn) + Send>;

/// A response body streamed from an origin; the connection goes back to the pool when the
/// body has been read to its end, and is closed when the body is dropped before that.
pub struct OriginBody {
    conn: Option<Conn>,
    decoder: Decoder,
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
        let decoder = Decoder::new(framing);
        let mut body = OriginBody {
            conn: Some(conn),
            decoder,
            release: keep_alive.then_some(release),
            idle_timeout,
            silence: None,
            waiting: false,
        };
        if body.decoder.is_done() {
            body.finish();
        }
        body
    }

    fn finish(&mut self) {
        self.decoder.stop();
        if let (Some(conn), Some(release)) = (self.conn.take(), self.release.take()) {
            release(conn);
        }
    }

    fn fail(&mut self, e: io::Error) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        self.decoder.stop();
        self.conn = None;
        Poll::Ready(Some(Err(e)))
    }
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
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match this.decoder.step(&mut conn.buf) {
                Step::Data(data) => {
                    if this.decoder.is_done() {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Step::Trailers(trailers) => {
                    this.finish();
                    return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                }
                Step::End => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Step::Broken(what) => return this.fail(broken(what)),
                Step::NeedMore => {}
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
                Poll::Ready(Ok(0)) if this.decoder.ends_at_close() => {
                    this.decoder.stop();
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
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoder.exact_left() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
