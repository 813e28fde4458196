//! Sealing gossip datagrams: chitchat has no security of its own (its issue #79), so every
//! datagram is encrypted and authenticated with XChaCha20-Poly1305 under a pre-shared cluster
//! key. Pure functions over bytes; the socket lives in `transport.rs`.
//!
//! Wire format of one datagram: an 8-byte frame header — magic `ML`, format version 1, the
//! fragment byte (index << 4 | count), a random 32-bit message id — then a fragment of the sealed
//! body. The sealed body is `key id (1) | nonce (24) | ciphertext`, the plaintext being
//! `sender clock, unix ms (8) | chitchat envelope`. The cluster id is the associated data, so a
//! packet of another cluster never opens.
//!
//! chitchat fills datagrams up to 65,507 bytes and sealing adds 49, so a body that no longer
//! fits one datagram is split in two fragments and reassembled (bounded in count and time)
//! before it is opened; anything that does not open is dropped and counted.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The largest UDP payload.
pub const MAX_DATAGRAM: usize = 65_507;
pub const FRAME_HEADER: usize = 8;
const MAGIC: [u8; 2] = *b"ML";
const FORMAT: u8 = 1;
const NONCE: usize = 24;
const TAG: usize = 16;
/// What sealing adds to an envelope.
pub const SEAL_OVERHEAD: usize = 1 + NONCE + 8 + TAG;
/// Messages whose sender clock is further than this from ours are refused (replays).
pub const MAX_CLOCK_SKEW_MS: u64 = 120_000;

/// The cluster keys: the first seals; any of them opens (two during a rotation).
#[derive(Clone)]
pub struct KeyRing {
    keys: Vec<(u8, XChaCha20Poly1305)>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyRing({} keys)", self.keys.len())
    }
}

/// Why a key could not be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("the gossip key is empty")]
    Empty,
    #[error("the gossip key is too short: give 32 random bytes as 64 hex digits, or a passphrase of at least 16 characters")]
    TooShort,
}

impl KeyRing {
    /// `current` seals and opens; `previous` (during a rotation) only opens. Each key is 64 hex
    /// digits (32 bytes), or a passphrase of 16+ characters hashed with SHA-256.
    pub fn new(current: &str, previous: Option<&str>) -> Result<KeyRing, KeyError> {
        let mut keys = vec![Self::key(current)?];
        if let Some(p) = previous {
            keys.push(Self::key(p)?);
        }
        Ok(KeyRing { keys })
    }

    fn key(text: &str) -> Result<(u8, XChaCha20Poly1305), KeyError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        let bytes: [u8; 32] = match decode_hex32(text) {
            Some(k) => k,
            None if text.chars().count() >= 16 => Sha256::digest(text.as_bytes()).into(),
            None => return Err(KeyError::TooShort),
        };
        let id = Sha256::digest(bytes)[0];
        Ok((id, XChaCha20Poly1305::new(&bytes.into())))
    }

    /// Seals an envelope into a body (not yet framed).
    pub fn seal(&self, cluster_id: &str, now_ms: u64, envelope: &[u8]) -> Vec<u8> {
        let (id, cipher) = &self.keys[0];
        let mut nonce = [0u8; NONCE];
        rand::rng().fill_bytes(&mut nonce);
        let mut plaintext = Vec::with_capacity(8 + envelope.len());
        plaintext.extend_from_slice(&now_ms.to_be_bytes());
        plaintext.extend_from_slice(envelope);
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &plaintext,
                    aad: cluster_id.as_bytes(),
                },
            )
            .unwrap_or_default(); // cannot fail for in-memory buffers of this size
        let mut body = Vec::with_capacity(1 + NONCE + sealed.len());
        body.push(*id);
        body.extend_from_slice(&nonce);
        body.extend_from_slice(&sealed);
        body
    }

    /// Opens a body; `None` for anything forged, altered, of another cluster or key, or whose
    /// sender clock is too far from `now_ms`.
    pub fn open(&self, cluster_id: &str, now_ms: u64, body: &[u8]) -> Option<Vec<u8>> {
        if body.len() < 1 + NONCE + TAG + 8 {
            return None;
        }
        let (id, rest) = body.split_first()?;
        let (nonce, sealed) = rest.split_at(NONCE);
        let plaintext = self
            .keys
            .iter()
            .filter(|(kid, _)| kid == id)
            .find_map(|(_, c)| {
                c.decrypt(
                    XNonce::from_slice(nonce),
                    Payload {
                        msg: sealed,
                        aad: cluster_id.as_bytes(),
                    },
                )
                .ok()
            })?;
        let sent = u64::from_be_bytes(plaintext.get(..8)?.try_into().ok()?);
        if sent.abs_diff(now_ms) > MAX_CLOCK_SKEW_MS {
            return None;
        }
        Some(plaintext[8..].to_vec())
    }
}

fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(chunk).ok()?, 16).ok()?;
    }
    Some(out)
}

/// Splits a sealed body into datagrams of at most [`MAX_DATAGRAM`] bytes.
pub fn frame(body: &[u8], message_id: u32) -> Vec<Vec<u8>> {
    frame_within(body, message_id, MAX_DATAGRAM - FRAME_HEADER)
}

/// Splits a body into fragments of at most `room` bytes (at most 15 of them).
pub(crate) fn frame_within(body: &[u8], message_id: u32, room: usize) -> Vec<Vec<u8>> {
    let count = body.len().div_ceil(room.max(1)).max(1);
    body.chunks(room)
        .enumerate()
        .map(|(i, chunk)| {
            let mut d = Vec::with_capacity(FRAME_HEADER + chunk.len());
            d.extend_from_slice(&MAGIC);
            d.push(FORMAT);
            d.push(((i as u8) << 4) | (count as u8 & 0x0f));
            d.extend_from_slice(&message_id.to_be_bytes());
            d.extend_from_slice(chunk);
            d
        })
        .collect()
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    pub index: u8,
    pub count: u8,
    pub message_id: u32,
    pub chunk: &'a [u8],
}

pub fn parse_frame(datagram: &[u8]) -> Option<Frame<'_>> {
    if datagram.len() <= FRAME_HEADER || datagram[..2] != MAGIC || datagram[2] != FORMAT {
        return None;
    }
    let (index, count) = (datagram[3] >> 4, datagram[3] & 0x0f);
    if count == 0 || index >= count {
        return None;
    }
    let message_id = u32::from_be_bytes(datagram[4..8].try_into().ok()?);
    Some(Frame {
        index,
        count,
        message_id,
        chunk: &datagram[FRAME_HEADER..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn seal_open_round_trip_and_rejections() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let body = ring.seal("mesh", 1_000_000, b"hello");
        assert_eq!(
            ring.open("mesh", 1_000_000, &body).as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(ring.open("other-cluster", 1_000_000, &body), None);
        let other = KeyRing::new("another passphrase of some length", None).unwrap();
        assert_eq!(other.open("mesh", 1_000_000, &body), None);
        // Replayed long after: refused.
        assert_eq!(
            ring.open("mesh", 1_000_000 + MAX_CLOCK_SKEW_MS + 1, &body),
            None
        );
        let mut tampered = body.clone();
        tampered[30] ^= 1;
        assert_eq!(ring.open("mesh", 1_000_000, &tampered), None);
        assert_eq!(KeyRing::new("short", None).unwrap_err(), KeyError::TooShort);
    }

    #[test]
    fn rotation_accepts_both_keys_and_seals_with_the_new_one() {
        let old = KeyRing::new(KEY, None).unwrap();
        let new_key = "a brand new cluster passphrase";
        let rotating = KeyRing::new(new_key, Some(KEY)).unwrap();
        let from_old = old.seal("mesh", 5, b"x");
        assert!(
            rotating.open("mesh", 5, &from_old).is_some(),
            "old senders still heard"
        );
        let from_new = rotating.seal("mesh", 5, b"y");
        assert!(
            old.open("mesh", 5, &from_new).is_none(),
            "the new key seals"
        );
        assert!(KeyRing::new(new_key, None)
            .unwrap()
            .open("mesh", 5, &from_new)
            .is_some());
    }

    #[test]
    fn oversized_bodies_are_split_and_fit_a_datagram() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let envelope = vec![7u8; MAX_DATAGRAM];
        let body = ring.seal("mesh", 9, &envelope);
        let frames = frame(&body, 42);
        assert_eq!(frames.len(), 2);
        assert!(frames.iter().all(|f| f.len() <= MAX_DATAGRAM));
        let mut joined = Vec::new();
        for f in &frames {
            let p = parse_frame(f).unwrap();
            assert_eq!((p.count, p.message_id), (2, 42));
            joined.extend_from_slice(p.chunk);
        }
        assert_eq!(ring.open("mesh", 9, &joined), Some(envelope));
    }

    proptest! {
        #[test]
        fn garbage_never_opens_nor_panics(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let ring = KeyRing::new(KEY, None).unwrap();
            prop_assert!(ring.open("mesh", 0, &data).is_none());
            let _ = parse_frame(&data);
        }
    }
}
