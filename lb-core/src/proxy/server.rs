//! The proxy's listeners: HTTP/1.1 and HTTP/2 (ALPN over TLS, prior knowledge in clear) on
//! hyper's automatic connection builder, with upgrades for WebSockets.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::handler::Proxy;

/// A running listener; it stops when dropped.
#[derive(Debug)]
pub struct ProxyListener {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for ProxyListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_connection<I>(proxy: Arc<Proxy>, io: I, peer: SocketAddr, tls: bool)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| {
        let proxy = Arc::clone(&proxy);
        async move { Ok::<_, Infallible>(proxy.handle(req, peer, tls).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(proxy_header_timeout())
        .max_buf_size(64 << 10);
    let _ = builder
        .serve_connection_with_upgrades(TokioIo::new(io), service)
        .await;
}

fn proxy_header_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(10)
}

/// Binds `addr` and serves it (TLS when `tls` is given).
pub async fn listen(
    proxy: Arc<Proxy>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<ProxyListener> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("proxy listener on {addr}: {e}")))?;
    let addr = listener.local_addr()?;
    let acceptor = tls.map(TlsAcceptor::from);
    let task = tokio::spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::debug!(error = %e, "proxy accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let proxy = Arc::clone(&proxy);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => {
                        if let Ok(Ok(tls_stream)) =
                            tokio::time::timeout(proxy_header_timeout(), acceptor.accept(stream))
                                .await
                        {
                            serve_connection(proxy, tls_stream, peer, true).await;
                        }
                    }
                    None => serve_connection(proxy, stream, peer, false).await,
                }
            });
        }
    });
    Ok(ProxyListener { addr, task })
}
