//! One JSON object on one line, written field by field into a buffer: what the access log
//! encodes each request with. A record's schema is fixed, so its keys are written as they are
//! and its numbers with `itoa`; only values are escaped (RFC 8259 section 7), with a scan that
//! copies a clean value whole. Through serde_json's generic serializer, escaping every key
//! again and formatting floats were the largest part of the writer's time in a profile of
//! `bench/records.sh`'s load.

use std::fmt;
use std::time::Duration;

/// A JSON object being written into `out`; [`JsonLine::end`] closes it.
pub struct JsonLine<'a> {
    out: &'a mut Vec<u8>,
    fields: usize,
}

/// Whether a byte must be escaped inside a JSON string.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Appends `s` escaped (without quotes).
fn escape_into(s: &str, out: &mut Vec<u8>) {
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| needs_escape(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b if b < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            b => out.push(b),
        }
    }
}

/// A `fmt::Write` that escapes what it is given.
struct Escaping<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaping<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_into(s, self.0);
        Ok(())
    }
}

impl<'a> JsonLine<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        JsonLine { out, fields: 0 }
    }

    fn key(&mut self, key: &str) {
        if self.fields > 0 {
            self.out.push(b',');
        }
        self.fields += 1;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// A string, or `null`.
    pub fn str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        self.key(key);
        match value {
            Some(v) => {
                self.out.push(b'"');
                escape_into(v, self.out);
                self.out.push(b'"');
            }
            None => self.null(),
        }
        self
    }

    /// Bytes as a string (invalid UTF-8 replaced), or `null` when empty.
    pub fn text(&mut self, key: &str, value: &[u8]) -> &mut Self {
        if value.is_empty() {
            return self.str(key, None);
        }
        match std::str::from_utf8(value) {
            Ok(s) => self.str(key, Some(s)),
            Err(_) => self.str(key, Some(&String::from_utf8_lossy(value))),
        }
    }

    /// A value written through its `Display`, as a string, or `null`.
    pub fn shown(&mut self, key: &str, value: Option<impl fmt::Display>) -> &mut Self {
        self.key(key);
        match value {
            Some(v) => {
                self.out.push(b'"');
                let _ = fmt::write(&mut Escaping(self.out), format_args!("{v}"));
                self.out.push(b'"');
            }
            None => self.null(),
        }
        self
    }

    /// An integer, or `null`.
    pub fn u64(&mut self, key: &str, value: Option<u64>) -> &mut Self {
        self.key(key);
        match value {
            Some(n) => self
                .out
                .extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            None => self.null(),
        }
        self
    }

    /// A duration in milliseconds with three decimals (microseconds), or `null`.
    pub fn millis(&mut self, key: &str, value: Option<Duration>) -> &mut Self {
        self.key(key);
        match value {
            Some(d) => {
                let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
                let mut digits = itoa::Buffer::new();
                self.out
                    .extend_from_slice(digits.format(micros / 1000).as_bytes());
                let frac = micros % 1000;
                self.out.extend_from_slice(&[
                    b'.',
                    b'0' + (frac / 100) as u8,
                    b'0' + (frac / 10 % 10) as u8,
                    b'0' + (frac % 10) as u8,
                ]);
            }
            None => self.null(),
        }
        self
    }

    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key);
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        self
    }

    /// An array of strings.
    pub fn strs<S: AsRef<str>>(&mut self, key: &str, values: &[S]) -> &mut Self {
        self.key(key);
        self.out.push(b'[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.push(b'"');
            escape_into(v.as_ref(), self.out);
            self.out.push(b'"');
        }
        self.out.push(b']');
        self
    }

    /// A nested object of string fields, or `null`.
    pub fn object(&mut self, key: &str, fields: Option<&[(&str, &str)]>) -> &mut Self {
        self.key(key);
        let Some(fields) = fields else {
            self.null();
            return self;
        };
        let mut inner = JsonLine::new(self.out);
        for (k, v) in fields {
            inner.str(k, Some(v));
        }
        inner.end();
        self
    }

    /// Closes the object.
    pub fn end(&mut self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_field_makes_one_valid_object() {
        let mut out = Vec::new();
        let mut j = JsonLine::new(&mut out);
        j.str("a", Some("q\"b\\s\n\u{1}é"))
            .str("none", None)
            .text("bytes", b"ok\xff")
            .text("empty", b"")
            .shown("ip", Some(std::net::Ipv4Addr::LOCALHOST))
            .u64("n", Some(42))
            .u64("absent", None)
            .millis("ms", Some(Duration::from_micros(5_003_207)))
            .millis("small", Some(Duration::from_micros(7)))
            .bool("yes", true)
            .strs("rules", &["r1", "r\"2"])
            .object("place", Some(&[("pool", "p"), ("endpoint", "e")]))
            .object("nothing", None);
        j.end();
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["a"], "q\"b\\s\n\u{1}é");
        assert!(v["none"].is_null() && v["empty"].is_null() && v["absent"].is_null());
        assert_eq!(v["bytes"], "ok\u{fffd}");
        assert_eq!(v["ip"], "127.0.0.1");
        assert_eq!(v["n"], 42);
        assert_eq!(v["ms"].as_f64(), Some(5003.207));
        assert_eq!(v["small"].as_f64(), Some(0.007));
        assert_eq!(v["yes"], true);
        assert_eq!(v["rules"][1], "r\"2");
        assert_eq!(v["place"]["endpoint"], "e");
        assert!(v["nothing"].is_null());
    }
}
