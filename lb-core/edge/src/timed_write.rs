//! A client connection whose writes may wait at most `send_timeout` for the client to take
//! them (nginx's `send_timeout`). A client that asks for a large answer and stops reading would
//! otherwise hold its connection for as long as it likes — on the proxy, with the origin
//! connection streaming into it and that origin's outstanding count (which
//! `least_outstanding_requests` reads); on an admin listener, with a connection slot and a
//! config-serving slot (`node/src/control/serve.rs`). The timer runs only while a write waits,
//! so a slow but reading client is never cut.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pub struct TimedWrite<I> {
    io: I,
    timeout: Duration,
    /// The counter of connections cut (`meshlb_proxy_send_timeouts_total`, ...).
    counter: &'static str,
    /// Armed while a write waits for the client.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<I> TimedWrite<I> {
    /// `io` whose writes may wait `timeout`; a cut is counted in the counter named `counter`.
    pub fn new(io: I, timeout: Duration, counter: &'static str) -> Self {
        TimedWrite {
            io,
            timeout,
            counter,
            waiting: None,
        }
    }

    /// After a write that could not go out: arm the timer (once) and report its expiry.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let timer = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                metrics::counter!(self.counter).increment(1);
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read its answer in time",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, r: io::Result<T>) -> Poll<io::Result<T>> {
        self.waiting = None;
        Poll::Ready(r)
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for TimedWrite<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for TimedWrite<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_write(cx, buf) {
            Poll::Ready(r) => me.progressed(r),
            Poll::Pending => me.stalled(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => me.progressed(r),
            Poll::Pending => me.stalled(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_flush(cx) {
            Poll::Ready(r) => me.progressed(r),
            Poll::Pending => me.stalled(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        match Pin::new(&mut me.io).poll_shutdown(cx) {
            Poll::Ready(r) => me.progressed(r),
            Poll::Pending => me.stalled(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_reader_that_stops_makes_the_write_fail_after_the_timeout() {
        let (ours, theirs) = tokio::io::duplex(1024);
        let mut w = TimedWrite::new(ours, Duration::from_millis(50), "cut");
        let big = vec![7u8; 64 * 1024];
        let err = tokio::time::timeout(Duration::from_secs(5), w.write_all(&big))
            .await
            .expect("ends in time")
            .expect_err("the write times out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        drop(theirs);
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_not_cut() {
        use tokio::io::AsyncReadExt;
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut w = TimedWrite::new(ours, Duration::from_millis(200), "cut");
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let mut got = 0;
            while got < 16 * 1024 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += theirs.read(&mut buf).await.expect("read");
            }
            got
        });
        w.write_all(&vec![1u8; 16 * 1024]).await.expect("written");
        assert!(reader.await.expect("reader") >= 16 * 1024);
    }
}
