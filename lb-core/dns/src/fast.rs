//! The common query shape without hickory's general parser and encoder: one question of class
//! IN, no other records but an optional OPT (EDNS version 0, at most one option, and that one
//! Client Subnet), header flags a stub resolver sets. `parse` reads that shape in one bounded
//! pass over the bytes and refuses everything else, which then takes hickory's full path
//! (`answer.rs`). `encode` writes a reply made only of A and AAAA records byte for byte as
//! hickory's `MessageResponse` would (`tests_fast.rs` compares the two on random queries and
//! random snapshots); any other reply, or one that does not fit, is left to hickory too.
//!
//! Two details of hickory 0.25's encoder that the bytes must follow: the echoed question is
//! copied verbatim and never becomes a compression target, so the first answer's owner is
//! written in full; every later answer (same owner) is a pointer to that first owner.

use std::net::IpAddr;

use hickory_proto::rr::rdata::opt::ClientSubnet;
use hickory_proto::rr::{LowerName, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use super::reply::{Reply, EDNS_PAYLOAD};
use super::zones::{Place, ZoneSet};
use lb_core::config::LbId;

/// The longest name in wire form (RFC 1035 section 2.3.4).
pub(crate) const MAX_NAME: usize = 255;

const TYPE_OPT: u16 = 41;
const CLASS_IN: u16 = 1;
const OPTION_SUBNET: u16 = 8;

/// Header bits a query in the fast shape may set: RD, AD, CD. QR, the opcode, AA, TC, Z and
/// the rcode must be zero.
const ALLOWED_FLAGS: u16 = 0x0100 | 0x0020 | 0x0010;
/// Of those, what a response copies (`Header::response_from_request`): RD and CD.
const ECHOED_FLAGS: u16 = 0x0100 | 0x0010;
/// QR and AA.
const RESPONSE_FLAGS: u16 = 0x8000 | 0x0400;

/// A query in the fast shape, borrowing the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FastQuery<'a> {
    pub id: u16,
    /// The header's flag word (only `ALLOWED_FLAGS` may be set).
    pub flags: u16,
    /// The question section as received: name, type, class.
    pub question: &'a [u8],
    /// The name in wire form, lower-cased (ASCII), with its root label: what the name table
    /// (`FastNames`) is keyed by.
    pub lower: [u8; MAX_NAME],
    pub lower_len: usize,
    pub qtype: RecordType,
    pub edns: Option<FastEdns>,
}

impl FastQuery<'_> {
    pub fn lower_name(&self) -> &[u8] {
        &self.lower[..self.lower_len]
    }

    /// The most a UDP answer may take: the client's EDNS size within [512, ours], else 512.
    pub fn udp_max(&self) -> usize {
        self.edns
            .map_or(512, |e| e.payload.clamp(512, EDNS_PAYLOAD)) as usize
    }
}

/// The query's OPT record, as far as an answer depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FastEdns {
    pub payload: u16,
    pub subnet: Option<ClientSubnet>,
    /// The DO bit, copied into the answer (RFC 3225 section 3).
    pub dnssec_ok: bool,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*bytes.get(at)?, *bytes.get(at + 1)?]))
}

/// The fast shape, or `None` (then hickory's full path decides what the bytes are).
pub(crate) fn parse(bytes: &[u8]) -> Option<FastQuery<'_>> {
    let id = u16_at(bytes, 0)?;
    let flags = u16_at(bytes, 2)?;
    if flags & !ALLOWED_FLAGS != 0 {
        return None;
    }
    let counts = (
        u16_at(bytes, 4)?,
        u16_at(bytes, 6)?,
        u16_at(bytes, 8)?,
        u16_at(bytes, 10)?,
    );
    let additional = match counts {
        (1, 0, 0, n @ (0 | 1)) => n,
        _ => return None,
    };
    let mut lower = [0u8; MAX_NAME];
    let mut at = 12;
    loop {
        let len = usize::from(*bytes.get(at)?);
        // A pointer, an extended label type, or a name past 255 bytes: not the fast shape.
        if len > 63 || at - 12 + len + 1 > MAX_NAME {
            return None;
        }
        lower[at - 12] = len as u8;
        if len == 0 {
            at += 1;
            break;
        }
        let label = bytes.get(at + 1..at + 1 + len)?;
        for (i, &b) in label.iter().enumerate() {
            // Host-name characters only (and `_`, as in service names); anything else goes
            // to hickory, which knows what to make of it.
            if !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                return None;
            }
            lower[at - 12 + 1 + i] = b.to_ascii_lowercase();
        }
        at += 1 + len;
    }
    let lower_len = at - 12;
    let qtype = RecordType::from(u16_at(bytes, at)?);
    if u16_at(bytes, at + 2)? != CLASS_IN {
        return None;
    }
    let question = bytes.get(12..at + 4)?;
    at += 4;
    let edns = if additional == 1 {
        let (edns, end) = parse_opt(bytes, at)?;
        at = end;
        Some(edns)
    } else {
        None
    };
    // Nothing after the last record.
    if at != bytes.len() {
        return None;
    }
    Some(FastQuery {
        id,
        flags,
        question,
        lower,
        lower_len,
        qtype,
        edns,
    })
}

/// An OPT record at `at`: root owner, EDNS version 0, no extended rcode, at most one option,
/// which is Client Subnet with exactly the address bytes its source prefix needs (RFC 7871
/// section 6). Returns where it ends.
fn parse_opt(bytes: &[u8], at: usize) -> Option<(FastEdns, usize)> {
    if *bytes.get(at)? != 0 || u16_at(bytes, at + 1)? != TYPE_OPT {
        return None;
    }
    let payload = u16_at(bytes, at + 3)?;
    // TTL: extended rcode, version, then DO and Z (the rest of Z ignored, as hickory's
    // builder does).
    if *bytes.get(at + 5)? != 0 || *bytes.get(at + 6)? != 0 {
        return None;
    }
    let dnssec_ok = *bytes.get(at + 7)? & 0x80 != 0;
    let rdlen = usize::from(u16_at(bytes, at + 9)?);
    let rdata = bytes.get(at + 11..at + 11 + rdlen)?;
    let end = at + 11 + rdlen;
    if rdata.is_empty() {
        return Some((
            FastEdns {
                payload,
                subnet: None,
                dnssec_ok,
            },
            end,
        ));
    }
    if u16_at(rdata, 0)? != OPTION_SUBNET {
        return None;
    }
    let option_len = usize::from(u16_at(rdata, 2)?);
    if 4 + option_len != rdata.len() {
        return None;
    }
    let family = u16_at(rdata, 4)?;
    let source = *rdata.get(6)?;
    let scope = *rdata.get(7)?;
    let address = &rdata[8..];
    let needed = usize::from(source).div_ceil(8);
    if address.len() != needed {
        return None;
    }
    let ip = match family {
        1 if source <= 32 => {
            let mut octets = [0u8; 4];
            octets[..needed].copy_from_slice(address);
            IpAddr::from(octets)
        }
        2 if source <= 128 => {
            let mut octets = [0u8; 16];
            octets[..needed].copy_from_slice(address);
            IpAddr::from(octets)
        }
        _ => return None,
    };
    Some((
        FastEdns {
            payload,
            subnet: Some(ClientSubnet::new(ip, source, scope)),
            dnssec_ok,
        },
        end,
    ))
}

/// Writes `reply` to `query` into `out` (cleared first) if every answer is an A or AAAA
/// record and the whole fits in `max` bytes; `false` leaves it to hickory. Every answer the
/// steering gives a load balancer is owned by its name (`responder.rs`), of which `owner` is the
/// wire form.
pub(crate) fn encode(
    query: &FastQuery<'_>,
    reply: &Reply<'_>,
    owner: &[u8],
    max: usize,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    if reply.answers.is_empty()
        || !reply.ns.is_empty()
        || reply.soa.is_some()
        || reply.truncated
        || !reply.authoritative
        || reply.rcode != hickory_proto::op::ResponseCode::NoError
    {
        return false;
    }
    debug_assert!(reply
        .answers
        .iter()
        .all(|r| r.name().to_bytes().is_ok_and(|b| b == owner)));
    let Ok(count) = u16::try_from(reply.answers.len()) else {
        return false;
    };
    write_head(query, count, out);
    let first_owner = out.len();
    write_answers(reply.answers.iter().map(|r| &**r), owner, first_owner, out)
        && write_opt(query, reply.ecs, out)
        && out.len() <= max
}

/// Writes a reply to `query` whose answer section is `answers` (`count` records encoded by
/// `write_answers` for a question as long as this one's) into `out`, cleared first; `false`
/// when it does not fit in `max` bytes. What `encode` writes for the same records.
pub(crate) fn encode_prepared(
    query: &FastQuery<'_>,
    count: u16,
    answers: &[u8],
    ecs: Option<ClientSubnet>,
    max: usize,
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    write_head(query, count, out);
    out.extend_from_slice(answers);
    write_opt(query, ecs, out) && out.len() <= max
}

/// The header of a reply to `query` with `count` answers, and its question as received.
fn write_head(query: &FastQuery<'_>, count: u16, out: &mut Vec<u8>) {
    let flags = RESPONSE_FLAGS | (query.flags & ECHOED_FLAGS);
    out.extend_from_slice(&query.id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&u16::from(query.edns.is_some()).to_be_bytes());
    out.extend_from_slice(query.question);
}

/// Where the first answer's owner starts in a reply whose question names `owner`: right after
/// the header and the question (name, type, class).
pub(crate) fn first_owner_at(owner: &[u8]) -> usize {
    12 + owner.len() + 4
}

/// Appends `records` (A and AAAA only, all owned by `owner`) as an answer section that starts
/// at offset `first_owner` of the message: the first owner in full, the others pointing to it.
/// `false` for any other record type or an offset a pointer cannot reach.
pub(crate) fn write_answers<'r>(
    records: impl Iterator<Item = &'r Record>,
    owner: &[u8],
    first_owner: usize,
    out: &mut Vec<u8>,
) -> bool {
    if first_owner > 0x3FFF {
        return false;
    }
    for (i, record) in records.enumerate() {
        if i == 0 {
            out.extend_from_slice(owner);
        } else {
            out.extend_from_slice(&(0xC000 | first_owner as u16).to_be_bytes());
        }
        let (rtype, rdata): (u16, &[u8]) = match record.data() {
            RData::A(a) => (1, &a.0.octets()),
            RData::AAAA(aaaa) => (28, &aaaa.0.octets()),
            _ => return false,
        };
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&u16::from(record.dns_class()).to_be_bytes());
        out.extend_from_slice(&record.ttl().to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
    }
    true
}

/// The OPT record of a reply to `query`, if it had one: our payload size, the ECS option
/// `ecs` when there is one. `false` for an ECS option that cannot be written.
fn write_opt(query: &FastQuery<'_>, ecs: Option<ClientSubnet>, out: &mut Vec<u8>) -> bool {
    let Some(edns) = query.edns else {
        return true;
    };
    // OPT: root owner, our payload size as the class, TTL: rcode 0, version 0, the query's DO.
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
    let flags: u32 = if edns.dnssec_ok { 0x8000 } else { 0 };
    out.extend_from_slice(&flags.to_be_bytes());
    let Some(ecs) = ecs else {
        out.extend_from_slice(&0u16.to_be_bytes());
        return true;
    };
    let needed = usize::from(ecs.source_prefix()).div_ceil(8);
    let mut octets = [0u8; 16];
    let family: u16 = match ecs.addr() {
        IpAddr::V4(v4) => {
            octets[..4].copy_from_slice(&v4.octets());
            if needed > 4 {
                return false;
            }
            1
        }
        IpAddr::V6(v6) => {
            octets.copy_from_slice(&v6.octets());
            2
        }
    };
    let Some(address) = octets.get(..needed) else {
        return false;
    };
    let option_len = 4 + needed as u16;
    out.extend_from_slice(&(4 + option_len).to_be_bytes());
    out.extend_from_slice(&OPTION_SUBNET.to_be_bytes());
    out.extend_from_slice(&option_len.to_be_bytes());
    out.extend_from_slice(&family.to_be_bytes());
    out.push(ecs.source_prefix());
    out.push(ecs.scope_prefix());
    out.extend_from_slice(address);
    true
}

/// A name in full, as its labels are (no compression: the first name after the question).
fn emit_name(name: &Name, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    for label in name.iter() {
        if label.is_empty() || label.len() > 63 {
            return false;
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label);
    }
    out.push(0);
    out.len() - start <= MAX_NAME
}

/// Load-balanced names by their lower-cased wire form, with the zone each is answered in:
/// the names the fast path answers. Built once per configuration.
#[derive(Debug, Default)]
pub(crate) struct FastNames {
    names: std::collections::HashMap<Box<[u8]>, (LbId, usize)>,
    /// Each load balancer's name in wire form, as configured (the answers' owner).
    owners: Vec<Box<[u8]>>,
}

impl FastNames {
    pub fn build(zones: &ZoneSet, lb_names: &[Name]) -> FastNames {
        let mut names = std::collections::HashMap::with_capacity(lb_names.len());
        let mut owners = Vec::with_capacity(lb_names.len());
        for owner in lb_names {
            let mut wire = Vec::with_capacity(MAX_NAME);
            emit_name(owner, &mut wire);
            owners.push(wire.into_boxed_slice());
        }
        for (i, owner) in lb_names.iter().enumerate() {
            let lower = LowerName::new(owner);
            if let Place::Inside {
                zone, lb: Some(lb), ..
            } = zones.place(&lower)
            {
                debug_assert_eq!(lb.0, i);
                let mut wire = Vec::with_capacity(MAX_NAME);
                if !emit_name(&owner.to_lowercase(), &mut wire) {
                    continue;
                }
                names.insert(wire.into_boxed_slice(), (lb, zone));
            }
        }
        FastNames { names, owners }
    }

    /// Load balancer `lb`'s name in wire form.
    pub fn owner(&self, lb: LbId) -> &[u8] {
        self.owners.get(lb.0).map_or(&[], |o| &o[..])
    }

    /// The load balancer named `lower` (wire form, lower case) and its zone.
    pub fn get(&self, lower: &[u8]) -> Option<(LbId, usize)> {
        self.names.get(lower).copied()
    }
}
