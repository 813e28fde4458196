//! One HTTP/2 stream as a byte stream: what the PoP hands the proxy for a connection through
//! a tunnel, and what the connector copies to the private endpoint. Data read is given back
//! to the peer's window at once (the copy on the other side is the flow control); a write
//! waits for window, so a slow reader holds back its writer instead of filling memory.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes one write asks window for.
const MAX_CHUNK: usize = 64 * 1024;

pub struct TunnelStream {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// Received and not yet read.
    pending: Bytes,
    ended: bool,
}

impl TunnelStream {
    pub(crate) fn new(send: SendStream<Bytes>, recv: RecvStream) -> TunnelStream {
        TunnelStream {
            send,
            recv,
            pending: Bytes::new(),
            ended: false,
        }
    }
}

fn io_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::other("tunnel connection"));
    }
    io::Error::new(io::ErrorKind::ConnectionReset, e)
}

impl AsyncRead for TunnelStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.pending = data;
                }
                Some(Err(e)) if e.reason() == Some(h2::Reason::NO_ERROR) => {
                    return Poll::Ready(Ok(()));
                }
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                None => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl AsyncWrite for TunnelStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.send.reserve_capacity(buf.len().min(MAX_CHUNK));
        loop {
            match ready!(self.send.poll_capacity(cx)) {
                Some(Ok(0)) => continue,
                Some(Ok(room)) => {
                    let n = room.min(buf.len());
                    self.send
                        .send_data(Bytes::copy_from_slice(&buf[..n]), false)
                        .map_err(io_error)?;
                    return Poll::Ready(Ok(n));
                }
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                None => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "the tunnel stream was closed",
                    )))
                }
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.ended {
            self.ended = true;
            self.send.send_data(Bytes::new(), true).map_err(io_error)?;
        }
        Poll::Ready(Ok(()))
    }
}

/// Opens a stream: a `POST` to `path` with `headers` on one of the peer's connections.
/// `Err(Some(status))` when the peer refused it, `Err(None)` when the connection could not
/// carry it.
pub(crate) async fn open(
    send: h2::client::SendRequest<Bytes>,
    path: &str,
    headers: &[(&str, String)],
) -> Result<TunnelStream, Option<u16>> {
    let mut send = send.ready().await.map_err(|_| None)?;
    let mut request = http::Request::post(format!("http://tunnel{path}"));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(()).map_err(|_| None)?;
    let (response, body) = send.send_request(request, false).map_err(|_| None)?;
    let response = response.await.map_err(|_| None)?;
    if response.status() != http::StatusCode::OK {
        return Err(Some(response.status().as_u16()));
    }
    Ok(TunnelStream::new(body, response.into_body()))
}

/// A stream's answer head with no more than its status.
pub(crate) fn status(code: u16) -> http::Response<()> {
    http::Response::builder()
        .status(code)
        .body(())
        .unwrap_or_default()
}

/// The most bytes read from TCP into one DATA frame's buffer.
const SPLICE_CHUNK: usize = 16 * 1024;

/// Copies a stream and a TCP connection both ways until both have ended (each end's FIN
/// passed on) or either fails. Unlike `tokio::io::copy_bidirectional` it holds no buffer
/// while idle: DATA from the peer is written to TCP as h2 hands it over, and a buffer for TCP
/// is taken only once the socket is readable and handed to h2 whole (no copy). An idle stream
/// then costs its h2 state and its socket, not 16 KiB of buffers (bench/tunnel.sh measures
/// the connector with 10,000 idle streams).
pub(crate) async fn splice(
    mut send: SendStream<Bytes>,
    mut recv: RecvStream,
    tcp: &mut tokio::net::TcpStream,
) {
    use tokio::io::AsyncWriteExt;
    let (tcp_read, mut tcp_write) = tcp.split();
    let up = async {
        loop {
            tcp_read.readable().await.map_err(drop)?;
            let mut buf = bytes::BytesMut::with_capacity(SPLICE_CHUNK);
            match tcp_read.try_read_buf(&mut buf) {
                Ok(0) => return send.send_data(Bytes::new(), true).map_err(drop),
                Ok(_) => send_all(&mut send, buf.freeze()).await?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(()),
            }
        }
    };
    let down = async {
        while let Some(data) = recv.data().await {
            let data = data.map_err(drop)?;
            let _ = recv.flow_control().release_capacity(data.len());
            tcp_write.write_all(&data).await.map_err(drop)?;
        }
        tcp_write.shutdown().await.map_err(drop)
    };
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            r = &mut up, if !up_done => match r {
                Ok(()) => up_done = true,
                Err(()) => return,
            },
            r = &mut down, if !down_done => match r {
                Ok(()) => down_done = true,
                Err(()) => return,
            },
        }
    }
}

/// Sends `data` as the peer's window allows, in pieces of it (no copy).
async fn send_all(send: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), ()> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let room = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .ok_or(())?
            .map_err(drop)?;
        if room == 0 {
            continue;
        }
        let piece = data.split_to(room.min(data.len()));
        send.send_data(piece, false).map_err(drop)?;
    }
    Ok(())
}
