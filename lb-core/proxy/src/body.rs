//! The one body type the proxy sends, both ways: nothing, bytes in hand, or a peer's body
//! streamed on (counted as outstanding until it ends). An enum rather than a boxed trait
//! object, so a request costs no allocation for its bodies (bench/proxy.sh).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

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
    /// An origin's response streamed to the client, its request outstanding until the end
    /// (boxed: it holds the origin connection, and would make every body, and every
    /// future holding one, several times larger).
    Counted(Box<Counted<OriginBody>>),
}

impl ProxyBody {
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
            ProxyBody::Stream(_) | ProxyBody::Counted(_) => None,
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
            ProxyBody::Counted(c) => Pin::new(&mut **c).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Empty => true,
            ProxyBody::Bytes(b) => b.is_none(),
            ProxyBody::Stream(s) => s.is_end_stream(),
            ProxyBody::Counted(c) => c.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Empty => SizeHint::with_exact(0),
            ProxyBody::Bytes(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            ProxyBody::Stream(s) => s.size_hint(),
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
