//! The cards after a gossip message (`vendor/chitchat/src/tier.rs`): they read back as
//! written, a count past `MAX_CARDS` is refused, and they are a pure suffix, so a reader of
//! the previous release, which stops at the message's end, reads the same message.

use chitchat::{ChitchatEnvelope, ChitchatMessage, PeerCard, ProtocolVersion, MAX_CARDS};

fn card(i: u8, age_ds: u16) -> PeerCard {
    PeerCard {
        addr: ([127, 0, 0, i], 7946).into(),
        age_ds,
    }
}

fn ack(version: ProtocolVersion, peers: Vec<PeerCard>) -> ChitchatEnvelope {
    ChitchatEnvelope {
        version,
        message: ChitchatMessage::Ack {
            delta: Default::default(),
        },
        peers,
    }
}

#[test]
fn cards_after_a_message_read_back_as_written() {
    let peers = vec![card(1, 0), card(2, 35)];
    let bytes = ack(ProtocolVersion::V2, peers.clone()).serialize_to_vec();
    let read = ChitchatEnvelope::deserialize(&mut bytes.as_slice()).expect("reads");
    assert_eq!(read.peers, peers);
    assert_eq!(read.message, ack(ProtocolVersion::V2, Vec::new()).message);
}

#[test]
fn cards_are_a_suffix_a_reader_that_stops_at_the_message_never_sees() {
    let bare = ack(ProtocolVersion::V2, Vec::new()).serialize_to_vec();
    let carded = ack(ProtocolVersion::V2, vec![card(1, 0), card(2, 9)]).serialize_to_vec();
    assert!(carded.len() > bare.len());
    assert_eq!(&carded[..bare.len()], bare.as_slice());
}

#[test]
fn messages_before_protocol_version_2_carry_no_cards() {
    let bare = ack(ProtocolVersion::V1, Vec::new()).serialize_to_vec();
    let carded = ack(ProtocolVersion::V1, vec![card(1, 0)]).serialize_to_vec();
    assert_eq!(carded, bare);
}

#[test]
fn a_card_count_past_the_cap_is_refused() {
    let mut bytes = ack(ProtocolVersion::V2, vec![card(1, 0)]).serialize_to_vec();
    let bare = ack(ProtocolVersion::V2, Vec::new())
        .serialize_to_vec()
        .len();
    // The tag, then the count.
    bytes[bare + 1] = u8::try_from(MAX_CARDS + 1).expect("small");
    assert!(ChitchatEnvelope::deserialize(&mut bytes.as_slice()).is_err());
}

#[test]
fn a_truncated_card_is_refused() {
    let mut bytes = ack(ProtocolVersion::V2, vec![card(1, 0), card(2, 0)]).serialize_to_vec();
    bytes.pop();
    assert!(ChitchatEnvelope::deserialize(&mut bytes.as_slice()).is_err());
}
