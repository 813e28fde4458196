//! The gossip envelope decoder (vendored chitchat's, behind the sealed transport) fed what a
//! key holder could send: arbitrary bytes after a valid header, for every message type, and
//! random compressed blocks. It refuses or decodes; it never panics. Bounded case counts, so
//! this runs with every `cargo test`.

use chitchat::{ChitchatEnvelope, ChitchatMessage, ProtocolVersion};
use proptest::prelude::*;

/// The magic number and protocol version of a real envelope.
fn header() -> Vec<u8> {
    let mut h = ChitchatEnvelope {
        version: ProtocolVersion::V0,
        message: ChitchatMessage::BadCluster,
        peers: Vec::new(),
    }
    .serialize_to_vec();
    h.truncate(3);
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = ChitchatEnvelope::deserialize(&mut bytes.as_slice());
    }

    #[test]
    fn any_message_body_after_a_valid_header_never_panics(
        kind in 0u8..4,
        body in proptest::collection::vec(any::<u8>(), 0..2000),
    ) {
        let mut bytes = header();
        bytes.push(kind);
        bytes.extend_from_slice(&body);
        let _ = ChitchatEnvelope::deserialize(&mut bytes.as_slice());
    }

    /// An Ack whose delta stream is blocks of random "compressed" bytes.
    #[test]
    fn random_compressed_blocks_never_panic(
        blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
    ) {
        let mut bytes = header();
        bytes.push(2); // an Ack
        for b in &blocks {
            bytes.push(1); // compressed
            bytes.extend_from_slice(&(b.len() as u16).to_le_bytes());
            bytes.extend_from_slice(b);
        }
        bytes.push(0);
        let _ = ChitchatEnvelope::deserialize(&mut bytes.as_slice());
    }
}
