//! Writing a response to an HTTP/1.1 client for the proxy's own server, as hyper's server
//! frames it: a `Date` when the response has none, one `Content-Length` when the body's size
//! is known and chunked transfer otherwise, no body for HEAD, 1xx, 204 and 304 (a HEAD answer
//! keeps the origin's length, or gets the length of the body it would have had), and trailers
//! dropped (the server only takes requests without `TE: trailers`). One difference: a status
//! without a standard reason phrase goes out with an empty one (`HTTP/1.1 530 `), where
//! hyper writes `<none>`.

use std::cell::RefCell;
use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http::StatusCode;
use http_body_util::BodyExt;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::body::ProxyBody;
use crate::headers::{is_named, write_content_length};
use crate::origin::head::OriginHead;

/// Bodies up to this size are copied behind the head, so both go out in one write.
const COPY_BODY_UP_TO: usize = 16 << 10;

/// How the body goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// None at all (HEAD, 1xx, 204, 304).
    None,
    /// None, answering HEAD for a body of this many bytes (announced when no length is).
    HeadOf(u64),
    /// Exactly this many bytes, announced by `Content-Length`.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// How the response to a request of `method` with a body hinted `exact` is framed.
pub fn framing(head_request: bool, status: StatusCode, exact: Option<u64>) -> Framing {
    if head_request {
        // The proxy's own answers (404, 530, fixed responses) say how long they would be.
        return match exact {
            Some(n) if n > 0 => Framing::HeadOf(n),
            _ => Framing::None,
        };
    }
    if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Framing::None;
    }
    match exact {
        Some(n) => Framing::Length(n),
        None => Framing::Chunked,
    }
}

thread_local! {
    /// The `Date` value, formatted once a second per worker thread.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

fn append_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != secs {
            *date = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date.1.as_bytes());
        out.extend_from_slice(b"\r\n");
    });
}

fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// What ends every head: the framing fields, `Date` when there was none, `Connection:
/// close` when asked, and the empty line.
fn end_head(out: &mut Vec<u8>, framing: Framing, had_length: bool, had_date: bool, close: bool) {
    match framing {
        // One length, the body's (an origin may have sent the field twice).
        Framing::Length(n) => write_content_length(out, n),
        Framing::HeadOf(n) if !had_length => write_content_length(out, n),
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        Framing::None | Framing::HeadOf(_) => {}
    }
    if !had_date {
        append_date(out);
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Encodes the status line and header fields (name and value each) into `out`, setting the
/// framing headers; `close` adds `Connection: close`.
/// The framing fields are this server's: the head's own `Transfer-Encoding` never goes
/// out, nor its `Content-Length` unless a HEAD answer keeps the length announced for GET.
/// Filtered while writing rather than removed before.
pub fn encode_head<'a>(
    out: &mut Vec<u8>,
    status: StatusCode,
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    framing: Framing,
    close: bool,
) {
    let keep_length = matches!(framing, Framing::None | Framing::HeadOf(_));
    status_line(out, status);
    let (mut had_length, mut had_date) = (false, false);
    for (name, value) in fields {
        // By length first: most names are of neither length.
        match name.len() {
            17 if is_named(name, b"transfer-encoding") => continue,
            14 if is_named(name, b"content-length") => {
                had_length = true;
                if !keep_length {
                    continue;
                }
            }
            4 if is_named(name, b"date") => had_date = true,
            _ => {}
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    end_head(out, framing, had_length, had_date, close);
}

/// `encode_head` for an origin's answer, its lines copied as they lie in its head (which
/// hold neither `Transfer-Encoding` nor `Content-Length`: `origin/head.rs`, `interpret`). An
/// answer without a body announces the length the origin did, as one field (HEAD's, 304's;
/// never a 204's, RFC 9110 section 8.6, as hyper's server); one with a body, this hop's.
pub fn encode_origin_head(out: &mut Vec<u8>, head: &OriginHead, framing: Framing, close: bool) {
    let fields = &head.fields;
    status_line(out, head.status);
    fields.write_lines(out);
    let bodiless = matches!(framing, Framing::None | Framing::HeadOf(_));
    let announced = fields
        .length()
        .filter(|_| bodiless && head.status != StatusCode::NO_CONTENT);
    if let Some(n) = announced {
        write_content_length(out, n);
    }
    end_head(out, framing, announced.is_some(), fields.has_date(), close);
}

/// The fields of a header map as `encode_head` takes them.
pub fn map_fields(headers: &HeaderMap) -> impl Iterator<Item = (&[u8], &[u8])> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
}

/// Writes `body` after the head in `out` (which it leaves empty) as `framing` says. An
/// error (the client went away, the origin's body broke off) means the connection cannot
/// carry another response.
pub async fn write_response<W: AsyncWrite + Unpin>(
    io: &mut W,
    out: &mut Vec<u8>,
    body: ProxyBody,
    framing: Framing,
) -> io::Result<()> {
    let result = write_body(io, out, body, framing).await;
    out.clear();
    result?;
    io.flush().await
}

async fn write_body<W: AsyncWrite + Unpin>(
    io: &mut W,
    out: &mut Vec<u8>,
    body: ProxyBody,
    framing: Framing,
) -> io::Result<()> {
    match (framing, body) {
        (Framing::None | Framing::HeadOf(_), _)
        | (_, ProxyBody::Empty)
        | (_, ProxyBody::Bytes(None)) => {
            if framing == Framing::Chunked {
                out.extend_from_slice(b"0\r\n\r\n");
            }
            io.write_all(out).await
        }
        (Framing::Length(_), ProxyBody::Bytes(Some(b))) if b.len() <= COPY_BODY_UP_TO => {
            out.extend_from_slice(&b);
            io.write_all(out).await
        }
        (framing, mut body) => {
            io.write_all(out).await?;
            let mut sent = 0u64;
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame?.into_data() else {
                    continue; // trailers: the client did not ask for them
                };
                sent += data.len() as u64;
                match framing {
                    Framing::Chunked if !data.is_empty() => {
                        let size = format!("{:x}\r\n", data.len());
                        let mut chunk = Bytes::from(size).chain(data).chain(&b"\r\n"[..]);
                        io.write_all_buf(&mut chunk).await?;
                    }
                    _ => io.write_all(&data).await?,
                }
            }
            match framing {
                Framing::Chunked => io.write_all(b"0\r\n\r\n").await,
                Framing::Length(n) if n != sent => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the body ended after {sent} of {n} bytes"),
                )),
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Response};

    fn encoded(resp: Response<()>, framing: Framing, close: bool) -> String {
        let (parts, ()) = resp.into_parts();
        let mut out = Vec::new();
        encode_head(
            &mut out,
            parts.status,
            map_fields(&parts.headers),
            framing,
            close,
        );
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn bodies_are_framed_as_hyper_frames_them() {
        let ok = StatusCode::OK;
        assert_eq!(framing(false, ok, Some(2)), Framing::Length(2));
        assert_eq!(framing(false, ok, None), Framing::Chunked);
        assert_eq!(framing(true, ok, Some(0)), Framing::None);
        assert_eq!(
            framing(true, StatusCode::NOT_FOUND, Some(9)),
            Framing::HeadOf(9)
        );
        assert_eq!(
            framing(false, StatusCode::NO_CONTENT, Some(0)),
            Framing::None
        );
        assert_eq!(
            framing(false, StatusCode::NOT_MODIFIED, None),
            Framing::None
        );
        assert_eq!(framing(false, StatusCode::CONTINUE, None), Framing::None);
    }

    #[test]
    fn the_head_gets_length_date_and_close() {
        let resp = Response::builder()
            .status(530)
            .header("x-a", "1")
            .body(())
            .unwrap();
        let head = encoded(resp, Framing::Length(5), true);
        assert!(head.starts_with("HTTP/1.1 530 \r\nx-a: 1\r\ncontent-length: 5\r\n"));
        assert!(head.contains("\r\ndate: "), "{head}");
        assert!(head.ends_with("connection: close\r\n\r\n"), "{head}");
    }

    #[test]
    fn an_origins_length_and_date_are_kept_and_a_wrong_length_replaced() {
        let resp = Response::builder()
            .header("date", "Sun, 06 Nov 1994 08:49:37 GMT")
            .header("content-length", "2")
            .body(())
            .unwrap();
        let head = encoded(resp.clone(), Framing::Length(2), false);
        assert_eq!(
            head,
            "HTTP/1.1 200 OK\r\ndate: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 2\r\n\r\n"
        );
        let head = encoded(resp.clone(), Framing::Length(3), false);
        assert!(head.contains("content-length: 3\r\n"), "{head}");
        let mut twice = resp.clone();
        twice
            .headers_mut()
            .append("content-length", HeaderValue::from_static("2"));
        let head = encoded(twice, Framing::Length(2), false);
        assert_eq!(head.matches("content-length").count(), 1, "{head}");
        // HEAD for the proxy's own answer: the length its body would have had.
        let own = Response::builder().status(404).body(()).unwrap();
        let head = encoded(own, Framing::HeadOf(9), false);
        assert!(head.contains("content-length: 9\r\n"), "{head}");
        let head = encoded(resp.clone(), Framing::HeadOf(9), false);
        assert!(head.contains("content-length: 2\r\n"), "{head}");
        // HEAD: the length the origin announced stays, no body follows.
        let head = encoded(resp.clone(), Framing::None, false);
        assert!(head.contains("content-length: 2\r\n"), "{head}");
        let head = encoded(resp, Framing::Chunked, false);
        assert!(!head.contains("content-length"), "{head}");
        assert!(head.contains("transfer-encoding: chunked\r\n"), "{head}");
    }

    /// An origin head of these lines (`name: value`, or `name:value`) announcing `length`.
    fn origin_head(status: u16, lines: &'static [u8], length: Option<u64>) -> OriginHead {
        let head = Bytes::from_static(lines);
        let mut fields = crate::origin::fields::OriginFields::new(head.clone(), 4);
        for line in head
            .split(|&b| b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
        {
            let colon = line.iter().position(|&b| b == b':').expect("a colon");
            fields.push(&line[..colon], line[colon + 1..].trim_ascii());
        }
        fields.set_length(length);
        OriginHead {
            status: StatusCode::from_u16(status).expect("status"),
            fields,
            connected_in: None,
        }
    }

    fn encoded_origin(head: &OriginHead, framing: Framing) -> String {
        let mut out = Vec::new();
        encode_origin_head(&mut out, head, framing, false);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn an_origins_lines_go_out_as_written_with_this_hops_framing() {
        let head = origin_head(
            200,
            b"Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nX-A:1\r\nServer: o\r\n",
            Some(2),
        );
        assert_eq!(
            encoded_origin(&head, Framing::Length(2)),
            "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nX-A: 1\r\n\
             Server: o\r\ncontent-length: 2\r\n\r\n"
        );
        // A HEAD answer keeps the origin's length; no date of its own gets one.
        let head = origin_head(200, b"X-A: 1\r\n", Some(5));
        let out = encoded_origin(&head, Framing::None);
        assert!(
            out.starts_with("HTTP/1.1 200 OK\r\nX-A: 1\r\ncontent-length: 5\r\ndate: "),
            "{out}"
        );
        // With a body, the body's length, once; chunked, none.
        let out = encoded_origin(&head, Framing::Length(5));
        assert_eq!(out.matches("length").count(), 1, "{out}");
        let out = encoded_origin(&head, Framing::Chunked);
        assert!(!out.contains("length"), "{out}");
        // A 204 has no length to announce; a 304 announces the origin's.
        let out = encoded_origin(&origin_head(204, b"", Some(10)), Framing::None);
        assert!(!out.contains("length"), "{out}");
        let out = encoded_origin(&origin_head(304, b"", Some(10)), Framing::None);
        assert!(out.contains("content-length: 10\r\n"), "{out}");
    }

    #[tokio::test]
    async fn a_streamed_body_is_chunked_and_a_short_one_is_an_error() {
        let mut out = b"HEAD\r\n".to_vec();
        let mut wire = Vec::new();
        let body = ProxyBody::bytes("hello");
        write_response(&mut wire, &mut out, body, Framing::Chunked)
            .await
            .expect("written");
        assert_eq!(wire, b"HEAD\r\n5\r\nhello\r\n0\r\n\r\n");
        assert!(out.is_empty());

        let mut wire = Vec::new();
        let big = Bytes::from(vec![b'x'; COPY_BODY_UP_TO + 1]);
        let mut out = b"HEAD\r\n".to_vec();
        let short = write_response(
            &mut wire,
            &mut out,
            ProxyBody::bytes(big),
            Framing::Length(1 << 20),
        );
        assert!(short.await.is_err());
        assert_eq!(wire.len(), 6 + COPY_BODY_UP_TO + 1);
    }
}
