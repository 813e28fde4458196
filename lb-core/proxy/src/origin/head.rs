//! An origin's response head interpreted, without I/O: where a head ends, its status, how its
//! body is framed (RFC 9112 section 6.3), whether the connection can carry another request,
//! and which fields the client gets (hop-by-hop ones, and those a `Connection` names, stay on
//! this hop). `http1.rs` reads the bytes and calls [`interpret`] once a head is whole.

use std::mem::MaybeUninit;

use bytes::Bytes;
use http::{Method, StatusCode};
use smallvec::SmallVec;

use crate::origin::fields::OriginFields;

/// Largest response head (and chunked trailer section) accepted from an origin.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// Most header fields in a response head.
const MAX_HEADERS: usize = 128;

/// How the response's body is delimited (RFC 9112 section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body: HEAD, 204, 304.
    Empty,
    Length(u64),
    Chunked,
    /// Until the origin closes the connection.
    UntilClose,
    /// 101: the connection now carries another protocol.
    Upgrade,
}

/// An origin's answer as the client gets it, but its body.
#[derive(Debug)]
pub struct OriginHead {
    pub status: StatusCode,
    /// End-to-end fields only.
    pub fields: OriginFields,
    /// How long connecting to the origin took, when this answer came on a new connection.
    pub connected_in: Option<std::time::Duration>,
}

/// A response head as read from an origin.
pub struct ResponseHead {
    pub answer: OriginHead,
    pub framing: Framing,
    /// Whether the connection can carry another request once the body is read.
    pub keep_alive: bool,
}

/// How a response head failed to arrive.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// The connection ended (closed or reset) before a single byte came back.
    NothingBack,
    /// It broke off in the middle, or what came was not an HTTP/1 response.
    Broken,
}

/// Where a head ends: just past its first empty line (CRLF, or a bare LF as RFC 9112
/// section 2.2 lets a recipient accept), when it is all in `buf`.
/// Line ends are found with memchr's vector search: a byte-at-a-time scan of each response
/// head was a sixth of the exchange's own time (bench/proxy.sh).
pub fn head_end(buf: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', buf).find_map(|i| match buf.get(i + 1..) {
        Some([b'\n', ..]) => Some(i + 2),
        Some([b'\r', b'\n', ..]) => Some(i + 3),
        _ => None,
    })
}

/// A Content-Length value: digits only.
fn parse_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// What an origin's response field means to this hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldRole {
    TransferEncoding,
    ContentLength,
    Connection,
    Upgrade,
    /// Another hop-by-hop field (RFC 9110 section 7.6.1): not passed on.
    HopByHop,
    EndToEnd,
}

/// The role of a field by its name (any case): by length first, as most names are of none
/// of these lengths.
fn field_role(name: &[u8]) -> FieldRole {
    let is = |known: &[u8]| crate::headers::is_named(name, known);
    match name.len() {
        17 if is(b"transfer-encoding") => FieldRole::TransferEncoding,
        14 if is(b"content-length") => FieldRole::ContentLength,
        10 if is(b"connection") => FieldRole::Connection,
        7 if is(b"upgrade") => FieldRole::Upgrade,
        10 if is(b"keep-alive") => FieldRole::HopByHop,
        16 if is(b"proxy-connection") => FieldRole::HopByHop,
        18 if is(b"proxy-authenticate") => FieldRole::HopByHop,
        19 if is(b"proxy-authorization") => FieldRole::HopByHop,
        2 if is(b"te") => FieldRole::HopByHop,
        _ => FieldRole::EndToEnd,
    }
}

/// Turns a complete head into a response, or `None` for an interim 1xx to skip. The fields
/// the client gets are noted where they lie in `head` (`OriginFields`); hop-by-hop ones, those
/// a `Connection` names among them, stay on this hop.
pub fn interpret(head: &Bytes, method: &Method) -> Result<Option<ResponseHead>, HeadError> {
    // Uninitialised header slots: zeroing 128 of them for each parse shows in profiles.
    let mut slots = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let parser = httparse::ParserConfig::default();
    let complete = parser.parse_response_with_uninit_headers(&mut parsed, head, &mut slots);
    if !matches!(complete, Ok(httparse::Status::Complete(_))) {
        return Err(HeadError::Broken);
    }
    let code = parsed.code.ok_or(HeadError::Broken)?;
    let status = StatusCode::from_u16(code).map_err(|_| HeadError::Broken)?;
    if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(None);
    }
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    let bodiless = *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let http11 = parsed.version == Some(1);
    let mut fields = OriginFields::new(head.clone(), parsed.headers.len());
    let mut hop = HopFields::new(parsed.headers, switching);
    for field in parsed.headers.iter() {
        let name = field.name.as_bytes();
        if hop.note(name, field.value)? {
            fields.push(name, field.value);
        }
    }
    hop.keep_off(&mut fields);
    let framing = hop.framing(bodiless);
    Ok(Some(ResponseHead {
        answer: OriginHead {
            status,
            fields,
            connected_in: None,
        },
        framing,
        keep_alive: hop.keep_alive(http11, framing),
    }))
}

/// What a response head's hop-by-hop fields tell this hop: how the body is framed, whether
/// the connection can be kept, and which other fields a `Connection` names.
struct HopFields<'h> {
    /// A 101: the connection switches protocols.
    switching: bool,
    /// Transfer-Encoding overrides Content-Length (RFC 9112 section 6.3): then the length is
    /// neither used nor passed on, and the connection is not trusted with another request.
    coded: bool,
    /// The last transfer coding is `chunked`.
    chunked: bool,
    /// `Connection: close`.
    close: bool,
    /// `Connection: keep-alive`.
    keep_alive_token: bool,
    /// The body's length, from the Content-Length fields (when not `coded`).
    length: Option<u64>,
    /// A Content-Length field came, used or not.
    had_length: bool,
    /// The fields a `Connection` names: hop-by-hop too.
    named: SmallVec<[&'h [u8]; 4]>,
}

impl<'h> HopFields<'h> {
    /// Nothing noted yet, but whether any field is a Transfer-Encoding.
    #[inline]
    fn new(headers: &[httparse::Header<'h>], switching: bool) -> Self {
        HopFields {
            switching,
            coded: headers
                .iter()
                .any(|f| crate::headers::is_named(f.name.as_bytes(), b"transfer-encoding")),
            chunked: false,
            close: false,
            keep_alive_token: false,
            length: None,
            had_length: false,
            named: SmallVec::new(),
        }
    }

    /// Notes what a field tells this hop; `Ok(true)` when the client gets it as it is.
    #[inline]
    fn note(&mut self, name: &[u8], value: &'h [u8]) -> Result<bool, HeadError> {
        match field_role(name) {
            FieldRole::TransferEncoding => {
                // Only a final `chunked` delimits the body; any other coding runs to the
                // close.
                self.chunked = value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
                Ok(false)
            }
            FieldRole::ContentLength => {
                self.had_length = true;
                if !self.coded {
                    self.note_length(value)?;
                }
                // Noted, not passed on as written: the client's hop announces a length of its
                // own (one field, one number), the body's or, for an answer without a body,
                // the origin's (`encode_origin_head`).
                Ok(false)
            }
            FieldRole::Connection => {
                self.note_connection(value);
                Ok(false)
            }
            // Only a 101 passes `Upgrade` on.
            FieldRole::Upgrade => Ok(self.switching),
            FieldRole::HopByHop => Ok(false),
            FieldRole::EndToEnd => Ok(true),
        }
    }

    /// Notes a Content-Length value. A list of equal values is one length; differing ones
    /// are an attack or a broken origin.
    #[inline]
    fn note_length(&mut self, value: &[u8]) -> Result<(), HeadError> {
        for item in value.split(|&b| b == b',') {
            let n = parse_length(item).ok_or(HeadError::Broken)?;
            if self.length.is_some_and(|l| l != n) {
                return Err(HeadError::Broken);
            }
            self.length = Some(n);
        }
        Ok(())
    }

    /// Notes a Connection field's `close` and `keep-alive`, and the fields it names.
    #[inline]
    fn note_connection(&mut self, value: &'h [u8]) {
        for token in crate::headers::tokens(value) {
            let (c, k) = (
                token.eq_ignore_ascii_case(b"close"),
                token.eq_ignore_ascii_case(b"keep-alive"),
            );
            (self.close, self.keep_alive_token) = (self.close | c, self.keep_alive_token | k);
            // An upgrade keeps its `Upgrade` (the client needs it to switch).
            let upgrade = self.switching && token.eq_ignore_ascii_case(b"upgrade");
            if !(c || k || upgrade || token.is_empty()) {
                self.named.push(token);
            }
        }
    }

    /// Drops from `fields` those a `Connection` named, and sets the length the client's hop
    /// may announce: the origin's, unless coded or named.
    #[inline]
    fn keep_off(&self, fields: &mut OriginFields) {
        if !self.named.is_empty() {
            fields.retain(|name| !self.named.iter().any(|n| n.eq_ignore_ascii_case(name)));
        }
        let length_named = self
            .named
            .iter()
            .any(|n| n.eq_ignore_ascii_case(b"content-length"));
        fields.set_length(self.length.filter(|_| !self.coded && !length_named));
    }

    /// How the body is delimited (RFC 9112 section 6.3), `bodiless` for HEAD, 204 and 304.
    #[inline]
    fn framing(&self, bodiless: bool) -> Framing {
        if self.switching {
            Framing::Upgrade
        } else if bodiless {
            Framing::Empty
        } else if self.coded {
            if self.chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else {
            match self.length {
                Some(0) => Framing::Empty,
                Some(n) => Framing::Length(n),
                None => Framing::UntilClose,
            }
        }
    }

    /// Whether the connection can carry another request once a body so framed is read: not
    /// after `close`, nor a head with both codings and a length (shaped for smuggling), and
    /// for HTTP/1.0 only with `keep-alive`.
    #[inline]
    fn keep_alive(&self, http11: bool, framing: Framing) -> bool {
        let smuggling_shaped = self.coded && self.had_length;
        !self.close
            && !smuggling_shaped
            && (http11 || self.keep_alive_token)
            && !matches!(framing, Framing::UntilClose | Framing::Upgrade)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the fields the client gets from this origin head.
    fn passed_on(head: &'static [u8]) -> (Vec<String>, Framing, bool) {
        let head = interpret(&Bytes::from_static(head), &Method::GET)
            .expect("a response")
            .expect("not interim");
        let names = head
            .answer
            .fields
            .iter()
            .map(|(n, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect();
        (names, head.framing, head.keep_alive)
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_stay_on_the_origins_hop() {
        let (fields, framing, keep_alive) = passed_on(
            b"HTTP/1.1 200 OK\r\nServer: o\r\nConnection: keep-alive, X-Secret\r\n\
              X-Secret: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: x\r\nUpgrade: h2c\r\n\
              TE: trailers\r\nContent-Length: 2\r\nx-secret: 2\r\nVary: A\r\n\r\n",
        );
        assert_eq!(fields, ["Server=o", "Vary=A"]);
        assert_eq!((framing, keep_alive), (Framing::Length(2), true));
        // `close` names no field, and the connection is not reused.
        let (fields, _, keep_alive) =
            passed_on(b"HTTP/1.1 200 OK\r\nCONNECTION: Close\r\nContent-Length: 0\r\n\r\n");
        assert!(fields.is_empty());
        assert!(!keep_alive);
        // An empty value is a field all the same.
        let (fields, ..) = passed_on(b"HTTP/1.1 204 No Content\r\nX-Empty:\r\nX-B: \r\n\r\n");
        assert_eq!(fields, ["X-Empty=", "X-B="]);
    }

    #[test]
    fn the_origins_length_is_noted_not_passed_on_as_written() {
        let head_of = |raw: &'static [u8], method: Method| {
            interpret(&Bytes::from_static(raw), &method)
                .expect("a response")
                .expect("not interim")
        };
        let answer = head_of(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
            Method::HEAD,
        );
        assert_eq!(answer.framing, Framing::Empty);
        assert_eq!(answer.answer.fields.length(), Some(5));
        assert_eq!(answer.answer.fields.iter().count(), 0);
        let answer = head_of(
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\nETag: \"e\"\r\n\r\n",
            Method::GET,
        );
        assert_eq!(answer.answer.fields.length(), Some(7));
        assert_eq!(answer.answer.fields.get("etag"), Some(&b"\"e\""[..]));
        // Transfer-Encoding overrides it (RFC 9112 section 6.3), with or without a body.
        let answer = head_of(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            Method::HEAD,
        );
        assert_eq!(answer.answer.fields.length(), None);
        // A length the origin's `Connection` names stays on its hop, as the field would.
        let answer = head_of(
            b"HTTP/1.1 200 OK\r\nConnection: content-length\r\nContent-Length: 3\r\n\r\n",
            Method::HEAD,
        );
        assert_eq!(answer.answer.fields.length(), None);
    }

    #[test]
    fn a_switch_of_protocols_keeps_its_upgrade() {
        let (fields, framing, _) = passed_on(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade, X-Hop\r\n\
              Upgrade: websocket\r\nX-Hop: 1\r\nSec-WebSocket-Accept: k\r\n\r\n",
        );
        assert_eq!(fields, ["Upgrade=websocket", "Sec-WebSocket-Accept=k"]);
        assert_eq!(framing, Framing::Upgrade);
    }

    #[test]
    fn a_head_ends_at_its_first_empty_line() {
        let crlf = b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody";
        assert_eq!(head_end(crlf), Some(crlf.len() - 4));
        let lf = b"HTTP/1.1 200 OK\nA: b\n\nbody";
        assert_eq!(head_end(lf), Some(lf.len() - 4));
        // Not yet all there: the empty line is still coming.
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n"), None);
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\nA: b\r\n\r"), None);
        assert_eq!(head_end(b""), None);
    }

    proptest::proptest! {
        /// The vector search finds the same end as reading byte by byte, in heads of any mix of
        /// line ends.
        #[test]
        fn head_end_matches_a_byte_by_byte_reading(
            buf in proptest::collection::vec(proptest::sample::select(vec![b'\r', b'\n', b'a']), 0..64)
        ) {
            let byte_by_byte = (0..buf.len()).find_map(|i| match &buf[i..] {
                [b'\n', b'\n', ..] => Some(i + 2),
                [b'\n', b'\r', b'\n', ..] => Some(i + 3),
                _ => None,
            });
            proptest::prop_assert_eq!(head_end(&buf), byte_by_byte);
        }
    }
}
