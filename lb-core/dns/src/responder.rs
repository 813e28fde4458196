//! The answer to one query, as pure as a server can be: the question, the resolver's address
//! and its EDNS Client Subnet go in; a reply made of pre-built records comes out. Both the UDP
//! datagram path and the TCP connections (`tcp.rs`) call `reply` and `build`.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::{Edns, Header, OpCode, ResponseCode};
use hickory_proto::rr::rdata::opt::{ClientSubnet, EdnsCode, EdnsOption};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, HINFO};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_server::authority::{MessageRequest, MessageResponse, MessageResponseBuilder};
use ipnet::IpNet;

use arc_swap::ArcSwap;

use super::fast::FastNames;
use super::metrics::{qtype_index, DnsMetrics};
use super::prepared::PreparedAnswers;
use super::reply::Reply;
use super::reply::EDNS_PAYLOAD;
use super::zones::{name, DnsConfigError, Place, ZoneSet};
use lb_core::affinity::AffinityKey;
use lb_core::clock::unix_secs;
use lb_core::config::{Address, Config, LbId, LoadBalancer, LocationMode, PoolId};
use lb_core::geolocation::Geolocator;
use lb_core::health::HealthSnapshot;
use lb_core::regions_table::RegionsTable;
use lb_core::request::{DnsQuestion, Mode, RequestContext};
use lb_core::steering::{DnsPlan, Engine, Outcome, PlanScope};
use lb_edge::{decide_live, Generation, PopInfo, Pops};

/// The EDNS option code of NSID (RFC 5001 section 2.3).
pub(crate) const NSID_OPTION: u16 = 3;

/// The default of `Responder::with_prepared_places` (`--dns-prepared-places`).
pub const DEFAULT_PREPARED_PLACES: usize = 4096;

/// The most PoP addresses a proxied name's answer carries (of each family), nearest first.
pub const MAX_POP_ANSWERS: usize = 8;

/// Everything needed to answer, built once per configuration generation.
pub struct Responder {
    /// The generation's config (`generation.config()`), at hand.
    config: Arc<Config>,
    regions: Arc<RegionsTable>,
    key: AffinityKey,
    pop: PopInfo,
    pub(crate) generation: Arc<Generation>,
    /// Where proxied load balancers' names point: meshlb's own PoPs.
    pops: Arc<Pops>,
    zones: ZoneSet,
    /// `records[lb][pool]`: one record per endpoint, owned by the load balancer's name with its
    /// TTL, for the pools the load balancer can answer with.
    records: Vec<Vec<Option<Box<[Record]>>>>,
    lb_names: Vec<Name>,
    /// The names the fast path (`fast.rs`) answers.
    pub(crate) fast_names: FastNames,
    /// Answers encoded for the current snapshot (`prepared.rs`).
    pub(crate) prepared: ArcSwap<PreparedAnswers>,
    /// `plan_scopes[lb]`: which queries one prepared answer serves, if any.
    plan_scopes: Vec<Option<PlanScope>>,
    /// The most places prepared per snapshot for location-steered answers.
    pub(crate) prepared_places: usize,
    /// The name server identifier a query asking for it gets (RFC 5001, `--dns-nsid`).
    pub(crate) nsid: Option<Arc<[u8]>>,
    /// Server cookies (RFC 7873, `cookie.rs`); `None`: a COOKIE option is ignored.
    pub(crate) cookies: Option<super::cookie::Cookies>,
    geo: Geolocator,
    pub(crate) metrics: DnsMetrics,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("pop", &self.pop)
            .field("zones", &self.zones)
            .finish_non_exhaustive()
    }
}

fn endpoint_record(owner: &Name, ttl: u32, address: &Address) -> Option<Record> {
    let rdata = match address {
        Address::Ip(IpAddr::V4(v4)) => RData::A(A(*v4)),
        Address::Ip(IpAddr::V6(v6)) => RData::AAAA(AAAA(*v6)),
        Address::Hostname(h) => RData::CNAME(CNAME(name(h).ok()?)),
    };
    Some(Record::from_rdata(owner.clone(), ttl, rdata))
}

/// Whether the answer can depend on the client's location, so the ECS scope matters.
fn ecs_scope_applies(lb: &LoadBalancer) -> bool {
    let policy = lb.settings.steering_policy;
    lb.settings.location_strategy.prefer_ecs.applies_to(policy)
        && (policy.reads_location() || !lb.rules.is_empty())
}

impl Responder {
    /// `serial` is the SOA serial of zones that do not set one.
    pub fn new(
        generation: Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: AffinityKey,
        pop: PopInfo,
        pops: Arc<Pops>,
        serial: u32,
    ) -> Result<Responder, DnsConfigError> {
        let config = Arc::clone(generation.config());
        let zones = ZoneSet::build(&config, serial)?;
        let geo = Geolocator::new(&config.geolocation)?;
        let mut records = Vec::with_capacity(config.load_balancers.len());
        let mut lb_names = Vec::with_capacity(config.load_balancers.len());
        for lb in &config.load_balancers {
            let owner = name(&lb.name)?;
            let mut per_pool: Vec<Option<Box<[Record]>>> = vec![None; config.pools.len()];
            for pool in lb.settings.all_pools() {
                let p = config.pool(pool);
                per_pool[pool.0] = Some(
                    p.endpoints
                        .iter()
                        .map(|e| {
                            endpoint_record(&owner, lb.settings.ttl, &e.address).ok_or_else(|| {
                                DnsConfigError::Endpoint {
                                    pool: p.name.clone(),
                                    endpoint: e.name.clone(),
                                }
                            })
                        })
                        .collect::<Result<Vec<_>, DnsConfigError>>()?
                        .into_boxed_slice(),
                );
            }
            records.push(per_pool);
            lb_names.push(owner);
        }
        let metrics = DnsMetrics::new(&config);
        let fast_names = FastNames::build(&zones, &lb_names);
        let engine = Engine::new(&config, &regions, &key);
        let plan_scopes = config
            .load_balancers
            .iter()
            // A proxied name's PoPs are ranked per query.
            .map(|lb| (!lb.proxied).then(|| engine.dns_plan_scope(lb)).flatten())
            .collect();
        let prepared = ArcSwap::from_pointee(PreparedAnswers::new(
            Arc::clone(&generation.snapshot()),
            config.load_balancers.len(),
            DEFAULT_PREPARED_PLACES,
        ));
        Ok(Responder {
            config,
            regions,
            key,
            pop,
            generation,
            pops,
            zones,
            records,
            lb_names,
            fast_names,
            prepared,
            plan_scopes,
            prepared_places: DEFAULT_PREPARED_PLACES,
            nsid: None,
            cookies: None,
            geo,
            metrics,
        })
    }

    pub(crate) fn record(
        &self,
        lb: LbId,
        pool: PoolId,
        endpoint: usize,
        ttl: u32,
    ) -> Option<Cow<'_, Record>> {
        let prebuilt = self.records[lb.0][pool.0]
            .as_ref()
            .and_then(|r| r.get(endpoint));
        let record = match prebuilt {
            Some(r) => Cow::Borrowed(r),
            // A rule sent this load balancer to a pool it does not list: build the record.
            None => {
                let e = self.config.pool(pool).endpoints.get(endpoint)?;
                Cow::Owned(endpoint_record(&self.lb_names[lb.0], ttl, &e.address)?)
            }
        };
        if record.ttl() == ttl {
            Some(record)
        } else {
            let mut owned = record.into_owned();
            owned.set_ttl(ttl);
            Some(Cow::Owned(owned))
        }
    }

    /// Answers one parsed query from `src` (the resolver).
    pub(crate) fn reply(&self, req: &MessageRequest, src: IpAddr) -> Reply<'_> {
        if req.op_code() != OpCode::Query {
            return Reply::new(ResponseCode::NotImp);
        }
        // We speak EDNS version 0; a higher one is answered BADVERS, with our OPT (version 0)
        // in the answer (RFC 6891 section 6.1.3). Unknown options and flags are ignored.
        if req.edns().is_some_and(|e| e.version() > 0) {
            return Reply::new(ResponseCode::BADVERS);
        }
        let [query] = req.queries() else {
            return Reply::new(ResponseCode::FormErr);
        };
        let qtype = query.query_type();
        if query.query_class() != DNSClass::IN {
            return Reply::new(ResponseCode::Refused);
        }
        let Place::Inside {
            zone,
            apex,
            lb,
            exists,
        } = self.zones.place(query.name())
        else {
            let mut r = Reply::new(ResponseCode::Refused);
            r.qtype = qtype_index(qtype);
            return r;
        };
        let z = self.zones.zone(zone);
        let mut r = Reply::new(ResponseCode::NoError);
        r.authoritative = true;
        r.qtype = qtype_index(qtype);
        r.lb = lb;
        match (apex, lb, qtype) {
            // ANY gets one small synthesized record (RFC 8482 section 4.2, as Cloudflare
            // answers it): an ANY query cannot pull every endpoint of every pool, so the name
            // is no amplifier. A, AAAA and CNAME queries get the real answers.
            (_, _, RecordType::ANY) if exists => {
                let ttl = lb.map_or(z.negative_soa.ttl(), |l| self.config.lb(l).settings.ttl);
                r.answers.push(Cow::Owned(Record::from_rdata(
                    query.name().into(),
                    ttl,
                    RData::HINFO(HINFO::new("RFC8482".into(), String::new())),
                )));
            }
            (true, _, RecordType::SOA) => {
                r.answers.push(Cow::Borrowed(&z.soa));
                r.ns = &z.ns;
            }
            (true, _, RecordType::NS) => r.answers.extend(z.ns.iter().map(Cow::Borrowed)),
            (_, Some(lb), RecordType::A | RecordType::AAAA | RecordType::CNAME) => {
                let subnet = req
                    .edns()
                    .and_then(|e| e.option(EdnsCode::Subnet))
                    .and_then(|o| match o {
                        EdnsOption::Subnet(s) => Some(*s),
                        _ => None,
                    });
                return self.steered_reply(lb, zone, qtype, subnet, src);
            }
            _ => {}
        }
        if r.answers.is_empty() {
            // NODATA or NXDOMAIN, with the SOA so resolvers cache the negative answer.
            if !exists {
                r.rcode = ResponseCode::NXDomain;
            }
            r.soa = Some(&z.negative_soa);
        }
        r
    }

    /// The reply to an A, AAAA or CNAME query for load balancer `lb` (in zone `zone`) from
    /// `src` (the resolver) whose query carried `subnet`: the steering engine's answer, or
    /// NODATA with the zone's SOA. The fast path (`answer.rs`) and `reply` both come here.
    pub(crate) fn steered_reply(
        &self,
        lb: LbId,
        zone: usize,
        qtype: RecordType,
        subnet: Option<ClientSubnet>,
        src: IpAddr,
    ) -> Reply<'_> {
        let mut r = Reply::new(ResponseCode::NoError);
        r.authoritative = true;
        r.qtype = qtype_index(qtype);
        r.lb = Some(lb);
        self.steer(&mut r, lb, qtype, subnet, src);
        if r.answers.is_empty() {
            r.soa = Some(&self.zones.zone(zone).negative_soa);
        }
        r
    }

    /// The request context of a query of type `qtype` for `lbc` from `src` (the resolver)
    /// whose query carried `subnet`, and the ECS option its answer echoes, with its scope.
    pub(crate) fn query_context<'a>(
        &'a self,
        lbc: &'a LoadBalancer,
        qtype: RecordType,
        subnet: Option<ClientSubnet>,
        src: IpAddr,
    ) -> (RequestContext<'a>, Option<ClientSubnet>) {
        let mut ctx = RequestContext::new(Mode::Dns, self.pop.pop(), unix_secs());
        ctx.client_ip = Some(src);
        if lbc.settings.location_strategy.mode == LocationMode::ResolverIp {
            ctx.client_location = self.geo.locate(src).map(|(l, _)| l);
        }
        let mut echo = None;
        if let Some(s) = subnet {
            let mut scope = 0;
            // Source prefix 0 asks us not to use the client's address (RFC 7871 section 7.1.2).
            if s.source_prefix() > 0 {
                if let Ok(net) = IpNet::new(s.addr(), s.source_prefix()) {
                    let found = self.geo.locate(net.addr());
                    // A proxied name's PoPs are chosen by distance: the subnet decides when it
                    // located the client (`answer_with_pops` resets the scope otherwise).
                    if lbc.proxied || ecs_scope_applies(lbc) {
                        // The network that decided, or (unknown) the whole source prefix.
                        scope = found.map_or(s.source_prefix(), |(_, p)| p);
                    }
                    ctx.ecs = Some((net.trunc(), found.map(|(l, _)| l).unwrap_or_default()));
                }
            }
            echo = Some(ClientSubnet::new(s.addr(), s.source_prefix(), scope));
        }
        let qtype_name = match qtype {
            RecordType::A => "A",
            RecordType::AAAA => "AAAA",
            RecordType::CNAME => "CNAME",
            _ => "ANY",
        };
        ctx.dns = Some(DnsQuestion {
            qname: &lbc.name,
            qtype: qtype_name,
        });
        (ctx, echo)
    }

    /// Fills `r` with the steering engine's answer for `lb` to a client at `src` (the
    /// resolver) whose query carried `subnet`.
    fn steer<'a>(
        &'a self,
        r: &mut Reply<'a>,
        lb: LbId,
        qtype: RecordType,
        subnet: Option<ClientSubnet>,
        src: IpAddr,
    ) {
        let lbc = self.config.lb(lb);
        let (ctx, echo) = self.query_context(lbc, qtype, subnet, src);
        r.ecs = echo;
        if lbc.proxied {
            self.answer_with_pops(r, lb, qtype, &ctx);
            return;
        }
        let engine = Engine::new(&self.config, &self.regions, &self.key);
        let decision = decide_live(&engine, lbc, &self.generation, &ctx);
        if let Outcome::Answer { pool, endpoints } = decision.outcome {
            r.pool = Some(pool);
            for e in endpoints {
                let Some(rec) = self.record(lb, pool, e.0, decision.ttl) else {
                    continue;
                };
                let fits = match (qtype, rec.record_type()) {
                    (_, RecordType::CNAME) | (RecordType::ANY, _) => true,
                    (q, t) => q == t,
                };
                if fits {
                    r.answers.push(rec);
                }
            }
        }
    }

    /// At most `places` client locations get a prepared answer per snapshot (over every
    /// location-steered load balancer and both query types); queries from the others are
    /// steered one by one. 0: location-steered answers are never prepared.
    /// The config this responder answers for (records name its load balancers and pools).
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Answers NSID (RFC 5001) with `nsid` to the queries that ask for it.
    pub fn with_nsid(mut self, nsid: Option<Arc<[u8]>>) -> Responder {
        self.nsid = nsid;
        self
    }

    /// Answers DNS cookies with server cookies made and checked with `cookies` (`cookie.rs`).
    pub fn with_cookies(mut self, cookies: Option<super::cookie::Cookies>) -> Responder {
        self.cookies = cookies;
        self
    }

    pub fn with_prepared_places(mut self, places: usize) -> Responder {
        self.prepared_places = places;
        self.prepared =
            ArcSwap::from_pointee(self.prepared_for(Arc::clone(&self.generation.snapshot())));
        self
    }

    /// An empty set of prepared answers for `snapshot`.
    pub(crate) fn prepared_for(&self, snapshot: Arc<HealthSnapshot>) -> PreparedAnswers {
        PreparedAnswers::new(
            snapshot,
            self.config.load_balancers.len(),
            self.prepared_places,
        )
    }

    /// Which queries for `lb` one prepared answer serves (`prepared.rs`): none for a proxied
    /// name (its PoPs are ranked per query) or one the engine cannot plan.
    pub(crate) fn plan_scope(&self, lb: LbId) -> Option<PlanScope> {
        self.plan_scopes.get(lb.0).copied().flatten()
    }

    /// The load balancer `lb` of the configuration.
    pub(crate) fn load_balancer(&self, lb: LbId) -> &LoadBalancer {
        self.config.lb(lb)
    }

    pub(crate) fn regions(&self) -> &RegionsTable {
        &self.regions
    }

    /// The engine's plan for `lb` on `snapshot` that answers the query of `ctx`.
    pub(crate) fn plan(
        &self,
        lb: LbId,
        snapshot: &HealthSnapshot,
        ctx: &RequestContext<'_>,
    ) -> Option<DnsPlan> {
        let engine = Engine::new(&self.config, &self.regions, &self.key);
        engine.dns_plan(self.config.lb(lb), snapshot, ctx)
    }

    /// A proxied load balancer's name: the addresses of meshlb's own PoPs, nearest to the
    /// client first (located as its `location_strategy` says), never an origin's. No PoP, or
    /// none of the asked family: NODATA with the SOA. A disabled load balancer answers nothing.
    fn answer_with_pops(
        &self,
        r: &mut Reply<'_>,
        lb: LbId,
        qtype: RecordType,
        ctx: &RequestContext<'_>,
    ) {
        let lbc = self.config.lb(lb);
        if !lbc.enabled {
            return;
        }
        let settings = &lbc.settings;
        let client = lb_core::steering::locate(
            settings.location_strategy,
            settings.steering_policy,
            ctx,
            &self.regions,
        );
        if client.source != lb_core::steering::LocationSource::Ecs {
            // The answer did not depend on the subnet: scope 0 (RFC 7871 section 7.2.1).
            if let Some(ecs) = &mut r.ecs {
                *ecs = ClientSubnet::new(ecs.addr(), ecs.source_prefix(), 0);
            }
        }
        let pops = self.pops.load();
        let ranked = lb_core::pops::nearest_first(&pops, client.coordinates, &self.regions);
        let owner = &self.lb_names[lb.0];
        for v6 in [false, true] {
            let wanted = match qtype {
                RecordType::A => !v6,
                RecordType::AAAA => v6,
                RecordType::ANY => true,
                _ => false,
            };
            if !wanted {
                continue;
            }
            for address in lb_core::pops::answer_addresses(&ranked, v6, MAX_POP_ANSWERS) {
                if let Some(rec) = endpoint_record(owner, settings.ttl, &Address::Ip(address)) {
                    r.answers.push(Cow::Owned(rec));
                }
            }
        }
    }

    /// The wire response for `reply`; `udp_max` bounds a UDP answer (a TC answer otherwise).
    pub(crate) fn build<'q, 'a>(
        req: &'q MessageRequest,
        reply: &'a Reply<'a>,
    ) -> MessageResponse<
        'q,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    > {
        let mut header = Header::response_from_request(req.header());
        header.set_authoritative(reply.authoritative);
        header.set_response_code(reply.rcode);
        header.set_truncated(reply.truncated);
        let mut builder = MessageResponseBuilder::from_message_request(req);
        if let Some(asked) = req.edns() {
            let mut edns = Edns::new();
            edns.set_max_payload(EDNS_PAYLOAD);
            edns.set_version(0);
            // The DO bit is copied into the response (RFC 3225 section 3); there are no
            // signatures to add, so an answer says so by having none.
            edns.set_dnssec_ok(asked.flags().dnssec_ok);
            // An extended rcode (BADVERS) keeps its high bits in the OPT record.
            edns.set_rcode_high(reply.rcode.high());
            if let Some(ecs) = reply.ecs {
                edns.options_mut().insert(EdnsOption::Subnet(ecs));
            }
            if let Some(nsid) = reply.nsid {
                edns.options_mut()
                    .insert(EdnsOption::Unknown(NSID_OPTION, nsid.to_vec()));
            }
            if let Some(cookie) = reply.cookie {
                edns.options_mut().insert(EdnsOption::Unknown(
                    super::cookie::COOKIE_OPTION,
                    cookie.to_vec(),
                ));
            }
            builder.edns(edns);
        }
        builder.build(
            header,
            reply.answers.iter().map(|r| &**r),
            reply.ns.iter(),
            reply.soa,
            std::iter::empty(),
        )
    }
}
