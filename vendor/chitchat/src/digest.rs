use std::collections::BTreeMap;

use crate::message::ProtocolVersion;
use crate::serialize::*;
use crate::{ChitchatId, Heartbeat, Version};

/// Block size used by the compressed digest stream.
const DIGEST_BLOCK_THRESHOLD: u16 = 16_384u16;

#[derive(Debug, Clone, Copy, Default, Eq, PartialEq)]
pub(crate) struct NodeDigest {
    pub(crate) heartbeat: Heartbeat,
    pub(crate) last_gc_version: Version,
    pub(crate) max_version: Version,
}

impl Serializable for NodeDigest {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.heartbeat.serialize(buf);
        self.last_gc_version.serialize(buf);
        self.max_version.serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        self.heartbeat.serialized_len()
            + self.last_gc_version.serialized_len()
            + self.max_version.serialized_len()
    }
}

impl Deserializable for NodeDigest {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let heartbeat = Heartbeat::deserialize(buf)?;
        let last_gc_version = Version::deserialize(buf)?;
        let max_version = Version::deserialize(buf)?;
        Ok(NodeDigest {
            heartbeat,
            last_gc_version,
            max_version,
        })
    }
}

/// Decodes one `(ChitchatId, NodeDigest)` entry of the compressed digest stream.
impl Deserializable for (ChitchatId, NodeDigest) {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let chitchat_id = ChitchatId::deserialize(buf)?;
        let node_digest = NodeDigest::deserialize(buf)?;
        Ok((chitchat_id, node_digest))
    }
}

/// A digest represents is a piece of information summarizing
/// the staleness of one peer's data.
///
/// It is equivalent to a map
/// peer -> (heartbeat, max version).
#[derive(Debug, Default, Eq, PartialEq)]
pub struct Digest {
    pub(crate) node_digests: BTreeMap<ChitchatId, NodeDigest>,
    /// meshlb patch (`src/bounded.rs`): the digest lists only some of the sender's members, so
    /// a member it does not list is not asked for (a full digest's absent member is unknown to
    /// the sender). Carried by protocol version 2 only.
    pub(crate) partial: bool,
    /// meshlb patch (`src/bounded.rs`): heartbeats of more members, 16 bytes each where an
    /// entry takes ~50: a member's id hash ([`crate::bounded::id_hash`]) and its heartbeat.
    /// Carried by protocol version 2 only.
    pub(crate) heartbeats: Vec<(u64, Heartbeat)>,
}

#[cfg(test)]
impl Digest {
    pub fn add_node(
        &mut self,
        node: ChitchatId,
        heartbeat: Heartbeat,
        last_gc_version: Version,
        max_version: Version,
    ) {
        let node_digest = NodeDigest {
            heartbeat,
            last_gc_version,
            max_version,
        };
        self.node_digests.insert(node, node_digest);
    }

    pub fn sample_for_test(num_nodes: u16) -> Digest {
        let mut digest = Digest::default();
        for i in 0..num_nodes {
            let node = ChitchatId::for_local_test(10_000 + i);
            digest.add_node(
                node,
                Heartbeat(100 + i as u64),
                i as u64 % 7,
                1_000 + i as u64,
            );
        }
        digest
    }
}

impl Digest {
    /// Serializes the digest using the wire format selected by `protocol_version`.
    pub(crate) fn serialize(&self, protocol_version: ProtocolVersion, buf: &mut Vec<u8>) {
        match protocol_version {
            ProtocolVersion::V0 => self.serialize_v0(buf),
            ProtocolVersion::V1 => self.serialize_v1(buf),
            ProtocolVersion::V2 => {
                buf.push(u8::from(self.partial));
                self.serialize_v0(buf);
                (self.heartbeats.len() as u16).serialize(buf);
                for (hash, heartbeat) in &self.heartbeats {
                    hash.serialize(buf);
                    heartbeat.serialize(buf);
                }
            }
        }
    }

    pub(crate) fn serialized_len(&self, protocol_version: ProtocolVersion) -> usize {
        match protocol_version {
            ProtocolVersion::V0 => {
                let mut len = (self.node_digests.len() as u16).serialized_len();
                for (chitchat_id, node_digest) in &self.node_digests {
                    len += chitchat_id.serialized_len();
                    len += node_digest.serialized_len();
                }
                len
            }
            ProtocolVersion::V1 => {
                let mut buf = Vec::new();
                self.serialize_v1(&mut buf);
                buf.len()
            }
            ProtocolVersion::V2 => {
                1 + self.serialized_len(ProtocolVersion::V0) + 2 + 16 * self.heartbeats.len()
            }
        }
    }

    pub(crate) fn deserialize(
        protocol_version: ProtocolVersion,
        buf: &mut &[u8],
    ) -> anyhow::Result<Self> {
        match protocol_version {
            ProtocolVersion::V0 => Self::deserialize_v0(buf),
            ProtocolVersion::V1 => Self::deserialize_v1(buf),
            ProtocolVersion::V2 => {
                let flags = u8::deserialize(buf)?;
                if flags > 1 {
                    anyhow::bail!("unknown digest flags {flags}");
                }
                let mut digest = Self::deserialize_v0(buf)?;
                digest.partial = flags == 1;
                let count = u16::deserialize(buf)?;
                // Each takes 16 bytes: a count the buffer cannot hold is refused before any
                // allocation.
                if usize::from(count) * 16 > buf.len() {
                    anyhow::bail!("{count} heartbeats in {} bytes", buf.len());
                }
                digest.heartbeats.reserve(usize::from(count));
                for _ in 0..count {
                    let hash = u64::deserialize(buf)?;
                    let heartbeat = Heartbeat::deserialize(buf)?;
                    digest.heartbeats.push((hash, heartbeat));
                }
                Ok(digest)
            }
        }
    }

    /// Serializes the digest using the V0 (uncompressed) wire format.
    fn serialize_v0(&self, buf: &mut Vec<u8>) {
        (self.node_digests.len() as u16).serialize(buf);
        for (chitchat_id, node_digest) in &self.node_digests {
            chitchat_id.serialize(buf);
            node_digest.serialize(buf);
        }
    }

    /// Serializes the digest using the V1 (compressed) wire format: a zstd block
    /// stream of `(ChitchatId, NodeDigest)` entries.
    fn serialize_v1(&self, buf: &mut Vec<u8>) {
        let mut stream_writer =
            CompressedStreamWriter::with_block_threshold(DIGEST_BLOCK_THRESHOLD);
        for (chitchat_id, node_digest) in &self.node_digests {
            stream_writer.append(chitchat_id);
            stream_writer.append(node_digest);
        }
        buf.extend_from_slice(&stream_writer.finish());
    }

    fn deserialize_v0(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let num_nodes = u16::deserialize(buf)?;
        let mut node_digests: BTreeMap<ChitchatId, NodeDigest> = Default::default();

        for _ in 0..num_nodes {
            let chitchat_id = ChitchatId::deserialize(buf)?;
            let node_digest = NodeDigest::deserialize(buf)?;
            node_digests.insert(chitchat_id, node_digest);
        }
        Ok(Digest {
            node_digests,
            partial: false,
            heartbeats: Vec::new(),
        })
    }

    fn deserialize_v1(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let node_digests = deserialize_stream::<(ChitchatId, NodeDigest)>(buf)?
            .into_iter()
            .collect();
        Ok(Digest {
            node_digests,
            partial: false,
            heartbeats: Vec::new(),
        })
    }
}
