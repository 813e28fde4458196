//! Frame Streams (the transport of dnstap, github.com/farsightsec/fstrm's `fstrm.h`): data
//! frames are a 32-bit big-endian length and that many bytes; a length of 0 escapes a control
//! frame — its own length, its type, and fields (only CONTENT_TYPE exists). A file is START,
//! data frames, STOP. Over a socket the writer sends READY, the collector ACCEPT, the writer
//! START; at the end STOP, answered by FINISH.

use std::io::{self, Read};

/// A control frame's type (`fstrm_control_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFrame {
    Accept = 1,
    Start = 2,
    Stop = 3,
    Ready = 4,
    Finish = 5,
}

impl ControlFrame {
    fn of(code: u32) -> Option<ControlFrame> {
        Some(match code {
            1 => ControlFrame::Accept,
            2 => ControlFrame::Start,
            3 => ControlFrame::Stop,
            4 => ControlFrame::Ready,
            5 => ControlFrame::Finish,
            _ => return None,
        })
    }
}

/// The one control field (`FSTRM_CONTROL_FIELD_CONTENT_TYPE`).
const CONTENT_TYPE_FIELD: u32 = 1;
/// fstrm's limit on a control frame (`FSTRM_CONTROL_FRAME_LENGTH_MAX`).
const MAX_CONTROL: u32 = 512;

/// Appends a control frame of `kind` naming `content_type` (none for FINISH and STOP).
pub(crate) fn control(kind: ControlFrame, content_type: Option<&str>, out: &mut Vec<u8>) {
    let fields = content_type.map_or(0, |t| 8 + t.len());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&u32::try_from(4 + fields).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&(kind as u32).to_be_bytes());
    if let Some(t) = content_type {
        out.extend_from_slice(&CONTENT_TYPE_FIELD.to_be_bytes());
        out.extend_from_slice(&u32::try_from(t.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
}

/// Appends a data frame around `payload` (not empty: a 0 length is the control escape).
pub(crate) fn data(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(payload);
}

/// What a Frame Streams peer sent that is not Frame Streams.
#[derive(Debug, thiserror::Error)]
pub enum FrameStreamError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("control frame of {0} bytes (at most {MAX_CONTROL})")]
    ControlTooLong(u32),
    #[error("unknown control frame type {0}")]
    UnknownControl(u32),
    #[error("data frame of {0} bytes (over the reader's limit)")]
    DataTooLong(u32),
}

/// One frame read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Control {
        kind: ControlFrame,
        content_type: Option<String>,
    },
    Data(Vec<u8>),
}

/// Reads frames, each bounded: a collector's ACCEPT in the handshake, and files in tests.
pub struct FrameReader<R> {
    inner: R,
    max_data: u32,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R, max_data: u32) -> Self {
        FrameReader { inner, max_data }
    }

    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.inner.read_exact(&mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    /// The next frame; `Ok(None)` at a clean end of input.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameStreamError> {
        let len = match self.u32() {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if len > 0 {
            if len > self.max_data {
                return Err(FrameStreamError::DataTooLong(len));
            }
            let mut payload = vec![0; len as usize];
            self.inner.read_exact(&mut payload)?;
            return Ok(Some(Frame::Data(payload)));
        }
        let clen = self.u32()?;
        if !(4..=MAX_CONTROL).contains(&clen) {
            return Err(FrameStreamError::ControlTooLong(clen));
        }
        let mut body = vec![0; clen as usize];
        self.inner.read_exact(&mut body)?;
        let code = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        let kind = ControlFrame::of(code).ok_or(FrameStreamError::UnknownControl(code))?;
        let mut content_type = None;
        let mut at = 4;
        while at + 8 <= body.len() {
            let field = u32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
            let flen = u32::from_be_bytes([body[at + 4], body[at + 5], body[at + 6], body[at + 7]])
                as usize;
            let value = body.get(at + 8..at + 8 + flen).unwrap_or_default();
            if field == CONTENT_TYPE_FIELD && content_type.is_none() {
                content_type = Some(String::from_utf8_lossy(value).into_owned());
            }
            at += 8 + flen;
        }
        Ok(Some(Frame::Control { kind, content_type }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_written_read_back_the_same() {
        let mut out = Vec::new();
        control(
            ControlFrame::Start,
            Some("protobuf:dnstap.Dnstap"),
            &mut out,
        );
        data(b"one", &mut out);
        data(b"two", &mut out);
        control(ControlFrame::Stop, None, &mut out);
        let mut r = FrameReader::new(&out[..], 1 << 20);
        let mut got = Vec::new();
        while let Some(f) = r.next_frame().expect("frame") {
            got.push(f);
        }
        assert_eq!(
            got,
            vec![
                Frame::Control {
                    kind: ControlFrame::Start,
                    content_type: Some("protobuf:dnstap.Dnstap".into())
                },
                Frame::Data(b"one".to_vec()),
                Frame::Data(b"two".to_vec()),
                Frame::Control {
                    kind: ControlFrame::Stop,
                    content_type: None
                },
            ]
        );
    }

    #[test]
    fn an_oversized_frame_is_refused_before_it_is_read() {
        let bytes = [0xffu8, 0xff, 0xff, 0xff];
        let mut r = FrameReader::new(&bytes[..], 1 << 20);
        assert!(matches!(
            r.next_frame(),
            Err(FrameStreamError::DataTooLong(_))
        ));
        let control = [0u8, 0, 0, 0, 0, 0, 0x10, 0];
        let mut r = FrameReader::new(&control[..], 1 << 20);
        assert!(matches!(
            r.next_frame(),
            Err(FrameStreamError::ControlTooLong(_))
        ));
    }
}
