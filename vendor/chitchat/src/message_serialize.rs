//! Wire (de)serialization for [`ChitchatMessage`], via [`ChitchatEnvelope`].
//!
//! This module is deliberately kept separate from the message model
//! (`message.rs`) so that the on-wire format can grow across protocol
//! versions without cluttering the data types.
//!
//! The protocol version is not carried by [`ChitchatMessage`]: it is stamped
//! in [`ChitchatEnvelope`], which owns the wire format below, and it
//! drives the digest encoding (mirroring [`Digest`], whose encoding it
//! selects).

use std::io::BufRead;

use anyhow::{Context, bail};

use crate::delta::Delta;
use crate::digest::Digest;
use crate::message::{ChitchatEnvelope, ChitchatMessage, ProtocolVersion};
use crate::serialize::{Deserializable, Serializable};

const MAGIC_NUMBER: u16 = 45_139;

#[derive(Clone, Copy)]
#[repr(u8)]
enum MessageType {
    Syn = 0,
    SynAck = 1u8,
    Ack = 2u8,
    BadCluster = 3u8,
    #[cfg(test)]
    PanicForTest = 255u8,
}

impl MessageType {
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Syn),
            1 => Some(Self::SynAck),
            2 => Some(Self::Ack),
            3 => Some(Self::BadCluster),
            #[cfg(test)]
            255 => Some(Self::PanicForTest),
            _ => None,
        }
    }

    pub fn to_code(self) -> u8 {
        self as u8
    }
}

impl ChitchatEnvelope {
    /// Bytes written before the message body: magic number (2) + protocol
    /// version (1) + message type (1).
    pub(crate) const HEADER_LEN: usize = 2 + 1 + 1;

    /// Serializes the message. The protocol version is stamped in the header
    /// and drives the digest encoding.
    // meshlb patch: public, so that a custom `Transport` can seal the bytes (upstream keeps the
    // envelope codec crate-private).
    pub fn serialize(&self, buf: &mut Vec<u8>) {
        buf.extend(MAGIC_NUMBER.to_le_bytes());
        self.version.to_code().serialize(buf);

        match &self.message {
            ChitchatMessage::Syn {
                cluster_id,
                digest,
                delta,
            } => {
                buf.push(MessageType::Syn.to_code());
                digest.serialize(self.version, buf);
                cluster_id.serialize(buf);
                if self.version >= ProtocolVersion::V2 {
                    delta.serialize(buf);
                }
            }
            ChitchatMessage::SynAck { digest, delta } => {
                buf.push(MessageType::SynAck.to_code());
                digest.serialize(self.version, buf);
                delta.serialize(buf);
            }
            ChitchatMessage::Ack { delta } => {
                buf.push(MessageType::Ack.to_code());
                delta.serialize(buf);
            }
            ChitchatMessage::BadCluster => {
                buf.push(MessageType::BadCluster.to_code());
            }
            #[cfg(test)]
            ChitchatMessage::PanicForTest => {
                buf.push(MessageType::PanicForTest.to_code());
            }
        }
        // meshlb patch: the cards after the message (`src/tier.rs`).
        if self.version >= ProtocolVersion::V2 {
            crate::tier::serialize_cards(&self.peers, buf);
        }
    }

    pub fn serialize_to_vec(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        self.serialize(&mut buf);
        buf
    }

    #[cfg(test)]
    pub(crate) fn serialized_len(&self) -> usize {
        Self::HEADER_LEN
            + match &self.message {
                ChitchatMessage::Syn {
                    cluster_id,
                    digest,
                    delta,
                } => {
                    cluster_id.serialized_len()
                        + digest.serialized_len(self.version)
                        + if self.version >= ProtocolVersion::V2 {
                            delta.serialized_len()
                        } else {
                            0
                        }
                }
                ChitchatMessage::SynAck { digest, delta } => {
                    digest.serialized_len(self.version) + delta.serialized_len()
                }
                ChitchatMessage::Ack { delta } => delta.serialized_len(),
                ChitchatMessage::BadCluster => 0,
                #[cfg(test)]
                ChitchatMessage::PanicForTest => 0,
            }
    }

    /// Deserializes a message, reading the protocol version from the header.
    /// The version is needed both to decode the digest and by the caller: a
    /// responder echoes it so its reply is encoded with a format the
    /// initiator is guaranteed to understand.
    pub fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        if buf.len() < 3 {
            bail!("buffer too small to store the magic number and the protocol version");
        }
        let magic_number = u16::from_le_bytes(buf[0..2].try_into().unwrap());
        if magic_number != MAGIC_NUMBER {
            bail!("invalid chitchat magic number");
        }
        let version = ProtocolVersion::from_code(buf[2]).context("invalid protocol version")?;
        buf.consume(3);

        let message_type = buf
            .first()
            .copied()
            .and_then(MessageType::from_code)
            .context("invalid message type")?;
        buf.consume(1);

        let message = match message_type {
            MessageType::Syn => {
                let digest = Digest::deserialize(version, buf)?;
                let cluster_id = String::deserialize(buf)?;
                let delta = if version >= ProtocolVersion::V2 {
                    Delta::deserialize(buf)?
                } else {
                    Delta::default()
                };
                ChitchatMessage::Syn {
                    cluster_id,
                    digest,
                    delta,
                }
            }
            MessageType::SynAck => {
                let digest = Digest::deserialize(version, buf)?;
                let delta = Delta::deserialize(buf)?;
                ChitchatMessage::SynAck { digest, delta }
            }
            MessageType::Ack => {
                let delta = Delta::deserialize(buf)?;
                ChitchatMessage::Ack { delta }
            }
            MessageType::BadCluster => ChitchatMessage::BadCluster,
            #[cfg(test)]
            MessageType::PanicForTest => ChitchatMessage::PanicForTest,
        };
        // meshlb patch: the cards after the message (`src/tier.rs`). Readers of the previous
        // release stop before them.
        let peers = if version >= ProtocolVersion::V2 {
            crate::tier::deserialize_cards(buf)?
        } else {
            Vec::new()
        };
        Ok(ChitchatEnvelope {
            version,
            message,
            peers,
        })
    }
}
