//! An origin's response body decoded by its framing, without I/O: a state machine over the
//! bytes read so far that hands out data, the trailer section of a chunked body, or the end,
//! and says when it needs more bytes. `body.rs` drives it with reads from the connection.

use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::origin::head::{Framing, MAX_HEAD_BYTES};

/// A chunk-size line longer than this is not one.
pub const MAX_CHUNK_LINE: usize = 4 << 10;

/// Where in the body the decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes are left of a body with a length.
    Length(u64),
    ChunkSize,
    /// This many bytes are left of the current chunk.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkEnd,
    Trailers,
    UntilClose,
    Done,
}

/// What the bytes in hand give.
#[derive(Debug, PartialEq)]
pub enum Step {
    Data(Bytes),
    /// The trailer section of a chunked body; the body has ended.
    Trailers(HeaderMap),
    /// The body has ended (with what was given before).
    End,
    /// Nothing can be decoded until more bytes are read.
    NeedMore,
    /// The bytes are not a body of this framing.
    Broken(&'static str),
}

/// The body decoder of one response.
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
}

impl Decoder {
    pub fn new(framing: Framing) -> Decoder {
        let state = match framing {
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
            Framing::UntilClose => State::UntilClose,
            Framing::Empty | Framing::Upgrade => State::Done,
        };
        Decoder { state }
    }

    /// Whether the body has ended: the connection is past it.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Whether the connection's end is the body's end (no length, no chunked coding).
    pub fn ends_at_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// The exact number of bytes left, when known.
    pub fn exact_left(&self) -> Option<u64> {
        match self.state {
            State::Length(n) => Some(n),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// Marks the body as ended (the connection closed or failed).
    pub fn stop(&mut self) {
        self.state = State::Done;
    }

    /// Decodes what `buf` holds; the bytes used are taken from its front.
    pub fn step(&mut self, buf: &mut BytesMut) -> Step {
        loop {
            match self.state {
                State::Done | State::Length(0) => {
                    self.state = State::Done;
                    return Step::End;
                }
                State::Length(left) | State::ChunkData(left) if !buf.is_empty() => {
                    let take = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let data = buf.split_to(take).freeze();
                    let left = left - take as u64;
                    self.state = match self.state {
                        State::Length(_) if left == 0 => State::Done,
                        State::Length(_) => State::Length(left),
                        _ if left == 0 => State::ChunkEnd,
                        _ => State::ChunkData(left),
                    };
                    return Step::Data(data);
                }
                State::Length(_) | State::ChunkData(_) => return Step::NeedMore,
                // httparse takes a line without digits for size 0; a chunk-size starts with one.
                State::ChunkSize if buf.first().is_some_and(|b| !b.is_ascii_hexdigit()) => {
                    return self.broken("bad chunk size");
                }
                State::ChunkSize => match httparse::parse_chunk_size(buf) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        buf.advance(used);
                        self.state = if size == 0 {
                            State::Trailers
                        } else {
                            State::ChunkData(size)
                        };
                    }
                    Ok(httparse::Status::Partial) if buf.len() < MAX_CHUNK_LINE => {
                        return Step::NeedMore
                    }
                    _ => return self.broken("bad chunk size"),
                },
                State::ChunkEnd if buf.len() >= 2 => {
                    if &buf[..2] != b"\r\n" {
                        return self.broken("chunk not followed by CRLF");
                    }
                    buf.advance(2);
                    self.state = State::ChunkSize;
                }
                State::ChunkEnd => return Step::NeedMore,
                State::Trailers => {
                    if buf.starts_with(b"\r\n") {
                        buf.advance(2);
                        self.state = State::Done;
                        return Step::End;
                    }
                    return match buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        Some(end) => {
                            let section = buf.split_to(end + 4).freeze();
                            match trailer_fields(&section) {
                                Some(trailers) => {
                                    self.state = State::Done;
                                    Step::Trailers(trailers)
                                }
                                None => self.broken("bad trailer fields"),
                            }
                        }
                        None if buf.len() < MAX_HEAD_BYTES => Step::NeedMore,
                        None => self.broken("trailers too large"),
                    };
                }
                State::UntilClose if !buf.is_empty() => return Step::Data(buf.split().freeze()),
                State::UntilClose => return Step::NeedMore,
            }
        }
    }

    fn broken(&mut self, what: &'static str) -> Step {
        self.state = State::Done;
        Step::Broken(what)
    }
}

/// The trailer section of a chunked body (its fields and the empty line ending it).
fn trailer_fields(section: &Bytes) -> Option<HeaderMap> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let httparse::Status::Complete((_, parsed)) =
        httparse::parse_headers(section, &mut fields).ok()?
    else {
        return None;
    };
    let mut trailers = HeaderMap::with_capacity(parsed.len());
    for field in parsed {
        let name = HeaderName::from_bytes(field.name.as_bytes()).ok()?;
        let value = HeaderValue::from_maybe_shared(section.slice_ref(field.value)).ok()?;
        trailers.append(name, value);
    }
    Some(trailers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Feeds `wire` in pieces of `piece` bytes; the data, the trailers, and how it ended.
    fn decode(framing: Framing, wire: &[u8], piece: usize) -> (Vec<u8>, Option<HeaderMap>, Step) {
        let mut decoder = Decoder::new(framing);
        let (mut buf, mut data, mut trailers) = (BytesMut::new(), Vec::new(), None);
        let mut rest = wire;
        loop {
            match decoder.step(&mut buf) {
                Step::Data(d) => data.extend_from_slice(&d),
                Step::Trailers(t) => trailers = Some(t),
                Step::NeedMore if !rest.is_empty() => {
                    let n = piece.min(rest.len());
                    buf.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                }
                end => return (data, trailers, end),
            }
        }
    }

    #[test]
    fn a_length_ends_the_body_and_leaves_what_follows() {
        let mut decoder = Decoder::new(Framing::Length(5));
        let mut buf = BytesMut::from(&b"helloHTTP/1.1"[..]);
        assert_eq!(
            decoder.step(&mut buf),
            Step::Data(Bytes::from_static(b"hello"))
        );
        assert!(decoder.is_done());
        assert_eq!(decoder.step(&mut buf), Step::End);
        assert_eq!(&buf[..], b"HTTP/1.1");
    }

    #[test]
    fn chunks_with_extensions_and_trailers() {
        let wire = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 9\r\n\r\n";
        for piece in [1, 2, 7, wire.len()] {
            let (data, trailers, end) = decode(Framing::Chunked, wire, piece);
            assert_eq!(data, b"hello world", "piece {piece}");
            let trailers = trailers.expect("trailers");
            assert_eq!(trailers["x-sum"], "9");
            assert_eq!(end, Step::End, "the body ends with its trailers");
        }
    }

    #[test]
    fn a_chunked_body_without_trailers_ends() {
        let (data, trailers, end) = decode(Framing::Chunked, b"3\r\nabc\r\n0\r\n\r\n", 1);
        assert_eq!((data.as_slice(), trailers.is_none()), (&b"abc"[..], true));
        assert_eq!(end, Step::End);
    }

    #[test]
    fn broken_chunking_is_refused() {
        for (wire, why) in [
            (&b"zz\r\n"[..], "bad chunk size"),
            (b";\r\n", "bad chunk size"),
            (b"3\r\nabcXY", "chunk not followed by CRLF"),
            (b"0\r\nbad trailer\r\n\r\n", "bad trailer fields"),
        ] {
            let (_, _, end) = decode(Framing::Chunked, wire, 1);
            assert_eq!(
                end,
                Step::Broken(why),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn a_chunk_size_line_and_trailers_are_bounded() {
        let mut long_line = vec![b'1'];
        long_line.extend(std::iter::repeat_n(b' ', MAX_CHUNK_LINE));
        let (_, _, end) = decode(Framing::Chunked, &long_line, 512);
        assert_eq!(end, Step::Broken("bad chunk size"));
        let mut trailers = b"0\r\nX: ".to_vec();
        trailers.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        let (_, _, end) = decode(Framing::Chunked, &trailers, 4096);
        assert_eq!(end, Step::Broken("trailers too large"));
    }

    #[test]
    fn an_empty_length_or_no_body_is_done_from_the_start() {
        for framing in [Framing::Length(0), Framing::Empty, Framing::Upgrade] {
            let mut decoder = Decoder::new(framing);
            assert!(decoder.is_done() && decoder.exact_left() == Some(0));
            let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK"[..]);
            assert_eq!(decoder.step(&mut buf), Step::End);
            assert_eq!(buf.len(), 15, "the next response's bytes stay");
        }
    }

    #[test]
    fn until_close_takes_everything() {
        let mut decoder = Decoder::new(Framing::UntilClose);
        assert!(decoder.ends_at_close());
        let mut buf = BytesMut::from(&b"all of it"[..]);
        assert_eq!(
            decoder.step(&mut buf),
            Step::Data(Bytes::from_static(b"all of it"))
        );
        assert_eq!(decoder.step(&mut buf), Step::NeedMore);
    }

    proptest! {
        /// Any body chunked any way decodes to itself, however the bytes arrive.
        #[test]
        fn chunked_round_trip(body in proptest::collection::vec(any::<u8>(), 0..600),
                              sizes in proptest::collection::vec(1usize..70, 1..20),
                              piece in 1usize..40) {
            let mut wire = Vec::new();
            let (mut at, mut i) = (0, 0);
            while at < body.len() {
                let n = sizes[i % sizes.len()].min(body.len() - at);
                wire.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                wire.extend_from_slice(&body[at..at + n]);
                wire.extend_from_slice(b"\r\n");
                at += n;
                i += 1;
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let (data, _, end) = decode(Framing::Chunked, &wire, piece);
            prop_assert_eq!(data, body);
            prop_assert_eq!(end, Step::End);
        }

        /// Arbitrary bytes never panic the decoder and never hand out more than they hold.
        #[test]
        fn any_bytes_are_decoded_or_refused(wire in proptest::collection::vec(any::<u8>(), 0..300),
                                            piece in 1usize..50) {
            let (data, _, _) = decode(Framing::Chunked, &wire, piece);
            prop_assert!(data.len() <= wire.len());
        }
    }
}
