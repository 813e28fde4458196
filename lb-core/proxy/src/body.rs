//! The one body type the proxy sends, both ways: nothing, bytes in hand, or a peer's body
//! streamed on (counted as outstanding until it ends). An enum rather than a boxed trait
//! object, so a request costs no allocation for its bodies (bench/proxy.sh).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use crate::live::Counted;
use crate::origin::body::OriginBody;

pub enum ProxyBody {
    Empty,
    /// A whole body, sent as one frame (taken when sent).
    Bytes(Option<Bytes>),
    /// A client's request body streamed to the origin.
    Stream(Incoming),
    /// A client's request body, read within the body timeouts (boxed: its timer is large).
    Client(Box<ClientBody>),
    /// An origin's response streamed to the client, its request outstanding until the end
    /// (boxed: it holds the origin connection, and would make every body, and every
    /// future holding one, several times larger).
    Counted(Box<Counted<OriginBody>>),
}

/// A client's request body, read within bounds: at most `per_read` waiting for its next
/// frame, at most `whole` for all of it. A client that announces a body and dribbles it (or
/// sends nothing) gets an error (`TimedOut`) instead of holding its connection, its task
/// and, streamed, an origin connection forever.
pub struct ClientBody {
    inner: Incoming,
    per_read: Duration,
    deadline: tokio::time::Instant,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The timer counts a wait now (armed at the first pending poll after progress).
    armed: bool,
}

impl ClientBody {
    pub fn new(inner: Incoming, per_read: Duration, whole: Duration) -> Self {
        ClientBody {
            inner,
            per_read,
            deadline: tokio::time::Instant::now() + whole,
            timer: None,
            armed: false,
        }
    }

    fn next_deadline(&self) -> tokio::time::Instant {
        (tokio::time::Instant::now() + self.per_read).min(self.deadline)
    }
}

/// The error of a request body that timed out.
pub fn body_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the request body timed out")
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let me = &mut *self;
        match Pin::new(&mut me.inner).poll_frame(cx) {
            Poll::Ready(f) => {
                // Progress: the next wait starts when the next poll has to wait (not now: the
                // proxy may not read on while the origin pushes back).
                me.armed = false;
                Poll::Ready(f.map(|r| r.map_err(io::Error::other)))
            }
            Poll::Pending => {
                if !me.armed {
                    let at = me.next_deadline();
                    match me.timer.as_mut() {
                        Some(t) => t.as_mut().reset(at),
                        None => me.timer = Some(Box::pin(tokio::time::sleep_until(at))),
                    }
                    me.armed = true;
                }
                match me.timer.as_mut().map(|t| t.as_mut().poll(cx)) {
                    Some(Poll::Ready(())) => Poll::Ready(Some(Err(body_timed_out()))),
                    _ => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl ProxyBody {
    /// A client's request body under the body timeouts.
    pub fn client(inner: Incoming, per_read: Duration, whole: Duration) -> ProxyBody {
        ProxyBody::Client(Box::new(ClientBody::new(inner, per_read, whole)))
    }

    pub fn bytes(b: impl Into<Bytes>) -> ProxyBody {
        let b = b.into();
        if b.is_empty() {
            ProxyBody::Empty
        } else {
            ProxyBody::Bytes(Some(b))
        }
    }

    /// A copy to send again, when the body is in hand (not streamed).
    pub fn replayable(&self) -> Option<ProxyBody> {
        match self {
            ProxyBody::Empty => Some(ProxyBody::Empty),
            ProxyBody::Bytes(b) => Some(ProxyBody::Bytes(b.clone())),
            ProxyBody::Stream(_) | ProxyBody::Client(_) | ProxyBody::Counted(_) => None,
        }
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        match self.get_mut() {
            ProxyBody::Empty => Poll::Ready(None),
            ProxyBody::Bytes(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Stream(s) => Pin::new(s)
                .poll_frame(cx)
                .map(|f| f.map(|r| r.map_err(io::Error::other))),
            ProxyBody::Client(c) => Pin::new(&mut **c).poll_frame(cx),
            ProxyBody::Counted(c) => Pin::new(&mut **c).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Empty => true,
            ProxyBody::Bytes(b) => b.is_none(),
            ProxyBody::Stream(s) => s.is_end_stream(),
            ProxyBody::Client(c) => c.is_end_stream(),
            ProxyBody::Counted(c) => c.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Empty => SizeHint::with_exact(0),
            ProxyBody::Bytes(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Stream(s) => s.size_hint(),
            ProxyBody::Client(c) => c.size_hint(),
            ProxyBody::Counted(c) => c.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn whole_bodies_are_one_frame_of_known_size() {
        let b = ProxyBody::bytes("hello");
        assert_eq!(b.size_hint().exact(), Some(5));
        assert!(!b.is_end_stream());
        assert_eq!(b.collect().await.expect("body").to_bytes(), "hello");
        let e = ProxyBody::bytes(Bytes::new());
        assert!(e.is_end_stream());
        assert_eq!(e.size_hint().exact(), Some(0));
    }
}
