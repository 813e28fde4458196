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
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use http::Method;
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::answer::Answer;
use crate::client::prefixed::Prefixed;
use crate::client::request_head::{build_request, parse_head, Head, Spans};
use crate::client::response::{
    encode_head, encode_origin_head, framing, map_fields, write_response,
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
/// from its next request on.
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
            match parse_head(&buf, &mut spans) {
                // hyper answers a head over the limit (431), however it arrived.
                Head::Complete { len, .. } if len > max_head => {
                    return Served::ToHyper(Prefixed::new(buf.freeze(), io))
                }
                Head::Complete { len, close } => break (len, close),
                Head::ForHyper => return Served::ToHyper(Prefixed::new(buf.freeze(), io)),
                // hyper answers an oversized head (431).
                Head::Partial if buf.len() >= max_head => {
                    return Served::ToHyper(Prefixed::new(buf.freeze(), io))
                }
                Head::Partial => {}
            }
            match timer.read(&mut io, &mut buf).await {
                Ok(0) | Err(_) => return Served::Done,
                Ok(_) => {}
            }
        };
        let head = buf.split_to(len).freeze();
        let Some(req) = build_request(&head, &spans) else {
            let mut unread = BytesMut::from(&head[..]);
            unread.extend_from_slice(&buf);
            return Served::ToHyper(Prefixed::new(unread.freeze(), io));
        };
        drop(head);
        {
            let current = serving.load();
            if !Arc::ptr_eq(&current, &proxy) {
                proxy = arc_swap::Guard::into_inner(current);
            }
        }
        let head_request = req.method() == Method::HEAD;
        let answer = match proxy.begin(req, peer) {
            Begun::Answered(response) => Answer::Made(response),
            Begun::Forward(forwarding) => {
                // Awaited here rather than in a helper: each async layer is a future copied
                // into place for every request.
                let mut forwarding = pin!(proxy.forward(upstream, forwarding, &mut answer_timer));
                make_room(&mut buf);
                // While the request is out, the client is watched: when it goes away (end of
                // stream or an error) before the answer, the forwarding is dropped, and with
                // it the exchange with the origin, as hyper's server and nginx
                // (`proxy_ignore_client_abort off`) do. Bytes that arrive meanwhile (a
                // pipelined request) are kept in `buf`, and the watch ends.
                let mut watching = true;
                let answered = poll_fn(|cx| {
                    if let Poll::Ready(answer) = forwarding.as_mut().poll(cx) {
                        return Poll::Ready(Some(answer));
                    }
                    if watching {
                        match tokio_util::io::poll_read_buf(Pin::new(&mut io), cx, &mut buf) {
                            Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(None),
                            Poll::Ready(Ok(_)) => watching = false,
                            Poll::Pending => {}
                        }
                    }
                    Poll::Pending
                })
                .await;
                match answered {
                    Some(answer) => answer,
                    None => return Served::Done,
                }
            }
        };
        let status = answer.status();
        let (body, framing) = match answer {
            Answer::Made(response) => {
                let (parts, body) = response.into_parts();
                let framing = framing(head_request, status, Body::size_hint(&body).exact());
                encode_head(&mut out, status, map_fields(&parts.headers), framing, close);
                crate::header_maps::give_back(parts.headers);
                (body, framing)
            }
            // The origin's fields go out as they lie in its head.
            Answer::Origin(head, body) => {
                let framing = framing(head_request, status, Body::size_hint(&body).exact());
                encode_origin_head(&mut out, &head, framing, close);
                (body, framing)
            }
        };
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

#[cfg(test)]
mod tests;
