//! One reply as it is being built: its code, flags and the records it borrows from the
//! responder's pre-built ones (`responder.rs` fills it, `fast.rs` and hickory encode it).

use std::borrow::Cow;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::opt::ClientSubnet;
use hickory_proto::rr::{Record, RecordType};
use lb_core::config::{LbId, PoolId};

use super::metrics::qtype_index;

/// Our EDNS UDP payload size (the DNS flag day 2020 value: no fragmentation).
pub const EDNS_PAYLOAD: u16 = 1232;

/// One reply, borrowing the pre-built records.
#[derive(Debug)]
pub(crate) struct Reply<'a> {
    pub rcode: ResponseCode,
    pub authoritative: bool,
    pub answers: Vec<Cow<'a, Record>>,
    pub ns: &'a [Record],
    pub soa: Option<&'a Record>,
    /// The ECS option to echo, with its scope (RFC 7871 section 7.2.1).
    pub ecs: Option<ClientSubnet>,
    pub lb: Option<LbId>,
    /// The pool the answer's records are of, when steering chose one.
    pub pool: Option<PoolId>,
    pub qtype: usize,
    pub truncated: bool,
    /// The NSID to answer with, when the query asked for it (RFC 5001).
    pub nsid: Option<&'a [u8]>,
    /// The COOKIE option to answer with: the client's cookie and a fresh server cookie.
    pub cookie: Option<[u8; 24]>,
}

impl<'a> Reply<'a> {
    pub(crate) fn new(rcode: ResponseCode) -> Self {
        Reply {
            rcode,
            authoritative: false,
            answers: Vec::new(),
            ns: &[],
            soa: None,
            ecs: None,
            lb: None,
            pool: None,
            qtype: qtype_index(RecordType::Unknown(0)),
            truncated: false,
            nsid: None,
            cookie: None,
        }
    }
}

impl Reply<'_> {
    /// The same reply with no records and TC set: what fits when the full one does not.
    /// The answer to a query over the rate limit that slips (`rrl.rs`): empty, truncated, so
    /// that a real resolver asks again over TCP.
    pub(crate) fn slipped() -> Reply<'static> {
        Reply {
            truncated: true,
            ..Reply::new(ResponseCode::NoError)
        }
    }

    pub(crate) fn truncated<'b>(full: &Reply<'_>) -> Reply<'b> {
        Reply {
            rcode: full.rcode,
            authoritative: full.authoritative,
            answers: Vec::new(),
            ns: &[],
            soa: None,
            ecs: full.ecs,
            lb: full.lb,
            pool: full.pool,
            qtype: full.qtype,
            truncated: true,
            nsid: None,
            cookie: full.cookie,
        }
    }
}
