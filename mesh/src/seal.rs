//! Sealing gossip datagrams: chitchat has no security of its own (its issue #79), so every
//! datagram is encrypted and authenticated with XChaCha20-Poly1305 under a pre-shared cluster
//! key. Pure functions over bytes; the socket lives in `transport.rs`.
//!
//! Wire format of one datagram: an 8-byte frame header — magic `ML`, a format byte, the
//! fragment byte (index << 4 | count), a random 32-bit message id — then a sealed body
//! `key id (1) | nonce (24) | ciphertext`, the plaintext being `sender clock, unix ms (8) |
//! bytes`. Every datagram is sealed on its own, so nothing is stored before it is
//! authenticated:
//!
//! - format 1, one datagram: the body seals the whole chitchat envelope, with the cluster id
//!   as associated data (a packet of another cluster never opens);
//! - format 2, a fragment: the body seals one piece of the envelope, with the cluster id and
//!   the frame header as associated data, so a fragment cannot be moved to another message or
//!   position. chitchat fills datagrams up to 65,507 bytes and sealing adds 49, so an envelope
//!   that no longer fits one datagram takes two. With bounded gossip a sender cuts
//!   fragments at `--gossip-max-datagram` instead (`seal_datagrams_at`), up to
//!   `BULK_FRAGMENTS` of them; receivers accept at most `MAX_FRAGMENTS`.
//!
//! Formats 3 and 4 are formats 1 and 2 bound to their recipient: the plaintext starts with
//! the address the sender sent the datagram to (`ADDRESS` bytes), which the receiver checks
//! against its own (`recipient.rs`), so a datagram captured on its way to one node and
//! replayed to another (whose replay cache has not seen it) is refused there. Nodes send
//! them unless told to send the unbound formats for a rolling upgrade from a version that
//! reads only formats 1 and 2; every node reads all four.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The largest UDP payload.
pub const MAX_DATAGRAM: usize = 65_507;
pub const FRAME_HEADER: usize = 8;
const MAGIC: [u8; 2] = *b"ML";
/// A whole message in one datagram.
const FORMAT_WHOLE: u8 = 1;
/// One of the fragments of a message, each sealed on its own.
const FORMAT_FRAGMENT: u8 = 2;
/// Format 1, bound to its recipient.
const FORMAT_WHOLE_BOUND: u8 = 3;
/// Format 2, bound to its recipient.
const FORMAT_FRAGMENT_BOUND: u8 = 4;
/// The recipient's address in a bound datagram's plaintext: IPv6 (IPv4 mapped), then port.
pub const ADDRESS: usize = 18;
/// Fragments of one message that a receiver accepts: two make chitchat's largest envelope
/// (65,507 bytes); bounded gossip makes up to [`BULK_FRAGMENTS`] small ones of a delta for a
/// peer that is far behind.
pub const MAX_FRAGMENTS: u8 = 8;
/// The most datagrams bounded gossip makes of one message (`mesh/src/node.rs`), each at most
/// `--gossip-max-datagram` bytes.
pub const BULK_FRAGMENTS: usize = MAX_FRAGMENTS as usize;
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

    /// Seals `plain` into a body: `aad` is authenticated, not sent.
    pub fn seal(&self, aad: &[u8], now_ms: u64, plain: &[u8]) -> Vec<u8> {
        let (id, cipher) = &self.keys[0];
        let mut nonce = [0u8; NONCE];
        rand::rng().fill_bytes(&mut nonce);
        let mut plaintext = Vec::with_capacity(8 + plain.len());
        plaintext.extend_from_slice(&now_ms.to_be_bytes());
        plaintext.extend_from_slice(plain);
        let sealed = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &plaintext,
                    aad,
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
    pub fn open(&self, aad: &[u8], now_ms: u64, body: &[u8]) -> Option<Opened> {
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
                c.decrypt(XNonce::from_slice(nonce), Payload { msg: sealed, aad })
                    .ok()
            })?;
        let sent = u64::from_be_bytes(plaintext.get(..8)?.try_into().ok()?);
        if sent.abs_diff(now_ms) > MAX_CLOCK_SKEW_MS {
            return None;
        }
        Some(Opened {
            nonce: u128::from_be_bytes(nonce.get(..16)?.try_into().ok()?),
            plain: plaintext[8..].to_vec(),
        })
    }
}

/// An opened body: its plaintext, and its nonce (what the replay cache remembers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub nonce: u128,
    pub plain: Vec<u8>,
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

/// The datagrams of one envelope: one (format 1, or 3 bound to `to`) when it fits, else
/// fragments (format 2, or 4), each sealed on its own.
pub fn seal_datagrams(
    ring: &KeyRing,
    cluster_id: &str,
    now_ms: u64,
    envelope: &[u8],
    message_id: u32,
    to: Option<std::net::SocketAddr>,
) -> Vec<Vec<u8>> {
    let bound = if to.is_some() { ADDRESS } else { 0 };
    seal_datagrams_within(
        ring,
        cluster_id,
        now_ms,
        envelope,
        message_id,
        to,
        MAX_DATAGRAM - FRAME_HEADER - SEAL_OVERHEAD - bound,
    )
}

/// As [`seal_datagrams`], no datagram over `max_datagram` bytes (bounded gossip).
pub fn seal_datagrams_at(
    ring: &KeyRing,
    cluster_id: &str,
    now_ms: u64,
    envelope: &[u8],
    message_id: u32,
    to: Option<std::net::SocketAddr>,
    max_datagram: usize,
) -> Vec<Vec<u8>> {
    let bound = if to.is_some() { ADDRESS } else { 0 };
    seal_datagrams_within(
        ring,
        cluster_id,
        now_ms,
        envelope,
        message_id,
        to,
        max_datagram
            .min(MAX_DATAGRAM)
            .saturating_sub(FRAME_HEADER + SEAL_OVERHEAD + bound),
    )
}

/// A recipient's address as bound datagrams carry it.
pub fn encode_address(to: std::net::SocketAddr) -> [u8; ADDRESS] {
    let ip = match to.ip() {
        std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        std::net::IpAddr::V6(v6) => v6,
    };
    let mut a = [0u8; ADDRESS];
    a[..16].copy_from_slice(&ip.octets());
    a[16..].copy_from_slice(&to.port().to_be_bytes());
    a
}

/// The address `encode_address` wrote (an IPv4-mapped address as IPv4).
pub fn decode_address(a: &[u8]) -> Option<std::net::SocketAddr> {
    let ip: [u8; 16] = a.get(..16)?.try_into().ok()?;
    let port = u16::from_be_bytes(a.get(16..ADDRESS)?.try_into().ok()?);
    Some(std::net::SocketAddr::new(
        std::net::Ipv6Addr::from(ip).to_canonical(),
        port,
    ))
}

fn header(format: u8, index: usize, count: usize, message_id: u32) -> [u8; FRAME_HEADER] {
    let mut h = [0u8; FRAME_HEADER];
    h[..2].copy_from_slice(&MAGIC);
    h[2] = format;
    h[3] = ((index as u8) << 4) | (count as u8 & 0x0f);
    h[4..].copy_from_slice(&message_id.to_be_bytes());
    h
}

/// The associated data of a fragment: the cluster id, then its frame header.
pub fn fragment_aad(cluster_id: &str, header: &[u8]) -> Vec<u8> {
    let mut aad = Vec::with_capacity(cluster_id.len() + header.len());
    aad.extend_from_slice(cluster_id.as_bytes());
    aad.extend_from_slice(header);
    aad
}

/// `seal_datagrams` with at most `room` envelope bytes per datagram (tests use small rooms).
pub(crate) fn seal_datagrams_within(
    ring: &KeyRing,
    cluster_id: &str,
    now_ms: u64,
    envelope: &[u8],
    message_id: u32,
    to: Option<std::net::SocketAddr>,
    room: usize,
) -> Vec<Vec<u8>> {
    let room = room.max(1);
    let (whole, fragment) = match to {
        Some(_) => (FORMAT_WHOLE_BOUND, FORMAT_FRAGMENT_BOUND),
        None => (FORMAT_WHOLE, FORMAT_FRAGMENT),
    };
    // A bound datagram's plaintext starts with its recipient.
    let plain = |piece: &[u8]| -> Vec<u8> {
        match to {
            Some(to) => {
                let mut p = Vec::with_capacity(ADDRESS + piece.len());
                p.extend_from_slice(&encode_address(to));
                p.extend_from_slice(piece);
                p
            }
            None => piece.to_vec(),
        }
    };
    if envelope.len() <= room {
        let mut d = header(whole, 0, 1, message_id).to_vec();
        d.extend_from_slice(&ring.seal(cluster_id.as_bytes(), now_ms, &plain(envelope)));
        return vec![d];
    }
    let count = envelope.len().div_ceil(room);
    envelope
        .chunks(room)
        .enumerate()
        .map(|(i, chunk)| {
            let h = header(fragment, i, count, message_id);
            let mut d = h.to_vec();
            d.extend_from_slice(&ring.seal(&fragment_aad(cluster_id, &h), now_ms, &plain(chunk)));
            d
        })
        .collect()
}

/// A parsed frame header, and the sealed body after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// A fragment (format 2 or 4) rather than a whole message (format 1 or 3).
    pub fragment: bool,
    /// Its plaintext starts with its recipient's address (formats 3 and 4).
    pub bound: bool,
    pub index: u8,
    pub count: u8,
    pub message_id: u32,
    pub header: &'a [u8],
    pub body: &'a [u8],
}

/// The frame of a datagram; `None` for anything a sender does not make: another magic or
/// format, a whole message in several pieces, more than `MAX_FRAGMENTS` fragments.
pub fn parse_frame(datagram: &[u8]) -> Option<Frame<'_>> {
    if datagram.len() <= FRAME_HEADER || datagram[..2] != MAGIC {
        return None;
    }
    let (fragment, bound) = match datagram[2] {
        FORMAT_WHOLE => (false, false),
        FORMAT_FRAGMENT => (true, false),
        FORMAT_WHOLE_BOUND => (false, true),
        FORMAT_FRAGMENT_BOUND => (true, true),
        _ => return None,
    };
    let (index, count) = (datagram[3] >> 4, datagram[3] & 0x0f);
    if count == 0 || index >= count || count > MAX_FRAGMENTS || (!fragment && count != 1) {
        return None;
    }
    let message_id = u32::from_be_bytes(datagram[4..8].try_into().ok()?);
    Some(Frame {
        fragment,
        bound,
        index,
        count,
        message_id,
        header: &datagram[..FRAME_HEADER],
        body: &datagram[FRAME_HEADER..],
    })
}

/// The nonces of recently opened datagrams, so that a captured datagram replayed (within the
/// clock-skew window) is refused: entries live twice `MAX_CLOCK_SKEW_MS`, at most `capacity` of
/// them (the oldest go first). Only authenticated datagrams enter, so only a key holder can
/// fill it; at gossip's rates (tens of datagrams per second per node) the default capacity
/// covers the whole window many times over.
#[derive(Debug)]
pub struct ReplayCache {
    seen: std::collections::HashSet<u128>,
    order: std::collections::VecDeque<(u64, u128)>,
    capacity: usize,
}

/// Nonces a node remembers (`ReplayCache`).
pub const REPLAY_CACHE_CAPACITY: usize = 65_536;

impl ReplayCache {
    pub fn new(capacity: usize) -> Self {
        ReplayCache {
            seen: std::collections::HashSet::new(),
            order: std::collections::VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Whether `nonce` is new (and now remembered); `false` for a replay.
    pub fn fresh(&mut self, nonce: u128, now_ms: u64) -> bool {
        let horizon = now_ms.saturating_sub(2 * MAX_CLOCK_SKEW_MS);
        // Expired entries go first; a refused replay never makes room (which would let a
        // stream of replays push out, then pass, the nonce being replayed).
        while let Some(&(at, old)) = self.order.front() {
            if at >= horizon {
                break;
            }
            self.order.pop_front();
            self.seen.remove(&old);
        }
        if self.seen.contains(&nonce) {
            return false;
        }
        while self.order.len() >= self.capacity {
            match self.order.pop_front() {
                Some((_, old)) => {
                    self.seen.remove(&old);
                }
                None => break,
            }
        }
        self.seen.insert(nonce);
        self.order.push_back((now_ms, nonce));
        true
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn plain(o: Option<Opened>) -> Option<Vec<u8>> {
        o.map(|o| o.plain)
    }

    #[test]
    fn seal_open_round_trip_and_rejections() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let body = ring.seal(b"mesh", 1_000_000, b"hello");
        assert_eq!(
            plain(ring.open(b"mesh", 1_000_000, &body)).as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(ring.open(b"other-cluster", 1_000_000, &body), None);
        let other = KeyRing::new("another passphrase of some length", None).unwrap();
        assert_eq!(other.open(b"mesh", 1_000_000, &body), None);
        // Replayed long after: refused.
        assert_eq!(
            ring.open(b"mesh", 1_000_000 + MAX_CLOCK_SKEW_MS + 1, &body),
            None
        );
        let mut tampered = body.clone();
        tampered[30] ^= 1;
        assert_eq!(ring.open(b"mesh", 1_000_000, &tampered), None);
        assert_eq!(KeyRing::new("short", None).unwrap_err(), KeyError::TooShort);
    }

    #[test]
    fn rotation_accepts_both_keys_and_seals_with_the_new_one() {
        let old = KeyRing::new(KEY, None).unwrap();
        let new_key = "a brand new cluster passphrase";
        let rotating = KeyRing::new(new_key, Some(KEY)).unwrap();
        let from_old = old.seal(b"mesh", 5, b"x");
        assert!(
            rotating.open(b"mesh", 5, &from_old).is_some(),
            "old senders still heard"
        );
        let from_new = rotating.seal(b"mesh", 5, b"y");
        assert!(
            old.open(b"mesh", 5, &from_new).is_none(),
            "the new key seals"
        );
        assert!(KeyRing::new(new_key, None)
            .unwrap()
            .open(b"mesh", 5, &from_new)
            .is_some());
    }

    /// Opens and joins the datagrams of one message as a receiver does.
    fn receive(ring: &KeyRing, datagrams: &[Vec<u8>], now: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for d in datagrams {
            let f = parse_frame(d)?;
            let aad = if f.fragment {
                fragment_aad("mesh", f.header)
            } else {
                b"mesh".to_vec()
            };
            out.extend(ring.open(&aad, now, f.body)?.plain);
        }
        Some(out)
    }

    #[test]
    fn a_small_envelope_is_one_datagram_of_format_1() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let d = seal_datagrams(&ring, "mesh", 9, b"small", 1, None);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0][2], 1, "format 1: earlier nodes read it");
        assert_eq!(receive(&ring, &d, 9).as_deref(), Some(&b"small"[..]));
    }

    #[test]
    fn the_largest_envelope_is_two_sealed_fragments_that_fit_datagrams() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let envelope = vec![7u8; MAX_DATAGRAM];
        let d = seal_datagrams(&ring, "mesh", 9, &envelope, 42, None);
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|f| f.len() <= MAX_DATAGRAM));
        for f in &d {
            let p = parse_frame(f).unwrap();
            assert_eq!((p.fragment, p.count, p.message_id), (true, 2, 42));
        }
        assert_eq!(receive(&ring, &d, 9), Some(envelope));
        // A fragment moved to another position or message does not open.
        let mut moved = d[1].clone();
        moved[3] = 2; // index 0 of 2
        assert_eq!(receive(&ring, &[moved], 9), None);
        let mut other = d[0].clone();
        other[7] ^= 1; // another message id
        assert_eq!(receive(&ring, &[other], 9), None);
    }

    #[test]
    fn a_bound_datagram_carries_its_recipient_and_fits() {
        let ring = KeyRing::new(KEY, None).unwrap();
        for to in ["10.1.2.3:7946", "[2001:db8::7]:7000"] {
            let to: std::net::SocketAddr = to.parse().unwrap();
            let d = seal_datagrams(&ring, "mesh", 9, b"small", 1, Some(to));
            assert_eq!(d.len(), 1);
            assert_eq!(d[0][2], 3, "format 3");
            let plain = receive(&ring, &d, 9).unwrap();
            assert_eq!(decode_address(&plain), Some(to));
            assert_eq!(&plain[ADDRESS..], b"small");
            let big = vec![7u8; MAX_DATAGRAM];
            let d = seal_datagrams(&ring, "mesh", 9, &big, 2, Some(to));
            assert_eq!(d.len(), 2);
            assert!(d.iter().all(|f| f.len() <= MAX_DATAGRAM && f[2] == 4));
            assert!(d.iter().all(|f| parse_frame(f).is_some_and(|p| p.bound)));
        }
    }

    #[test]
    fn frames_no_sender_makes_are_refused() {
        let ring = KeyRing::new(KEY, None).unwrap();
        let nine = seal_datagrams_within(&ring, "mesh", 9, &[1u8; 90], 5, None, 10);
        assert_eq!(nine.len(), 9);
        assert!(
            nine.iter().all(|f| parse_frame(f).is_none()),
            "more than MAX_FRAGMENTS fragments"
        );
        let eight = seal_datagrams_within(&ring, "mesh", 9, &[1u8; 80], 5, None, 10);
        assert!(eight.iter().all(|f| parse_frame(f).is_some()));
        let mut whole_in_pieces = seal_datagrams(&ring, "mesh", 9, b"x", 5, None)[0].clone();
        whole_in_pieces[3] = 0x02; // format 1 claiming index 0 of 2
        assert!(parse_frame(&whole_in_pieces).is_none());
        let mut unknown = whole_in_pieces;
        unknown[2] = 9;
        assert!(parse_frame(&unknown).is_none());
    }

    #[test]
    fn the_replay_cache_refuses_a_nonce_twice_and_stays_bounded() {
        let mut c = ReplayCache::new(3);
        assert!(c.fresh(1, 1_000));
        assert!(!c.fresh(1, 1_001), "a replay");
        assert!(c.fresh(2, 1_002) && c.fresh(3, 1_003) && c.fresh(4, 1_004));
        assert_eq!(c.len(), 3, "the oldest went");
        // Entries older than twice the skew are forgotten (their datagrams no longer open).
        assert!(c.fresh(5, 1_004 + 2 * MAX_CLOCK_SKEW_MS + 10));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn replays_into_a_full_cache_never_push_out_the_replayed_nonce() {
        let mut c = ReplayCache::new(3);
        for n in 1..=3 {
            assert!(c.fresh(n, 1_000));
        }
        for _ in 0..10 {
            assert!(!c.fresh(1, 1_001), "still a replay");
        }
        assert_eq!(c.len(), 3);
    }

    proptest! {
        #[test]
        fn garbage_never_opens_nor_panics(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let ring = KeyRing::new(KEY, None).unwrap();
            prop_assert!(ring.open(b"mesh", 0, &data).is_none());
            let _ = parse_frame(&data);
        }
    }
}
