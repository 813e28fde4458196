//! The proxy's own HTTP/1.1 server for the requests that are nearly all of its traffic: keep-
//! alive requests without a body. It reads a head straight into `http` types sharing the read
//! buffer, runs the handler and writes the response head and a small body in one write, then
//! reads the next (pipelined requests are served in order). The first request it does not
//! take (a body, an upgrade, `Expect`, HTTP/1.0, a malformed or oversized head; see
//! `client/request_head.rs`) hands the connection, with everything read so far, to hyper's server for
//! the rest of its life.
//!
//! Why not hyper for all: on the benchmark's one core, hyper's connection dispatcher, its
//! per-request header timer and its response encoder cost more user time per request than
//! all of nginx's (bench/proxy.sh); this loop does the same work for these requests directly.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Method;
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::answer::Answer;
use crate::body::ProxyBody;
use crate::client::prefixed::Prefixed;
use crate::client::request_head::{build_request, parse_head, Head, Spans};
use crate::client::response::{
    encode_head, encode_origin_head, framing, map_fields, write_response, Framing,
};
use crate::lazy_timer::{deadline_after, LazyTimer};
use crate::origin::pool::Upstream;
use crate::route::{Begun, Peer, Proxy};
use lb_edge::Serving;

/// The read buffer's size (hyper's too); it grows for larger heads up to the limit.
const READ_BUFFER: usize = 8 << 10;
/// Read into the buffer only with at least this much room.
const MIN_READ_ROOM: usize = 1 << 10;

/// Room to read into: a full buffer would read 0 bytes, which reads as the end of stream.
fn make_room(buf: &mut BytesMut) {
    if buf.capacity() - buf.len() < MIN_READ_ROOM {
        buf.reserve(READ_BUFFER);
    }
}

/// How a connection ended here.
pub enum Served<I> {
    /// Closed: by the client, after `Connection: close`, on a timeout or an error.
    Done,
    /// Open, with a request this server does not take at the front of what was read.
    ToHyper(Prefixed<I>),
}

/// The time allowed for a request head, from when the server starts waiting for it (an idle
/// keep-alive connection included, as hyper's `header_read_timeout`). One timer per
/// connection, moved only when it fires: re-arming a timer per request costs two timer-wheel
/// updates per request.
struct HeadTimer {
    limit: Duration,
    deadline: Instant,
    timer: LazyTimer,
}

impl HeadTimer {
    fn new(limit: Duration) -> Self {
        HeadTimer {
            limit,
            deadline: deadline_after(limit),
            timer: LazyTimer::default(),
        }
    }

    fn start(&mut self) {
        self.deadline = deadline_after(self.limit);
    }

    /// Reads more of the head into `buf`; `Ok(0)` when the client closed, `TimedOut` when
    /// the head's time is up.
    async fn read<I: AsyncRead + Unpin>(
        &mut self,
        io: &mut I,
        buf: &mut BytesMut,
    ) -> io::Result<usize> {
        make_room(buf);
        let deadline = self.deadline;
        poll_fn(|cx| {
            if let Poll::Ready(read) = tokio_util::io::poll_read_buf(Pin::new(&mut *io), cx, buf) {
                return Poll::Ready(read);
            }
            self.timer
                .poll_passed(deadline, cx)
                .map(|()| Err(io::ErrorKind::TimedOut.into()))
        })
        .await
    }
}

/// Serves `io` until it closes or a request for hyper arrives. Each request is served by the
/// proxy `serving` holds when its head has arrived, so a keep-alive connection takes a reload
/// from its next request on. Per request: the head read, the request built, answered here or
/// forwarded while the client is watched, the answer's head encoded and the answer written.
pub async fn serve<I>(
    serving: &Serving<Proxy>,
    upstream: &Arc<Upstream>,
    peer: &Peer,
    mut io: I,
) -> Served<I>
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let mut proxy = serving.load_full();
    let max_head = proxy.settings.max_header_bytes;
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let mut out = Vec::with_capacity(1 << 10);
    let mut spans = Spans::default();
    let mut timer = HeadTimer::new(proxy.settings.header_read_timeout);
    // The origins' answer timeout, on one timer for the connection's requests.
    let mut answer_timer = LazyTimer::default();
    loop {
        timer.start();
        let (len, close) = loop {
            match within_limit(parse_head(&buf, &mut spans), buf.len(), max_head) {
                Head::Complete { len, close } => break (len, close),
                Head::ForHyper => return Served::ToHyper(Prefixed::new(buf.freeze(), io)),
                Head::Partial => {}
            }
            match timer.read(&mut io, &mut buf).await {
                Ok(0) | Err(_) => return Served::Done,
                Ok(_) => {}
            }
        };
        let head = buf.split_to(len).freeze();
        let Some(req) = build_request(&head, &spans) else {
            return Served::ToHyper(Prefixed::new(unread(&head, &buf), io));
        };
        drop(head);
        take_reload(serving, &mut proxy);
        let head_request = req.method() == Method::HEAD;
        let answer = match proxy.begin(req, peer) {
            Begun::Answered(response) => Answer::Made(response),
            Begun::Forward(forwarding) => {
                // Awaited here rather than in a helper: each async layer is a future copied
                // into place for every request.
                let mut forwarding = pin!(proxy.forward(upstream, forwarding, &mut answer_timer));
                make_room(&mut buf);
                let mut watching = true;
                let answered = poll_fn(|cx| {
                    poll_watching(forwarding.as_mut(), &mut io, &mut buf, &mut watching, cx)
                })
                .await;
                match answered {
                    Some(answer) => answer,
                    None => return Served::Done,
                }
            }
        };
        let (body, framing) = encode_answer(&mut out, answer, head_request, close);
        if write_response(&mut io, &mut out, body, framing)
            .await
            .is_err()
        {
            return Served::Done;
        }
        if close {
            let _ = io.shutdown().await;
            return Served::Done;
        }
    }
}

/// `parse_head`'s verdict with the size limit applied: a head over `max_head` bytes, whole
/// or not yet (`buffered` bytes read), is hyper's, which answers it (431) however it arrived.
#[inline]
fn within_limit(head: Head, buffered: usize, max_head: usize) -> Head {
    match head {
        Head::Complete { len, .. } if len > max_head => Head::ForHyper,
        Head::Partial if buffered >= max_head => Head::ForHyper,
        head => head,
    }
}

/// A head `build_request` did not take and the bytes read after it, for hyper to read again.
fn unread(head: &[u8], rest: &[u8]) -> Bytes {
    let mut unread = BytesMut::from(head);
    unread.extend_from_slice(rest);
    unread.freeze()
}

/// Takes the proxy `serving` holds now, when a reload has replaced the one in hand.
#[inline]
fn take_reload(serving: &Serving<Proxy>, proxy: &mut Arc<Proxy>) {
    let current = serving.load();
    if !Arc::ptr_eq(&current, proxy) {
        *proxy = arc_swap::Guard::into_inner(current);
    }
}

/// Polls the forwarding, and meanwhile watches the client: when it goes away (end of stream
/// or an error) before the answer, `None`, and the caller drops the forwarding, and with it
/// the exchange with the origin, as hyper's server and nginx (`proxy_ignore_client_abort
/// off`) do. Bytes that arrive meanwhile (a pipelined request) are kept in `buf`, and the
/// watch ends (`watching`).
#[inline]
fn poll_watching<F, I>(
    forwarding: Pin<&mut F>,
    io: &mut I,
    buf: &mut BytesMut,
    watching: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Option<Answer>>
where
    F: Future<Output = Answer>,
    I: AsyncRead + Unpin,
{
    if let Poll::Ready(answer) = forwarding.poll(cx) {
        return Poll::Ready(Some(answer));
    }
    if *watching {
        match tokio_util::io::poll_read_buf(Pin::new(io), cx, buf) {
            Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(None),
            Poll::Ready(Ok(_)) => *watching = false,
            Poll::Pending => {}
        }
    }
    Poll::Pending
}

/// Encodes the answer's head into `out`, framed for the request (`head_request`: a HEAD) and
/// the connection (`close`), and returns the body to write after it and how. The proxy's own
/// answer gives its header map back for the worker's next request; the origin's fields go
/// out as they lie in its head.
#[inline]
fn encode_answer(
    out: &mut Vec<u8>,
    answer: Answer,
    head_request: bool,
    close: bool,
) -> (ProxyBody, Framing) {
    let status = answer.status();
    match answer {
        Answer::Made(response) => {
            let (parts, body) = response.into_parts();
            let framing = framing(head_request, status, Body::size_hint(&body).exact());
            encode_head(out, status, map_fields(&parts.headers), framing, close);
            crate::header_maps::give_back(parts.headers);
            (body, framing)
        }
        Answer::Origin(head, body) => {
            let framing = framing(head_request, status, Body::size_hint(&body).exact());
            encode_origin_head(out, &head, framing, close);
            (body, framing)
        }
    }
}

#[cfg(test)]
mod tests;
