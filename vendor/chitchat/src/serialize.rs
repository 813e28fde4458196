use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use bytes::Buf;

use crate::{ChitchatId, Heartbeat};

/// Trait to serialize messages.
///
/// Chitchat uses a custom binary serialization format.
/// The point of this format is to make it possible
/// to truncate the delta payload to a given mtu.
pub trait Serializable {
    fn serialize(&self, buf: &mut Vec<u8>);

    fn serialize_to_vec(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        self.serialize(&mut buf);
        buf
    }

    fn serialized_len(&self) -> usize;
}

/// Trait to deserialize messages.
///
/// Chitchat uses a custom binary serialization format.
/// The point of this format is to make it possible
/// to truncate the delta payload to a given mtu.
pub trait Deserializable: Sized {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self>;
}

impl Serializable for u8 {
    fn serialize(&self, buf: &mut Vec<u8>) {
        buf.push(*self)
    }

    fn serialized_len(&self) -> usize {
        1
    }
}

impl Deserializable for u8 {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let byte: [u8; 1] = Deserializable::deserialize(buf)?;
        Ok(byte[0])
    }
}

impl Serializable for u16 {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.to_le_bytes().serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        2
    }
}

impl Deserializable for u16 {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let u16_bytes: [u8; 2] = Deserializable::deserialize(buf)?;
        Ok(Self::from_le_bytes(u16_bytes))
    }
}

impl Serializable for u32 {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.to_le_bytes().serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        4
    }
}

impl Deserializable for u32 {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let u32_bytes: [u8; 4] = Deserializable::deserialize(buf)?;
        Ok(Self::from_le_bytes(u32_bytes))
    }
}

impl Serializable for u64 {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.to_le_bytes().serialize(buf);
    }
    fn serialized_len(&self) -> usize {
        8
    }
}
impl Deserializable for u64 {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let u64_bytes: [u8; 8] = Deserializable::deserialize(buf)?;
        Ok(Self::from_le_bytes(u64_bytes))
    }
}

impl Serializable for bool {
    fn serialize(&self, buf: &mut Vec<u8>) {
        buf.push(*self as u8);
    }
    fn serialized_len(&self) -> usize {
        1
    }
}

impl Deserializable for bool {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let bool_byte: [u8; 1] = Deserializable::deserialize(buf)?;
        Ok(bool_byte[0] != 0)
    }
}

#[repr(u8)]
enum IpVersion {
    V4 = 4u8,
    V6 = 6u8,
}

impl TryFrom<u8> for IpVersion {
    type Error = anyhow::Error;

    fn try_from(ip_type_byte: u8) -> anyhow::Result<Self> {
        if ip_type_byte == IpVersion::V4 as u8 {
            Ok(IpVersion::V4)
        } else if ip_type_byte == IpVersion::V6 as u8 {
            Ok(IpVersion::V6)
        } else {
            bail!("Invalid IP version byte. Expected `4` or `6`, got `{ip_type_byte}`.");
        }
    }
}

impl Serializable for IpAddr {
    fn serialize(&self, buf: &mut Vec<u8>) {
        match self {
            IpAddr::V4(ip_v4) => {
                buf.push(IpVersion::V4 as u8);
                buf.extend_from_slice(&ip_v4.octets());
            }
            IpAddr::V6(ip_v6) => {
                buf.push(IpVersion::V6 as u8);
                buf.extend_from_slice(&ip_v6.octets());
            }
        }
    }

    fn serialized_len(&self) -> usize {
        1 + match self {
            IpAddr::V4(_) => 4,
            IpAddr::V6(_) => 16,
        }
    }
}

impl Deserializable for IpAddr {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let ip_version_byte: [u8; 1] = Deserializable::deserialize(buf)?;
        let ip_version = IpVersion::try_from(ip_version_byte[0])?;
        match ip_version {
            IpVersion::V4 => {
                let bytes: [u8; 4] = Deserializable::deserialize(buf)?;
                Ok(Ipv4Addr::from(bytes).into())
            }
            IpVersion::V6 => {
                let bytes: [u8; 16] = Deserializable::deserialize(buf)?;
                Ok(Ipv6Addr::from(bytes).into())
            }
        }
    }
}

impl Serializable for String {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.as_str().serialize(buf)
    }

    fn serialized_len(&self) -> usize {
        self.as_str().serialized_len()
    }
}

fn deserialize_str<'a>(buf: &mut &'a [u8]) -> anyhow::Result<&'a str> {
    let len: usize = u16::deserialize(buf)? as usize;
    let str_bytes = buf.get(..len).with_context(|| {
        format!(
            "failed to deserialize string, buffer too short (str_len={len}, buf_len={})",
            buf.len()
        )
    })?;
    let s = std::str::from_utf8(str_bytes)?;
    buf.consume(len);
    Ok(s)
}

impl Deserializable for String {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        Ok(deserialize_str(buf)?.to_owned())
    }
}

impl Deserializable for Arc<str> {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        Ok(Arc::from(deserialize_str(buf)?))
    }
}

impl Serializable for str {
    fn serialize(&self, buf: &mut Vec<u8>) {
        (self.len() as u16).serialize(buf);
        buf.extend(self.as_bytes())
    }

    fn serialized_len(&self) -> usize {
        2 + self.len()
    }
}

impl<const N: usize> Serializable for [u8; N] {
    fn serialize(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self[..]);
    }
    fn serialized_len(&self) -> usize {
        N
    }
}

impl<const N: usize> Deserializable for [u8; N] {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        if buf.len() < N {
            bail!("Buffer too short");
        }
        let val_bytes: [u8; N] = buf[..N].try_into()?;
        buf.consume(N);
        Ok(val_bytes)
    }
}

impl Serializable for SocketAddr {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.ip().serialize(buf);
        self.port().serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        self.ip().serialized_len() + self.port().serialized_len()
    }
}

impl Deserializable for SocketAddr {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let ip_addr = IpAddr::deserialize(buf)?;
        let port = u16::deserialize(buf)?;
        Ok(SocketAddr::new(ip_addr, port))
    }
}

impl Serializable for ChitchatId {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.node_id.serialize(buf);
        self.generation_id.serialize(buf);
        self.gossip_advertise_addr.serialize(buf)
    }

    fn serialized_len(&self) -> usize {
        self.node_id.serialized_len()
            + self.generation_id.serialized_len()
            + self.gossip_advertise_addr.serialized_len()
    }
}

impl Deserializable for ChitchatId {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let node_id: Arc<str> = Arc::<str>::deserialize(buf)?;
        let generation_id = u64::deserialize(buf)?;
        let gossip_advertise_addr = SocketAddr::deserialize(buf)?;
        Ok(Self {
            node_id,
            generation_id,
            gossip_advertise_addr,
        })
    }
}

impl Serializable for Heartbeat {
    fn serialize(&self, buf: &mut Vec<u8>) {
        self.0.serialize(buf);
    }

    fn serialized_len(&self) -> usize {
        self.0.serialized_len()
    }
}

impl Deserializable for Heartbeat {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let heartbeat = u64::deserialize(buf)?;
        Ok(Self(heartbeat))
    }
}

/// A compressed stream writer receives a sequence of `Serializable` and
/// serialize/compresses into blocks of a configurable size.
///
/// Block are tagged, so that blocks with a high entropy are stored kept "uncompressed".
///
/// The stream gives the client an upperbound of what the overall payload length would
/// be if another item was appended.
/// This makes it possible to enforce a `mtu`.
pub struct CompressedStreamWriter {
    output: Vec<u8>,
    // temporary buffer used for block compression.
    uncompressed_block: Vec<u8>,
    // ongoing block being serialized.
    compressed_block: Vec<u8>,
    block_threshold: usize,
}

impl CompressedStreamWriter {
    pub fn with_block_threshold(block_threshold: u16) -> CompressedStreamWriter {
        let block_threshold = block_threshold as usize;
        let output = Vec::with_capacity(block_threshold);
        CompressedStreamWriter {
            output,
            uncompressed_block: Vec::with_capacity(block_threshold * 2),
            compressed_block: Vec::with_capacity(block_threshold),
            block_threshold,
        }
    }

    /// Returns an upperbound of the serialized len after appending `s`
    pub fn serialized_len_upperbound_after<S: Serializable + ?Sized>(&self, item: &S) -> usize {
        let new_item_serialized_len = item.serialized_len();
        assert!(new_item_serialized_len > 0);
        const BLOCK_META_LEN: usize = 3;
        let new_block_needed =
            self.uncompressed_block.len() + new_item_serialized_len > self.block_threshold;
        if new_block_needed {
            BLOCK_META_LEN + self.output.len() + self.uncompressed_block.len() + // current block
                BLOCK_META_LEN + new_item_serialized_len // new block
                + 1 // No more blocks tag.
        } else {
            BLOCK_META_LEN + self.output.len() + self.uncompressed_block.len() + new_item_serialized_len // current block
                + 1 // No more blocks tag.
        }
    }

    /// Appends a new item to the stream. Items must be at most `u16::MAX` bytes long.
    pub fn append<S: Serializable + ?Sized>(&mut self, item: &S) {
        let item_len = item.serialized_len();
        assert!(item_len <= u16::MAX as usize);
        item.serialize(&mut self.uncompressed_block);
        while self.uncompressed_block.len() > self.block_threshold {
            // time to flush our current block.
            self.flush_block();
        }
    }

    /// Flush the first `block_threshold` bytes from the `uncompressed_block` buffer,
    /// and remove them from the buffer.
    ///
    /// If the buffer less bytes than `block_threshold`, compress the bytes available.
    /// (This happens for the last block.)
    fn flush_block(&mut self) {
        if self.uncompressed_block.is_empty() {
            return;
        }
        let num_bytes_to_compress = self.uncompressed_block.len().min(self.block_threshold);

        self.compressed_block.resize(num_bytes_to_compress, 0u8);
        match compress_to_buffer(
            &self.uncompressed_block[..num_bytes_to_compress],
            &mut self.compressed_block[..],
        ) {
            Ok(compressed_len) => {
                BlockType::Compressed.serialize(&mut self.output);
                let compressed_len_u16 = u16::try_from(compressed_len).unwrap();
                compressed_len_u16.serialize(&mut self.output);
                self.output.extend(&self.compressed_block[..compressed_len]);
            }
            // The compressed version was actually longer than the decompressed one.
            // Let's keep the block uncomopressed
            Err(_) => {
                BlockType::Uncompressed.serialize(&mut self.output);
                let num_bytes_to_compress_u16 =
                    u16::try_from(num_bytes_to_compress).expect("uncompressed block too big");
                num_bytes_to_compress_u16.serialize(&mut self.output);
                self.output
                    .extend(&self.uncompressed_block[..num_bytes_to_compress]);
            }
        }
        self.uncompressed_block.drain(..num_bytes_to_compress);
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.flush_block();
        BlockType::NoMoreBlocks.serialize(&mut self.output);
        self.output
    }
}

// meshlb patch: one zstd context per thread, reused. Upstream's `zstd::bulk` free functions
// create and initialise a fresh context for every block, which was ~9 % of a gossiping
// node's CPU (ZSTD_initCCtx / ZSTD_createDCtx), and zeroed a 64 KiB buffer per stream.
thread_local! {
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    static DECOMPRESSOR: std::cell::RefCell<(Option<zstd::bulk::Decompressor<'static>>, Vec<u8>)> =
        const { std::cell::RefCell::new((None, Vec::new())) };
}

/// `zstd::bulk::compress_to_buffer` at the default level, on this thread's context.
fn compress_to_buffer(source: &[u8], destination: &mut [u8]) -> std::io::Result<usize> {
    COMPRESSOR.with(|cell| {
        let compressor = &mut *cell.borrow_mut();
        let compressor = match compressor {
            Some(c) => c,
            None => compressor.insert(zstd::bulk::Compressor::new(0)?),
        };
        compressor.compress_to_buffer(source, destination)
    })
}

/// Decompresses one block (at most `u16::MAX` bytes once decompressed) onto the end of `out`,
/// through this thread's scratch buffer.
fn decompress_append(source: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    DECOMPRESSOR.with(|cell| {
        let (decompressor, scratch) = &mut *cell.borrow_mut();
        let decompressor = match decompressor {
            Some(d) => d,
            None => decompressor.insert(zstd::bulk::Decompressor::new()?),
        };
        if scratch.len() < u16::MAX as usize {
            scratch.resize(u16::MAX as usize, 0);
        }
        let n = decompressor.decompress_to_buffer(source, &mut scratch[..u16::MAX as usize])?;
        out.extend_from_slice(&scratch[..n]);
        Ok(())
    })
}

/// meshlb patch: the most a stream may decompress to. A message is at most two datagrams
/// (~128 KiB) of blocks that each decompress to up to 64 KiB, so tiny blocks of zeros could
/// make ~4 GB of one message; real deltas decompress to a few hundred KiB.
pub const MAX_DECOMPRESSED_STREAM: usize = 8 << 20;

pub fn deserialize_stream<D: Deserializable>(buf: &mut &[u8]) -> anyhow::Result<Vec<D>> {
    let mut decompressed_data = Vec::new();
    loop {
        if decompressed_data.len() > MAX_DECOMPRESSED_STREAM {
            anyhow::bail!(
                "stream decompresses to more than {MAX_DECOMPRESSED_STREAM} bytes, refused"
            );
        }
        let block_type = BlockType::deserialize(buf)?;
        match block_type {
            BlockType::Compressed => {
                let len = u16::deserialize(buf)? as usize;
                let compressed_block_bytes = buf.get(..len).context(
                    "failed to download compressed stream (compressed block): buffer too short",
                )?;
                decompress_append(compressed_block_bytes, &mut decompressed_data)
                    .context("failed to decompress block")?;
                buf.advance(len);
            }
            BlockType::Uncompressed => {
                let len = u16::deserialize(buf)? as usize;
                let block_bytes = buf.get(..len).context(
                    "failed to download compressed stream (uncompressed block): buffer too short",
                )?;
                decompressed_data.extend_from_slice(block_bytes);
                buf.advance(len);
            }
            BlockType::NoMoreBlocks => {
                break;
            }
        }
    }
    let mut decompressed_cursor = &decompressed_data[..];
    let mut items = Vec::new();
    while !decompressed_cursor.is_empty() {
        let item = D::deserialize(&mut decompressed_cursor)?;
        items.push(item);
    }
    Ok(items)
}

#[repr(u8)]
#[derive(Copy, Clone)]
enum BlockType {
    NoMoreBlocks,
    Compressed,
    Uncompressed,
}

impl Serializable for BlockType {
    fn serialize(&self, buf: &mut Vec<u8>) {
        (*self as u8).serialize(buf)
    }
    fn serialized_len(&self) -> usize {
        1
    }
}

impl Deserializable for BlockType {
    fn deserialize(buf: &mut &[u8]) -> anyhow::Result<Self> {
        let byte = u8::deserialize(buf)?;
        match byte {
            0 => Ok(BlockType::NoMoreBlocks),
            1 => Ok(BlockType::Compressed),
            2 => Ok(BlockType::Uncompressed),
            _ => anyhow::bail!("invalid block type"),
        }
    }
}

#[cfg(test)]
#[track_caller]
pub fn test_serdeser_aux<T: Serializable + Deserializable + PartialEq + std::fmt::Debug>(
    obj: &T,
    num_bytes: usize,
) {
    let mut buf = Vec::new();
    obj.serialize(&mut buf);
    assert_eq!(buf.len(), obj.serialized_len());
    assert_eq!(buf.len(), num_bytes);
    let obj_serdeser = T::deserialize(&mut &buf[..]).unwrap();
    assert_eq!(obj, &obj_serdeser);
}
