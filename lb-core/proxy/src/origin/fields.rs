//! An origin's response header fields as the client gets them, left where they lie in the
//! origin's head: a list of where each name and value is, not a `HeaderMap`. The proxy's own
//! HTTP/1 server copies them out as they are (nginx and HAProxy pass an origin's fields the
//! same way, its spelling of names included); hyper's servers (HTTP/2, and HTTP/1 requests
//! handed to hyper) get a map made from them.
//!
//! Why: building the map, a `HeaderName` looked up and a `HeaderValue` sharing the head for
//! each field and a hash insert, then iterating and dropping it, was a seventh of the
//! instructions the proxy spent on a request (bench/proxy-instructions.sh).
//!
//! httparse has already checked each name is a token and each value holds only the bytes a
//! `HeaderValue` allows, so nothing here validates again.

use std::cell::RefCell;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::headers::is_named;

/// Spare span lists kept per worker thread (as `header_maps`).
const KEEP: usize = 256;
/// Longer lists are dropped rather than kept.
const KEEP_CAPACITY_UP_TO: usize = 64;

thread_local! {
    static SPARE: RefCell<Vec<Vec<Span>>> = const { RefCell::new(Vec::new()) };
}

/// Where one field's name and value lie in the head.
#[derive(Debug, Clone, Copy)]
struct Span {
    name: u32,
    name_len: u32,
    value: u32,
    value_len: u32,
    /// The field's line is `name: value` and CRLF exactly, so it can be copied whole (with
    /// the lines next to it).
    clean: bool,
}

/// The fields of one origin response, in the order the origin sent them, and what the proxy
/// adds after them.
pub struct OriginFields {
    head: Bytes,
    spans: Vec<Span>,
    /// The affinity cookie the proxy sets.
    set_cookie: Option<HeaderValue>,
    /// The request id the proxy returns (with the access log on).
    request_id: Option<HeaderValue>,
    has_date: bool,
    /// The body's length as the origin announced it (`Content-Length` is not among the
    /// fields: the client's hop announces its own).
    length: Option<u64>,
}

impl OriginFields {
    /// No fields yet, from `head`, with room for `fields`.
    pub fn new(head: Bytes, fields: usize) -> Self {
        let mut spans = crate::spares::take(&SPARE).unwrap_or_default();
        spans.reserve(fields);
        OriginFields {
            head,
            spans,
            set_cookie: None,
            request_id: None,
            has_date: false,
            length: None,
        }
    }

    /// Where `part`, a slice of the head, begins in it.
    fn offset(&self, part: &[u8]) -> Option<(u32, u32)> {
        let at = (part.as_ptr() as usize).checked_sub(self.head.as_ptr() as usize)?;
        let end = at.checked_add(part.len())?;
        if end > self.head.len() {
            return None;
        }
        Some((u32::try_from(at).ok()?, u32::try_from(part.len()).ok()?))
    }

    /// Adds a field whose name and value are slices of the head (others are ignored: the
    /// caller parsed them from it).
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let Some((at, name_len)) = self.offset(name) else {
            return;
        };
        // An empty value may not point into the head; it is written `name: ` all the same.
        let (value_at, value_len) = match self.offset(value) {
            Some(v) if !value.is_empty() => v,
            _ => (at + name_len, 0),
        };
        let line_end = value_at as usize + value_len as usize;
        let clean = value_at == at + name_len + 2
            && self.head.get(value_at as usize - 2..value_at as usize) == Some(b": ")
            && self.head.get(line_end..line_end + 2) == Some(b"\r\n");
        self.has_date |= is_named(name, b"date");
        self.spans.push(Span {
            name: at,
            name_len,
            value: value_at,
            value_len,
            clean,
        });
    }

    /// Whether a `Date` field is among them.
    pub fn has_date(&self) -> bool {
        self.has_date
    }

    /// The body's length as the origin announced it.
    pub fn length(&self) -> Option<u64> {
        self.length
    }

    pub fn set_length(&mut self, length: Option<u64>) {
        self.length = length;
    }

    /// Writes the fields as header lines, each ending in CRLF. Lines the origin wrote as this
    /// hop would (`name: value` CRLF) go out as they are, those next to each other in one
    /// copy: a copy per name, separator, value and line end was most of writing a head.
    pub fn write_lines(&self, out: &mut Vec<u8>) {
        let head = &self.head[..];
        // The run of clean lines not written yet.
        let mut run = 0..0;
        for s in &self.spans {
            let line = s.name as usize..(s.value + s.value_len) as usize + 2;
            if s.clean && line.start == run.end {
                run.end = line.end;
                continue;
            }
            out.extend_from_slice(head.get(run.clone()).unwrap_or_default());
            if s.clean {
                run = line;
            } else {
                run = 0..0;
                out.extend_from_slice(slice(head, s.name, s.name_len));
                out.extend_from_slice(b": ");
                out.extend_from_slice(slice(head, s.value, s.value_len));
                out.extend_from_slice(b"\r\n");
            }
        }
        out.extend_from_slice(head.get(run).unwrap_or_default());
        if let Some(c) = &self.set_cookie {
            out.extend_from_slice(b"set-cookie: ");
            out.extend_from_slice(c.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(id) = &self.request_id {
            out.extend_from_slice(b"x-request-id: ");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Keeps only the fields whose name `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let head = &self.head;
        self.spans.retain(|s| keep(slice(head, s.name, s.name_len)));
        self.has_date = self
            .spans
            .iter()
            .any(|s| is_named(slice(head, s.name, s.name_len), b"date"));
    }

    /// Adds the affinity cookie after the origin's fields.
    pub fn set_cookie(&mut self, value: HeaderValue) {
        self.set_cookie = Some(value);
    }

    /// Returns the request's id to the client, in place of any the origin sent.
    pub fn set_request_id(&mut self, id: HeaderValue) {
        self.retain(|name| !name.eq_ignore_ascii_case(b"x-request-id"));
        self.request_id = Some(id);
    }

    /// Name and value of every field, as sent (the origin's spelling of the name).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let head = &self.head;
        self.spans
            .iter()
            .map(move |s| {
                (
                    slice(head, s.name, s.name_len),
                    slice(head, s.value, s.value_len),
                )
            })
            .chain(
                self.set_cookie
                    .as_ref()
                    .map(|v| (header::SET_COOKIE.as_str().as_bytes(), v.as_bytes())),
            )
            .chain(
                self.request_id
                    .as_ref()
                    .map(|v| (&b"x-request-id"[..], v.as_bytes())),
            )
    }

    /// The first value of the field `name` (any case).
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The fields as a map, for hyper's servers, the origin's length included (hyper's
    /// HTTP/2 server announces none for a body that has already ended).
    pub fn to_map(&self) -> HeaderMap {
        let mut map = HeaderMap::with_capacity(self.spans.len() + 1);
        for s in &self.spans {
            // Valid by httparse's checks; a field that were not would be left out.
            let name = HeaderName::from_bytes(slice(&self.head, s.name, s.name_len));
            let value =
                HeaderValue::from_maybe_shared(self.head.slice(range(s.value, s.value_len)));
            if let (Ok(name), Ok(value)) = (name, value) {
                map.append(name, value);
            }
        }
        if let Some(n) = self.length {
            map.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        if let Some(c) = &self.set_cookie {
            map.append(header::SET_COOKIE, c.clone());
        }
        if let Some(id) = &self.request_id {
            map.insert(crate::access::X_REQUEST_ID.clone(), id.clone());
        }
        map
    }
}

impl Drop for OriginFields {
    fn drop(&mut self) {
        let mut spans = std::mem::take(&mut self.spans);
        if spans.capacity() > KEEP_CAPACITY_UP_TO {
            return;
        }
        spans.clear();
        crate::spares::keep(&SPARE, spans, KEEP);
    }
}

impl std::fmt::Debug for OriginFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(n, v)| (String::from_utf8_lossy(n), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

fn range(at: u32, len: u32) -> std::ops::Range<usize> {
    let at = at as usize;
    at..at + len as usize
}

fn slice(head: &[u8], at: u32, len: u32) -> &[u8] {
    // In range by construction (`push` checks); an empty slice otherwise.
    head.get(range(at, len)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields_of(head: &'static [u8]) -> OriginFields {
        let head = Bytes::from_static(head);
        let mut fields = OriginFields::new(head.clone(), 4);
        for line in head.split(|&b| b == b'\n').filter(|l| l.contains(&b':')) {
            let colon = line.iter().position(|&b| b == b':').expect("a colon");
            fields.push(&line[..colon], line[colon + 1..].trim_ascii());
        }
        fields
    }

    #[test]
    fn fields_come_out_in_order_with_the_cookie_last() {
        let mut fields = fields_of(b"Server: x\nSet-Cookie: a=1\nX-Two: 2\n");
        fields.set_cookie(HeaderValue::from_static("meshlb=e"));
        let all: Vec<(&[u8], &[u8])> = fields.iter().collect();
        assert_eq!(
            all,
            vec![
                (&b"Server"[..], &b"x"[..]),
                (b"Set-Cookie", b"a=1"),
                (b"X-Two", b"2"),
                (b"set-cookie", b"meshlb=e")
            ]
        );
        assert_eq!(fields.get("x-two"), Some(&b"2"[..]));
        fields.set_length(Some(7));
        let map = fields.to_map();
        assert_eq!(map.len(), 5);
        assert_eq!(map[header::CONTENT_LENGTH], "7");
        let cookies: Vec<_> = map.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1", "meshlb=e"]);
    }

    /// The lines `write_lines` writes for the fields of a CRLF head.
    fn written(head: &'static [u8]) -> String {
        let head = Bytes::from_static(head);
        let mut fields = OriginFields::new(head.clone(), 4);
        let mut rest = &head[..];
        while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
            let line = &rest[..end];
            if let Some(colon) = line.iter().position(|&b| b == b':') {
                let name = &line[..colon];
                // Not `Skip` (the field the caller leaves out).
                if name != b"Skip" {
                    fields.push(name, line[colon + 1..].trim_ascii());
                }
            }
            rest = &rest[end + 2..];
        }
        let mut out = Vec::new();
        fields.write_lines(&mut out);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn lines_are_written_as_the_origin_wrote_them_or_made_so() {
        assert_eq!(
            written(b"A: 1\r\nB: 2\r\nSkip: x\r\nC: 3\r\n\r\n"),
            "A: 1\r\nB: 2\r\nC: 3\r\n"
        );
        // Odd spacing is written this hop's way.
        assert_eq!(
            written(b"A:1\r\nB:   2  \r\nC: 3\r\nD: 4\r\n\r\n"),
            "A: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n"
        );
        assert_eq!(written(b"\r\n"), "");
    }

    #[test]
    fn retained_fields_are_the_ones_kept() {
        let mut fields = fields_of(b"A: 1\nB: 2\nA: 3\nC: 4\n");
        fields.retain(|n| !n.eq_ignore_ascii_case(b"a"));
        let names: Vec<&[u8]> = fields.iter().map(|(n, _)| n).collect();
        assert_eq!(names, vec![&b"B"[..], b"C"]);
        // What is known of the fields follows them.
        let mut fields = fields_of(b"Date: x\nB: 2\n");
        assert!(fields.has_date());
        fields.retain(|n| n == b"B");
        assert!(!fields.has_date());
    }

    #[test]
    fn a_slice_from_elsewhere_is_not_taken() {
        let mut fields = OriginFields::new(Bytes::from_static(b"A: 1\n"), 1);
        let elsewhere = b"B: 2".to_vec();
        fields.push(&elsewhere[..1], &elsewhere[3..]);
        assert_eq!(fields.iter().count(), 0);
    }

    #[test]
    fn span_lists_are_reused_on_the_thread() {
        while SPARE.with(|s| s.borrow_mut().pop()).is_some() {}
        drop(fields_of(b"A: 1\n"));
        assert_eq!(SPARE.with(|s| s.borrow().len()), 1);
        let again = OriginFields::new(Bytes::new(), 1);
        assert_eq!(SPARE.with(|s| s.borrow().len()), 0);
        assert!(again.iter().next().is_none());
    }
}
