//! The query pipeline: a query's bytes in, the answer's bytes out. A query for a load-balanced
//! name whose answer is planned is answered from the snapshot's prepared answers
//! (`prepared.rs`); one the fast parser reads is steered and encoded directly (`fast.rs`);
//! anything else goes through hickory's message types (`responder.rs`). The listeners
//! (`server.rs`) only move bytes to and from here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Header, Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode};
use hickory_proto::rr::RecordType;
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncoder};
use hickory_proto::ProtoErrorKind;
use hickory_server::authority::MessageRequest;
use lb_core::config::{EndpointId, LbId, PoolId};
use lb_core::health::HealthSnapshot;
use lb_core::request::RequestContext;
use lb_core::steering::{locate, DnsAnswerPlan, PlanScope};

use super::cookie::{self, Presented};
use super::fast;
use super::metrics::{qtype_index, rcode_index};
use super::prepared::{LocatedKey, Prepared, PreparedAnswers};
use super::reply::{Reply, EDNS_PAYLOAD};
use super::responder::Responder;

/// Where a query came over: UDP answers fit the client's EDNS size (else 512 bytes) and are
/// truncated beyond it; TCP answers may take a whole message (RFC 7766 section 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Udp,
    Tcp,
}

/// Which load balancer, and which of its pools, a query was answered for (dnstap's `extra`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steered {
    pub lb: Option<LbId>,
    pub pool: Option<PoolId>,
}

impl Responder {
    /// Answers one datagram into `out` (cleared first). `false`: send nothing (a response, or
    /// bytes too broken to carry a header).
    pub fn answer_datagram(&self, bytes: &[u8], src: SocketAddr, out: &mut Vec<u8>) -> bool {
        self.answer(bytes, src, out, Transport::Udp, &mut Steered::default())
    }

    /// `answer_datagram`, telling what the answer was steered to in `steered`.
    pub fn answer_datagram_steered(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        steered: &mut Steered,
    ) -> bool {
        self.answer(bytes, src, out, Transport::Udp, steered)
    }

    /// Answers one query read from a TCP connection into `out` (cleared first, no length
    /// prefix). `false`: send nothing, and close (a response, or bytes with no header).
    pub fn answer_stream(&self, bytes: &[u8], src: SocketAddr, out: &mut Vec<u8>) -> bool {
        self.answer(bytes, src, out, Transport::Tcp, &mut Steered::default())
    }

    /// `answer_stream`, telling what the answer was steered to in `steered`.
    pub fn answer_stream_steered(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        steered: &mut Steered,
    ) -> bool {
        self.answer(bytes, src, out, Transport::Tcp, steered)
    }

    /// `answer_datagram` without the fast path (`tests_fast.rs` compares the two).
    #[cfg(test)]
    pub(crate) fn answer_datagram_full(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
    ) -> bool {
        out.clear();
        self.answer_full(
            bytes,
            src,
            out,
            Transport::Udp,
            None,
            &mut Steered::default(),
        )
    }

    fn answer(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        via: Transport,
        steered: &mut Steered,
    ) -> bool {
        // One query in `TIMED_ONE_IN` is timed (`metrics.rs`).
        let start = super::metrics::timed().then(Instant::now);
        out.clear();
        if let Some(query) = fast::parse(bytes) {
            if let Some(answered) = self.answer_fast(&query, bytes, src, out, via, start, steered) {
                return answered;
            }
        }
        self.answer_full(bytes, src, out, via, start, steered)
    }

    /// The fast shape (`fast.rs`) asking a load-balanced name for A or AAAA; `None` for any
    /// other query, which then takes the full path.
    #[allow(clippy::too_many_arguments)]
    fn answer_fast(
        &self,
        query: &fast::FastQuery<'_>,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        via: Transport,
        start: Option<Instant>,
        steered: &mut Steered,
    ) -> Option<bool> {
        if !matches!(query.qtype, RecordType::A | RecordType::AAAA) {
            return None;
        }
        let (lb, zone) = self.fast_names.get(query.lower_name())?;
        let subnet = query.edns.and_then(|e| e.subnet);
        let max = match via {
            Transport::Udp => query.udp_max(),
            Transport::Tcp => usize::from(u16::MAX),
        };
        steered.lb = Some(lb);
        if self.answer_prepared(query, lb, subnet, src, max, (out, &mut steered.pool)) {
            self.metrics.record(
                Some(lb),
                qtype_index(query.qtype),
                rcode_index(ResponseCode::NoError),
                start.map(|s| s.elapsed().as_secs_f64()),
            );
            return Some(true);
        }
        let reply = self.steered_reply(lb, zone, query.qtype, subnet, src.ip());
        steered.pool = reply.pool;
        if !fast::encode(query, &reply, self.fast_names.owner(lb), max, out) {
            // NODATA, or more than fits: the same reply through hickory's encoder.
            let Ok(req) = MessageRequest::read(&mut BinDecoder::new(bytes)) else {
                return Some(false);
            };
            if !emit(&req, &reply, max, out) {
                return Some(false);
            }
        }
        self.metrics.record(
            reply.lb,
            reply.qtype,
            rcode_index(reply.rcode),
            start.map(|s| s.elapsed().as_secs_f64()),
        );
        Some(true)
    }

    /// Any query, through hickory's parser and encoder.
    fn answer_full(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        via: Transport,
        start: Option<Instant>,
        steered: &mut Steered,
    ) -> bool {
        let req = match MessageRequest::read(&mut BinDecoder::new(bytes)) {
            Ok(req) => req,
            Err(e) => {
                if let ProtoErrorKind::FormError { header, .. } = e.kind() {
                    if header.message_type() == MessageType::Query {
                        return error_only(header, ResponseCode::FormErr, out);
                    }
                }
                return false;
            }
        };
        if req.message_type() != MessageType::Query {
            return false;
        }
        // A query with a COOKIE or NSID option takes this path (the fast parser takes ECS
        // alone).
        let mut reply = match self.cookie_in(&req, src.ip()) {
            Some(Presented::Malformed) => {
                let mut r = Reply::new(ResponseCode::FormErr);
                r.qtype = super::metrics::qtype_index(
                    req.queries()
                        .first()
                        .map_or(RecordType::Unknown(0), |q| q.query_type()),
                );
                r
            }
            Some(Presented::Client { client, .. }) => {
                let mut r = self.reply(&req, src.ip());
                r.cookie = self
                    .cookies
                    .map(|c| c.make(client, src.ip(), cookie::now()));
                r
            }
            None => self.reply(&req, src.ip()),
        };
        if req
            .edns()
            .is_some_and(|e| e.option(EdnsCode::NSID).is_some())
        {
            reply.nsid = self.nsid.as_deref();
        }
        steered.lb = reply.lb;
        steered.pool = reply.pool;
        let max = match via {
            Transport::Udp => req
                .edns()
                .map_or(512, |e| e.max_payload().clamp(512, EDNS_PAYLOAD)),
            Transport::Tcp => u16::MAX,
        };
        let rcode = reply.rcode;
        if !emit(&req, &reply, usize::from(max), out) {
            return false;
        }
        self.metrics.record(
            reply.lb,
            reply.qtype,
            rcode_index(rcode),
            start.map(|s| s.elapsed().as_secs_f64()),
        );
        true
    }
}

/// `reply` to `req` through hickory's encoder into `out`, at most `max` bytes (what fits, with
/// TC, beyond). `false`: nothing could be encoded.
fn emit(req: &MessageRequest, reply: &Reply<'_>, max: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let max = u16::try_from(max).unwrap_or(u16::MAX);
    {
        let mut encoder = BinEncoder::new(out);
        encoder.set_max_size(max);
        if Responder::build(req, reply)
            .destructive_emit(&mut encoder)
            .is_ok()
        {
            return true;
        }
    }
    // hickory's encoder already keeps what fits and sets TC; this is the case where not even
    // that worked: the question alone with TC, so the resolver retries over TCP (RFC 1035
    // section 4.2.1).
    out.clear();
    let mut encoder = BinEncoder::new(out);
    let empty = Reply::truncated(reply);
    Responder::build(req, &empty)
        .destructive_emit(&mut encoder)
        .is_ok()
}

impl Responder {
    /// What the COOKIE option of `req` from `ip` shows, when it has one and this responder
    /// makes cookies.
    fn cookie_in(&self, req: &MessageRequest, ip: std::net::IpAddr) -> Option<Presented> {
        let cookies = self.cookies?;
        match req.edns()?.option(EdnsCode::Cookie)? {
            hickory_proto::rr::rdata::opt::EdnsOption::Unknown(_, data) => {
                Some(cookies.check(data, ip, cookie::now()))
            }
            _ => Some(Presented::Malformed),
        }
    }

    /// What the COOKIE option of the datagram `bytes` from `ip` shows (for the rate limiter):
    /// `None` without cookies here, without the option, or for bytes that do not parse. A
    /// query in the fast shape carries no COOKIE option and is not parsed again.
    pub(crate) fn cookie_of(&self, bytes: &[u8], ip: std::net::IpAddr) -> Option<Presented> {
        self.cookies?;
        if fast::parse(bytes).is_some() {
            return None;
        }
        let req = MessageRequest::read(&mut BinDecoder::new(bytes)).ok()?;
        self.cookie_in(&req, ip)
    }

    /// BADCOOKIE with a fresh server cookie for `client` (RFC 7873 section 5.2.3): what a
    /// query over the rate limit that carries a client cookie gets where others slip, so the
    /// client retries with the cookie, which then passes. `false` when it is not a query
    /// that parses.
    pub fn badcookie_datagram(
        &self,
        bytes: &[u8],
        ip: std::net::IpAddr,
        client: [u8; 8],
        out: &mut Vec<u8>,
    ) -> bool {
        out.clear();
        let (Some(cookies), Ok(req)) = (
            self.cookies,
            MessageRequest::read(&mut BinDecoder::new(bytes)),
        ) else {
            return false;
        };
        if req.message_type() != MessageType::Query {
            return false;
        }
        let mut reply = Reply::new(ResponseCode::BADCOOKIE);
        reply.cookie = Some(cookies.make(client, ip, cookie::now()));
        let mut encoder = BinEncoder::new(out);
        encoder.set_max_size(512);
        Responder::build(&req, &reply)
            .destructive_emit(&mut encoder)
            .is_ok()
    }

    /// The empty truncated answer (TC=1) to a query over the rate limit (`rrl.rs`); `false`
    /// when it is not a query that parses.
    pub fn slip_datagram(&self, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        let Ok(req) = MessageRequest::read(&mut BinDecoder::new(bytes)) else {
            return false;
        };
        if req.message_type() != MessageType::Query {
            return false;
        }
        let reply = Reply::slipped();
        let mut encoder = BinEncoder::new(out);
        encoder.set_max_size(512);
        Responder::build(&req, &reply)
            .destructive_emit(&mut encoder)
            .is_ok()
    }
}

fn error_only(header: &Header, rcode: ResponseCode, out: &mut Vec<u8>) -> bool {
    let message = Message::error_msg(header.id(), header.op_code(), rcode);
    match message.to_vec() {
        Ok(bytes) => {
            *out = bytes;
            true
        }
        Err(_) => false,
    }
}

impl Responder {
    /// The answer section `lb`'s plan gives `qtype` on `snapshot`, encoded for a question
    /// that names the load balancer (`fast::first_owner_at`); `None` without a plan, for an
    /// empty answer (NODATA carries the SOA), or for records the fast encoder does not write.
    pub(crate) fn prepare(
        &self,
        lb: LbId,
        qtype: RecordType,
        snapshot: &HealthSnapshot,
        ctx: &RequestContext<'_>,
    ) -> Option<Prepared> {
        let plan = self.plan(lb, snapshot, ctx)?;
        let owner = self.fast_names.owner(lb);
        let first_owner = fast::first_owner_at(owner);
        // The records of `endpoints` of `pool`, as `Responder::steer` answers them, if all are
        // of type `qtype` (the engine filtered them so; a CNAME is left to the per-query path).
        let encode = |pool, endpoints: &mut dyn Iterator<Item = EndpointId>| {
            let records: Vec<_> = endpoints
                .filter_map(|e| self.record(lb, pool, e.0, plan.ttl))
                .collect();
            let mut bytes = Vec::new();
            let count = u16::try_from(records.len()).ok()?;
            (count > 0
                && records.iter().all(|r| r.record_type() == qtype)
                && fast::write_answers(
                    records.iter().map(|r| &**r),
                    owner,
                    first_owner,
                    &mut bytes,
                )
                && bytes.len() <= usize::from(u16::MAX))
            .then(|| (count, bytes.into_boxed_slice()))
        };
        match plan.answer {
            DnsAnswerPlan::Nothing => None,
            DnsAnswerPlan::Fixed { pool, endpoints } => {
                let (count, records) = encode(pool, &mut endpoints.into_iter())?;
                Some(Prepared::Fixed {
                    count,
                    records,
                    pool,
                })
            }
            DnsAnswerPlan::Draw { pool, choices } => {
                let mut records = Vec::with_capacity(choices.len());
                let mut weights = Vec::with_capacity(choices.len());
                for (i, (endpoint, weight)) in choices.into_iter().enumerate() {
                    // Every choice must be a record of its own: a CNAME or an endpoint of the
                    // other family would make the draw's answer differ from `steer`'s.
                    let (1, record) = encode(pool, &mut std::iter::once(endpoint))? else {
                        return None;
                    };
                    records.push(record);
                    weights.push((i, weight));
                }
                Some(Prepared::Draw {
                    weights: weights.into_boxed_slice(),
                    records: records.into_boxed_slice(),
                    pool,
                })
            }
        }
    }
}

impl Responder {
    /// Writes the answer to `query` (for load balancer `lb`, from `src`, with `subnet`) from
    /// the current snapshot's prepared answers into `out`, when `lb` has a plan for it and the
    /// reply fits in `max` bytes; `false` leaves the query to the per-query path.
    pub(crate) fn answer_prepared(
        &self,
        query: &fast::FastQuery<'_>,
        lb: LbId,
        subnet: Option<ClientSubnet>,
        src: SocketAddr,
        max: usize,
        (out, pool): (&mut Vec<u8>, &mut Option<PoolId>),
    ) -> bool {
        let Some(scope) = self.plan_scope(lb) else {
            return false;
        };
        let owner = self.fast_names.owner(lb);
        // The pre-encoded pointers assume a question as long as the load balancer's name.
        if 12 + query.question.len() != fast::first_owner_at(owner) {
            return false;
        }
        let current = self.generation.snapshot();
        let loaded = self.prepared.load();
        let fresh;
        let prepared: &Arc<PreparedAnswers> = if Arc::ptr_eq(loaded.snapshot(), &current) {
            &loaded
        } else {
            // A new snapshot: a new, empty set (threads racing here each make one; the last
            // stored stays, the others serve their own query and are dropped).
            fresh = Arc::new(self.prepared_for(Arc::clone(&current)));
            self.prepared.store(Arc::clone(&fresh));
            &fresh
        };
        let lbc = self.load_balancer(lb);
        let qtype = query.qtype;
        // A drawn answer that then does not fit (a name near 255 bytes, no EDNS) is drawn
        // again on the per-query path: the same distribution, another draw.
        let mut encode = |entry: &Prepared, ecs| {
            *pool = Some(entry.pool());
            let (count, section) = entry.section()?;
            fast::encode_prepared(query, count, section, ecs, max, out).then_some(())
        };
        match scope {
            PlanScope::Everywhere => {
                let Some(entry) = prepared.get_or_prepare(lb, qtype, || {
                    let (ctx, _) = self.query_context(lbc, qtype, None, src.ip());
                    self.prepare(lb, qtype, prepared.snapshot(), &ctx)
                }) else {
                    return false;
                };
                // The answer does not depend on the subnet: scope 0 (RFC 7871 section 7.2.1).
                let ecs = subnet.map(|s| ClientSubnet::new(s.addr(), s.source_prefix(), 0));
                encode(entry, ecs).is_some()
            }
            PlanScope::Location => {
                let (ctx, ecs) = self.query_context(lbc, qtype, subnet, src.ip());
                let settings = &lbc.settings;
                let here = locate(
                    settings.location_strategy,
                    settings.steering_policy,
                    &ctx,
                    self.regions(),
                );
                let key = LocatedKey::new(lb, qtype, here);
                PreparedAnswers::with_located(
                    prepared,
                    key,
                    || self.prepare(lb, qtype, prepared.snapshot(), &ctx),
                    |entry| encode(entry, ecs),
                )
                .is_some()
            }
        }
    }
}
