//! A connection with bytes already read from it put back in front, for handing a connection
//! that the proxy's own HTTP/1 server has started reading over to hyper.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Reads `prefix` first, then from `io`; writes go straight to `io`.
pub struct Prefixed<I> {
    prefix: Bytes,
    io: I,
}

impl<I> Prefixed<I> {
    pub fn new(prefix: Bytes, io: I) -> Self {
        Prefixed { prefix, io }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.prefix.has_remaining() {
            let n = me.prefix.len().min(buf.remaining());
            buf.put_slice(&me.prefix[..n]);
            me.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_prefix_is_read_before_the_connection() {
        let (mut far, near) = tokio::io::duplex(64);
        let mut p = Prefixed::new(Bytes::from_static(b"GET / "), near);
        far.write_all(b"HTTP/1.1\r\n").await.unwrap();
        drop(far);
        let mut all = String::new();
        p.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "GET / HTTP/1.1\r\n");
    }
}
