//! Open connections per origin, for `least_connections`: the client's connector wraps every
//! connection it opens in a guard that counts it under the origin's address until the pool
//! closes it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Counters by `host:port` (as the proxy writes origin URIs).
pub type ByAuthority = Arc<HashMap<String, Arc<AtomicU32>>>;

#[derive(Clone)]
pub struct CountingConnector {
    inner: HttpConnector,
    counters: ByAuthority,
}

impl CountingConnector {
    pub fn new(inner: HttpConnector, counters: ByAuthority) -> Self {
        CountingConnector { inner, counters }
    }
}

/// A connection counted while it is open.
pub struct CountedConnection {
    io: TokioIo<TcpStream>,
    counter: Option<Arc<AtomicU32>>,
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        if let Some(c) = &self.counter {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl tower_service::Service<Uri> for CountingConnector {
    type Response = CountedConnection;
    type Error = <HttpConnector as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<CountedConnection, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let counter = uri
            .authority()
            .and_then(|a| self.counters.get(a.as_str()))
            .cloned();
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            if let Some(c) = &counter {
                c.fetch_add(1, Ordering::Relaxed);
            }
            Ok(CountedConnection { io, counter })
        })
    }
}

impl Connection for CountedConnection {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

impl Read for CountedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for CountedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_service::Service;

    #[tokio::test]
    async fn open_connections_are_counted_until_closed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let counter = Arc::new(AtomicU32::new(0));
        let counters: ByAuthority =
            Arc::new(HashMap::from([(addr.to_string(), Arc::clone(&counter))]));
        let mut c = CountingConnector::new(HttpConnector::new(), counters);
        let uri: Uri = format!("http://{addr}/").parse().unwrap();
        let a = c.call(uri.clone()).await.unwrap();
        let b = c.call(uri).await.unwrap();
        assert_eq!(counter.load(Ordering::Relaxed), 2);
        drop(a);
        assert_eq!(counter.load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(counter.load(Ordering::Relaxed), 0);
        // An origin the table does not know is connected to, just not counted.
        let other: Uri = format!("http://localhost:{}/", addr.port())
            .parse()
            .unwrap();
        let _d = c.call(other).await.unwrap();
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
}
