//! HTTP/1.1 to origins on a connection the request's own task drives: the request head
//! written in one go (with the body when it is small and in hand), the response head parsed
//! with httparse, the body framed by Content-Length, chunked coding or the connection's end.
//!
//! Why not hyper's client connection: it is a task of its own, fed requests through a channel
//! and sending the response and its body back through others, so every proxied request took
//! task hops through channels. Measured with bench/proxy.sh (CPU per request, alternating
//! builds): ~10 % less user time per request, and with the origin writes batched
//! (`origin/pool.rs`) ~10 % less CPU per request in all. The proxy keeps hyper towards its
//! clients (HTTP/1.1 and HTTP/2, upgrades, timeouts); this side speaks only HTTP/1.1, which
//! is what origins behind a load balancer speak.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Waker};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Method;
use http_body_util::BodyExt;
use hyper::body::Body;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::either::Either;

use crate::body::ProxyBody;
use crate::headers::Forwarded;
use crate::origin::head::{head_end, interpret, HeadError, ResponseHead, MAX_HEAD_BYTES};

/// The read buffer grows by at least this much when it is full.
pub(super) const READ_RESERVE: usize = 8 << 10;
/// Request bodies up to this size go out in the same write as the head.
const COALESCE_BODY_UP_TO: usize = 16 << 10;

/// The byte stream to an origin: plain TCP or TLS.
pub type Io = Either<TcpStream, Box<dyn OriginStream>>;

/// A connection to an origin that is not plain TCP: TLS, a stream through a tunnel
/// (`lb_edge::private_dial`), or TLS over such a stream.
pub trait OriginStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> OriginStream for T {}

/// Counts a connection as open (for least_connections) while it exists.
struct OpenCount(Option<Arc<AtomicU32>>);

impl Drop for OpenCount {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// An open connection to an origin with the bytes read from it but not used yet.
pub struct Conn {
    pub(super) io: Io,
    pub(super) buf: BytesMut,
    /// The request head is put together here (kept to reuse its allocation).
    out: Vec<u8>,
    _open: OpenCount,
}

/// What the origin is sent: the prepared request of the proxy, by reference, so that a
/// retry sends it again without a copy.
pub struct RequestHead<'a> {
    pub method: &'a Method,
    /// Origin-form target: path and query.
    pub target: &'a str,
    /// Hop-by-hop headers already removed, `Host` set.
    pub headers: &'a HeaderMap,
    /// `X-Forwarded-*`, written after `headers`.
    pub forwarded: Option<&'a Forwarded>,
    /// Replaces the `Host` in `headers` (the endpoint's host header override).
    pub host: Option<&'a HeaderValue>,
    /// The client takes trailer fields (HTTP/2, or `TE: trailers`): this hop asks the origin
    /// for them too (`TE` is hop-by-hop, so the client's own does not go on).
    pub trailers: bool,
}

fn write_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Whether a request of this method carries a body by convention, so that an empty one is
/// announced with `Content-Length: 0` (RFC 9110 section 8.6).
fn expects_body(method: &Method) -> bool {
    *method == Method::POST || *method == Method::PUT || *method == Method::PATCH
}

impl Conn {
    pub fn new(io: Io, open: Option<Arc<AtomicU32>>) -> Conn {
        if let Some(c) = &open {
            c.fetch_add(1, Ordering::Relaxed);
        }
        Conn {
            io,
            buf: BytesMut::new(),
            out: Vec::new(),
            _open: OpenCount(open),
        }
    }

    /// Whether an idle connection can take a request: nothing to read on it (neither the
    /// origin's close nor stray bytes) without waiting.
    pub fn is_idle_and_open(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut probe = ReadBuf::new(&mut byte);
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut probe)
            .is_pending()
    }

    /// Sends the request head and, when small and in hand, the body in the same write. A
    /// streamed body is handed back, with whether it goes chunked (its length unknown), for
    /// `upload_and_read_head`.
    pub async fn write_request(
        &mut self,
        req: &RequestHead<'_>,
        body: ProxyBody,
    ) -> io::Result<Option<(ProxyBody, bool)>> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.extend_from_slice(req.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(req.target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        if let Some(host) = req.host {
            write_header(&mut out, b"host", host.as_bytes());
        }
        if req.trailers {
            // A sender of TE lists it in Connection (RFC 9110 section 10.1.4).
            out.extend_from_slice(b"te: trailers\r\nconnection: te\r\n");
        }
        let mut had_length = false;
        for (name, value) in req.headers {
            if *name == header::CONTENT_LENGTH {
                had_length = true;
                continue;
            }
            // Framing is this hop's to choose; the Host may be overridden.
            if *name == header::TRANSFER_ENCODING || (req.host.is_some() && *name == header::HOST) {
                continue;
            }
            write_header(&mut out, name.as_str().as_bytes(), value.as_bytes());
        }
        if let Some(forwarded) = req.forwarded {
            forwarded.write_to(&mut out);
        }
        let result = match body {
            ProxyBody::Empty | ProxyBody::Bytes(None) => {
                if had_length || expects_body(req.method) {
                    crate::headers::write_content_length(&mut out, 0);
                }
                out.extend_from_slice(b"\r\n");
                self.io.write_all(&out).await
            }
            ProxyBody::Bytes(Some(bytes)) => {
                crate::headers::write_content_length(&mut out, bytes.len() as u64);
                out.extend_from_slice(b"\r\n");
                if bytes.len() <= COALESCE_BODY_UP_TO {
                    out.extend_from_slice(&bytes);
                    self.io.write_all(&out).await
                } else {
                    match self.io.write_all(&out).await {
                        Ok(()) => self.io.write_all(&bytes).await,
                        Err(e) => Err(e),
                    }
                }
            }
            streamed => {
                let length = streamed.size_hint().exact();
                match length {
                    Some(n) => crate::headers::write_content_length(&mut out, n),
                    None => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
                }
                out.extend_from_slice(b"\r\n");
                match self.io.write_all(&out).await {
                    Ok(()) => {
                        self.out = out;
                        return Ok(Some((streamed, length.is_none())));
                    }
                    Err(e) => Err(e),
                }
            }
        };
        self.out = out;
        result?;
        self.io.flush().await?;
        Ok(None)
    }

    /// Streams the request body while reading the response head: an origin may answer
    /// (413, 401, a redirect) before it has read the whole body, and stop reading it. The
    /// head comes with whether the whole body went out; when not, the connection is not
    /// reused. A client body that breaks off ends the exchange.
    pub async fn upload_and_read_head(
        &mut self,
        body: ProxyBody,
        chunked: bool,
        method: &Method,
    ) -> Result<(ResponseHead, bool), HeadError> {
        let Conn { io, buf, .. } = self;
        let (mut from_origin, mut to_origin) = tokio::io::split(io);
        // Boxed, being rare and large: every request's future would carry them.
        let mut upload = Box::pin(upload(&mut to_origin, body, chunked));
        let mut head = Box::pin(read_head_from(&mut from_origin, buf, method));
        let mut sent = false;
        let mut uploading = true;
        loop {
            tokio::select! {
                done = &mut upload, if uploading => {
                    uploading = false;
                    match done {
                        Ok(()) => sent = true,
                        Err(Upload::ClientBody) => return Err(HeadError::Broken),
                        // The origin stopped reading: what it answered may still be there.
                        Err(Upload::Origin) => {}
                    }
                }
                head = &mut head => return head.map(|h| (h, sent)),
            }
        }
    }

    /// Reads the response head, skipping interim (1xx) responses other than 101.
    pub async fn read_head(&mut self, method: &Method) -> Result<ResponseHead, HeadError> {
        read_head_from(&mut self.io, &mut self.buf, method).await
    }

    /// Reads a body of `n` bytes whole.
    pub async fn read_body(&mut self, n: usize) -> io::Result<Bytes> {
        while self.buf.len() < n {
            self.buf.reserve(n - self.buf.len());
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buf.split_to(n).freeze())
    }

    /// The connection as a tunnel (after a 101), with what the origin already sent on it.
    pub fn into_tunnel(self) -> (Io, Bytes) {
        (self.io, self.buf.freeze())
    }
}

/// Reads a response head from `io` into `buf`, skipping interim (1xx) responses but 101.
async fn read_head_from<R: AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut BytesMut,
    method: &Method,
) -> Result<ResponseHead, HeadError> {
    let mut got_any = !buf.is_empty();
    loop {
        // Found by its empty line, so that a complete head is parsed once (in `interpret`).
        match head_end(buf) {
            Some(n) => {
                let head = buf.split_to(n).freeze();
                match interpret(&head, method)? {
                    Some(h) => return Ok(h),
                    None => continue, // an interim response
                }
            }
            None if buf.len() >= MAX_HEAD_BYTES => return Err(HeadError::Broken),
            None => {}
        }
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(READ_RESERVE);
        }
        match io.read_buf(buf).await {
            Ok(0) | Err(_) if !got_any => return Err(HeadError::NothingBack),
            Ok(0) | Err(_) => return Err(HeadError::Broken),
            Ok(_) => got_any = true,
        }
    }
}

/// Which side of an upload failed.
enum Upload {
    /// The client's body broke off.
    ClientBody,
    /// Writing to the origin failed.
    Origin,
}

/// Sends a streamed request body, chunked or as is, flushing after each piece (a TLS
/// stream may hold data back otherwise while the client pauses).
async fn upload<W: AsyncWrite + Unpin>(
    to_origin: &mut W,
    mut body: ProxyBody,
    chunked: bool,
) -> Result<(), Upload> {
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Upload::ClientBody)?;
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                // Trailers go out after the last chunk; a body sent with its length has no
                // place for them (as when an HTTP/1 client sends them to a plain origin).
                trailers = frame.into_trailers().ok();
                continue;
            }
        };
        if data.is_empty() {
            continue;
        }
        let written = if chunked {
            let size = format!("{:x}\r\n", data.len());
            let mut parts = [
                io::IoSlice::new(size.as_bytes()),
                io::IoSlice::new(&data),
                io::IoSlice::new(b"\r\n"),
            ];
            write_all_vectored(to_origin, &mut parts).await
        } else {
            to_origin.write_all(&data).await
        };
        written.map_err(|_| Upload::Origin)?;
        to_origin.flush().await.map_err(|_| Upload::Origin)?;
    }
    if chunked {
        let mut end = b"0\r\n".to_vec();
        for (name, value) in trailers.iter().flatten() {
            if forwardable_trailer(name) {
                write_header(&mut end, name.as_str().as_bytes(), value.as_bytes());
            }
        }
        end.extend_from_slice(b"\r\n");
        to_origin
            .write_all(&end)
            .await
            .map_err(|_| Upload::Origin)?;
    }
    to_origin.flush().await.map_err(|_| Upload::Origin)
}

/// Whether a trailer field of a request may be passed on: not one that frames, routes or
/// controls the message (RFC 9110 section 6.5.1, the list hyper applies to the trailers it
/// sends), nor a hop-by-hop field.
fn forwardable_trailer(name: &HeaderName) -> bool {
    !matches!(
        *name,
        header::AUTHORIZATION
            | header::CACHE_CONTROL
            | header::CONTENT_ENCODING
            | header::CONTENT_LENGTH
            | header::CONTENT_RANGE
            | header::CONTENT_TYPE
            | header::HOST
            | header::MAX_FORWARDS
            | header::SET_COOKIE
            | header::TRAILER
            | header::TRANSFER_ENCODING
            | header::TE
            | header::CONNECTION
            | header::UPGRADE
            | header::PROXY_AUTHORIZATION
            | header::PROXY_AUTHENTICATE
    ) && name.as_str() != "keep-alive"
}

async fn write_all_vectored<W: AsyncWrite + Unpin>(
    io: &mut W,
    parts: &mut [io::IoSlice<'_>],
) -> io::Result<()> {
    let mut parts = parts;
    while !parts.is_empty() {
        let n = io.write_vectored(parts).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut parts, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
