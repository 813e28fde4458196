//! The steering engine: a pure function from (config, health snapshot, request, RNG, clock)
//! to a decision that carries its own explanation.
//!
//! Order (docs/design.md#decision-order): custom rules -> session affinity -> traffic steering picks the
//! pool -> load shedding -> endpoint steering -> zero-downtime retry target -> fallback pool
//! -> nothing (HTTP 530 from the proxy, NODATA with the SOA from DNS).

mod affinity_binding;
mod dns_plan;
mod endpoint;
mod location;
mod rule_input;
pub(crate) mod shedding;
mod trace;
mod traffic;
pub(crate) mod weighted;

use std::borrow::Cow;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use smallvec::SmallVec;

pub use dns_plan::{DnsAnswerPlan, DnsPlan, PlanScope};
pub use location::{locate, ClientLocation, LocationSource};

use crate::affinity::{encode_cookie, header_session_key, AffinityKey, CookieClaim, SetCookie};
use crate::config::{
    Address, AffinityKind, Config, EndpointId, FixedResponse, LoadBalancer, PoolId, RuleAction,
    SteeringPolicy, SteeringSettings, ZeroDowntimeFailover,
};
use crate::health::HealthSnapshot;
use crate::region::Region;
use crate::regions_table::RegionsTable;
use crate::request::{Mode, RequestContext};
use endpoint::{Admit, EndpointView};
use trace::Trace;
use traffic::PoolView;

/// Pools in some order. A load balancer names a handful, and the proxy steers every request:
/// on the stack, these lists cost no allocation. Small, because they are moved by value.
pub(crate) type PoolList = SmallVec<[PoolId; 4]>;
/// Endpoints of one pool, on the stack for pools of up to 8.
pub(crate) type EndpointList = SmallVec<[EndpointId; 8]>;

/// One endpoint of one pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    pub pool: PoolId,
    pub endpoint: EndpointId,
}

/// What to do with the request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Proxy: forward to `target`; on a connection failure before any response byte, retry
    /// once at `retry` (zero-downtime failover), when there is one.
    Forward {
        target: Target,
        retry: Option<Target>,
    },
    /// DNS: answer with these endpoints of `pool` (all when weights are equal, else one).
    Answer {
        pool: PoolId,
        endpoints: Vec<EndpointId>,
    },
    /// A custom rule answers directly.
    Fixed(FixedResponse),
    /// No pool can take the request: HTTP 530 from the proxy, NODATA with the SOA from DNS.
    NoPool,
}

/// What the frontend must remember for session affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AffinityUpdate {
    None,
    /// Send this affinity cookie.
    SetCookie(SetCookie),
    /// Store a new header session, idle for at most `ttl` seconds (the load balancer's, or a
    /// matching rule's, `session_affinity_ttl`).
    BindHeaderSession {
        key: u64,
        target: Target,
        ttl: u32,
    },
    /// Refresh an existing header session's activity time (its TTL resets on activity).
    TouchHeaderSession {
        key: u64,
        ttl: u32,
    },
}

/// The engine's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub outcome: Outcome,
    /// The DNS TTL in effect (rules may override it).
    pub ttl: u32,
    pub affinity: AffinityUpdate,
    /// Names of the custom rules that matched, in order.
    pub matched_rules: Vec<String>,
    /// One line per step, when `RequestContext::explain` is set.
    pub explanation: Vec<String>,
    /// With `zero_downtime_failover = "sticky"`: the cookie to send when the retry target
    /// answers instead of the first one.
    pub retry_cookie: Option<SetCookie>,
    /// Why the pool was chosen, in a few words for the access log and dnstap.
    pub why: Why,
}

/// Why a decision's pool was chosen: what the proxy's access log and dnstap carry, kept
/// whether or not the decision is explained (`RequestContext::explain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Why {
    pub reason: PoolReason,
    /// The steering policy in effect (a rule may override the load balancer's).
    pub policy: SteeringPolicy,
    /// Where the client was located, and from what, for the location-steered policies
    /// (geo, dynamic latency, proximity).
    pub location: Option<(Region, LocationSource)>,
}

impl Why {
    fn new(policy: SteeringPolicy) -> Why {
        Why {
            reason: PoolReason::None,
            policy,
            location: None,
        }
    }

    /// The why of a decision about to be steered by `policy`, with where the client was
    /// located when the policy reads it.
    #[inline]
    fn located(policy: SteeringPolicy, location: &ClientLocation) -> Why {
        Why {
            location: policy
                .reads_location()
                .then_some((location.region, location.source)),
            ..Why::new(policy)
        }
    }
}

/// How the pool was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolReason {
    /// No pool: a rule's fixed response, a disabled load balancer, nothing usable.
    None,
    /// The session's affinity (cookie or header) named its endpoint.
    Affinity,
    /// Traffic steering's order, after `passed` pools that were unusable or had no eligible
    /// endpoint (0: the policy's first choice).
    Steering { passed: u8 },
    /// Load shedding moved the request on from a pool that sheds.
    Shed,
    /// No pool was usable: the fallback pool, its health not considered.
    Fallback,
}

impl PoolReason {
    /// The access log's `reason` value.
    pub fn name(self) -> &'static str {
        match self {
            PoolReason::None => "none",
            PoolReason::Affinity => "affinity",
            PoolReason::Steering { passed: 0 } => "steering",
            PoolReason::Steering { .. } => "failover",
            PoolReason::Shed => "load_shedding",
            PoolReason::Fallback => "fallback",
        }
    }
}

/// The engine: borrows a validated config, the regions table and the cookie key.
#[derive(Debug, Clone, Copy)]
pub struct Engine<'a> {
    pub config: &'a Config,
    pub regions: &'a RegionsTable,
    pub key: &'a AffinityKey,
}

/// Per-decision state threaded through the steps.
struct Step<'a, 'r> {
    settings: &'a SteeringSettings,
    lb: &'a LoadBalancer,
    ctx: &'a RequestContext<'a>,
    pools: PoolView<'a>,
    endpoints: EndpointView<'a>,
    rng: &'r mut dyn RngCore,
    trace: Trace,
    header_key: Option<u64>,
    /// Keep the weighted choices a DNS answer's one endpoint is drawn from (`dns_plan.rs`).
    keep_dns_draw: bool,
    dns_draw: Option<DrawChoices>,
    why: Why,
}

/// Endpoints of one pool with the weights a draw picks one of them by.
pub(crate) type DrawChoices = Vec<(EndpointId, f64)>;

impl<'a> Engine<'a> {
    pub fn new(config: &'a Config, regions: &'a RegionsTable, key: &'a AffinityKey) -> Self {
        Engine {
            config,
            regions,
            key,
        }
    }

    /// Decides where one request goes.
    pub fn decide(
        &self,
        lb: &LoadBalancer,
        health: &HealthSnapshot,
        ctx: &RequestContext<'_>,
        rng: &mut dyn RngCore,
    ) -> Decision {
        self.decide_keeping_draw(lb, health, ctx, rng, false).0
    }

    /// `decide`; with `keep_dns_draw`, also the choices a DNS answer's one endpoint was drawn
    /// from, when it was drawn by weight. The steps: a disabled load balancer answers no pool;
    /// the custom rules may answer or override the settings; then the client is located, the
    /// draws' RNG and the header session chosen, and the request steered (`steer`).
    fn decide_keeping_draw(
        &self,
        lb: &LoadBalancer,
        health: &HealthSnapshot,
        ctx: &RequestContext<'_>,
        rng: &mut dyn RngCore,
        keep_dns_draw: bool,
    ) -> (Decision, Option<DrawChoices>) {
        let mut trace = Trace::new(ctx.explain);
        let mut matched_rules = Vec::new();
        if !lb.enabled {
            trace.note(|| format!("load balancer {} is disabled", lb.name));
            let decision = unsteered(Outcome::NoPool, &lb.settings, matched_rules, trace);
            return (decision, None);
        }
        let (settings, fixed) = apply_rules(lb, ctx, &mut trace, &mut matched_rules);
        if let Some(f) = fixed {
            let decision = unsteered(Outcome::Fixed(f.clone()), &settings, matched_rules, trace);
            return (decision, None);
        }
        let settings: &SteeringSettings = &settings;
        let location = location::locate(
            settings.location_strategy,
            settings.steering_policy,
            ctx,
            self.regions,
        );
        // ip_cookie: every draw for a client comes from an RNG seeded by its address, so the
        // same client gets the same pick on every node (DNS-only affinity, docs/design.md#session-affinity).
        let mut seeded;
        let rng: &mut dyn RngCore = match ip_cookie_seed(settings, lb, ctx) {
            Some(seed) => {
                // ChaCha8 is specified and portable: every build of every node draws alike.
                seeded = ChaCha8Rng::seed_from_u64(seed);
                &mut seeded
            }
            None => rng,
        };
        let header_key = header_session(settings, lb, ctx);
        let mut step = Step {
            settings,
            lb,
            ctx,
            pools: self.pool_view(health, location, ctx),
            endpoints: self.endpoint_view(health, ctx),
            rng,
            trace,
            header_key,
            keep_dns_draw,
            dns_draw: None,
            why: Why::located(settings.steering_policy, &location),
        };
        let (outcome, affinity, retry_cookie) = self.steer(&mut step);
        let mut decision = finish(outcome, settings.ttl, affinity, matched_rules, step.trace);
        decision.retry_cookie = retry_cookie;
        decision.why = step.why;
        (decision, step.dns_draw)
    }

    /// How traffic steering sees the pools for this request.
    #[inline]
    fn pool_view(
        &self,
        health: &'a HealthSnapshot,
        location: ClientLocation,
        ctx: &RequestContext<'a>,
    ) -> PoolView<'a> {
        PoolView {
            config: self.config,
            health,
            location,
            mode: ctx.mode,
            pop_region: ctx.pop.region,
            pop_datacenter: ctx.pop.datacenter,
            load: ctx.load,
        }
    }

    /// How endpoint steering sees the endpoints for this request.
    #[inline]
    fn endpoint_view(
        &self,
        health: &'a HealthSnapshot,
        ctx: &RequestContext<'a>,
    ) -> EndpointView<'a> {
        EndpointView {
            config: self.config,
            health,
            mode: ctx.mode,
            pop_region: ctx.pop.region,
            client_ip: ctx.client_ip,
            load: ctx.load,
        }
    }

    fn steer(&self, s: &mut Step<'_, '_>) -> (Outcome, AffinityUpdate, Option<SetCookie>) {
        if let Some(bound) = affinity_binding::bound_target(self, s) {
            let pool = self.config.pool(bound.pool);
            let shed = pool.load_shedding;
            if !shedding::sheds(
                shed.session_percent,
                shed.session_policy,
                s.ctx.client_ip,
                &pool.name,
                s.rng,
            ) {
                s.why.reason = PoolReason::Affinity;
                return self.follow(s, bound);
            }
            s.trace.note(|| {
                format!(
                    "pool {} sheds {}% of affinity traffic: this session leaves it",
                    pool.name, shed.session_percent
                )
            });
            if let Some(found) = self.steer_new(s, Some(bound.pool)) {
                s.why.reason = PoolReason::Shed;
                return found;
            }
            // Shedding must not turn into an outage: with nowhere else to go, the session stays.
            s.trace
                .note(|| "no other pool can take the shed session: it stays".to_string());
            s.why.reason = PoolReason::Affinity;
            return self.follow(s, bound);
        }
        self.steer_new(s, None).unwrap_or_else(|| {
            s.trace.note(|| "no pool can take the request".to_string());
            (Outcome::NoPool, AffinityUpdate::None, None)
        })
    }

    /// Follows an existing session to its endpoint (proxy only).
    fn follow(
        &self,
        s: &mut Step<'_, '_>,
        bound: Target,
    ) -> (Outcome, AffinityUpdate, Option<SetCookie>) {
        let affinity = &s.settings.session_affinity;
        // A cookie is never extended (Cloudflare's rule), except by a custom rule that sets
        // the session affinity of the requests it matches: the session is reset with the
        // rule's attributes, its TTL among them ("the session affinity TTL can be reset based
        // on a request to a specific URL path", as Cloudflare's rules do;
        // docs/design.md#custom-rules).
        let reset_by_rule = matches!(affinity.kind, AffinityKind::Cookie | AffinityKind::IpCookie)
            && *affinity != s.lb.settings.session_affinity;
        let update = match s.header_key {
            Some(key) => AffinityUpdate::TouchHeaderSession {
                key,
                ttl: affinity.ttl,
            },
            None if reset_by_rule => {
                s.trace.note(|| {
                    format!(
                        "a rule sets the session affinity: the cookie is issued again (TTL {} s)",
                        affinity.ttl
                    )
                });
                AffinityUpdate::SetCookie(self.affinity_cookie(s.lb, s.settings, bound, s.ctx))
            }
            None => AffinityUpdate::None,
        };
        // The pools a retry may move to, in failover order.
        let next: PoolList = s
            .settings
            .default_pools
            .iter()
            .copied()
            .chain(s.settings.fallback_pool)
            .filter(|&p| p != bound.pool)
            .collect();
        let (retry, retry_cookie) = self.retry_target(s, bound, &next, Admit::Healthy);
        (
            Outcome::Forward {
                target: bound,
                retry,
            },
            update,
            retry_cookie,
        )
    }

    /// Traffic steering for a request without a (followed) session; `None` when no pool can
    /// take it. `exclude`: a pool the request was shed from.
    fn steer_new(
        &self,
        s: &mut Step<'_, '_>,
        exclude: Option<PoolId>,
    ) -> Option<(Outcome, AffinityUpdate, Option<SetCookie>)> {
        let candidates = traffic::candidates(s.settings, &s.pools, s.rng, &mut s.trace);
        let pools: PoolList = candidates
            .pools
            .iter()
            .copied()
            .filter(|&p| Some(p) != exclude)
            .collect();
        let mut shed_from = PoolList::new();
        for (i, &pool) in pools.iter().enumerate() {
            let p = self.config.pool(pool);
            let shed = p.load_shedding;
            if i + 1 < pools.len()
                && shedding::sheds(
                    shed.default_percent,
                    shed.default_policy,
                    s.ctx.client_ip,
                    &p.name,
                    s.rng,
                )
            {
                s.trace.note(|| {
                    format!(
                        "pool {} sheds {}% of new traffic: this request moves on",
                        p.name, shed.default_percent
                    )
                });
                shed_from.push(pool);
                continue;
            }
            if let Some(found) = self.in_pool(
                s,
                pool,
                &pools[i + 1..],
                candidates.last_resort,
                Admit::Healthy,
            ) {
                s.why.reason = self.reason_for(s.settings, pool, i, !shed_from.is_empty());
                return Some(found);
            }
        }
        // Shed traffic that found no other home goes back where it came from, before the
        // fallback (which is only for when every pool is critical).
        for (i, &pool) in shed_from.iter().enumerate() {
            s.trace.note(|| {
                format!(
                    "no later pool took it: back to pool {}",
                    self.config.pool(pool).name
                )
            });
            if let Some(found) = self.in_pool(
                s,
                pool,
                &shed_from[i + 1..],
                candidates.last_resort,
                Admit::Healthy,
            ) {
                s.why.reason = PoolReason::Shed;
                return Some(found);
            }
        }
        let fallback = candidates.last_resort.filter(|&f| Some(f) != exclude)?;
        s.trace.note(|| {
            format!(
                "no usable pool: fallback pool {} (its health not considered)",
                self.config.pool(fallback).name
            )
        });
        let found = self.in_pool(s, fallback, &[], None, Admit::Enabled);
        if found.is_some() {
            s.why.reason = PoolReason::Fallback;
        }
        found
    }

    /// Why traffic steering's `i`-th candidate `pool` took the request: after shedding, as
    /// the fallback pool (which the policy may list last), or the policy's choice after the
    /// pools it passed — for `off`, the default pools before it in their configured order
    /// (the candidates leave out the unusable ones).
    fn reason_for(
        &self,
        settings: &SteeringSettings,
        pool: PoolId,
        i: usize,
        shed: bool,
    ) -> PoolReason {
        if shed {
            return PoolReason::Shed;
        }
        if settings.fallback_pool == Some(pool) && !settings.default_pools.contains(&pool) {
            return PoolReason::Fallback;
        }
        let passed = match settings.steering_policy {
            SteeringPolicy::Off => settings
                .default_pools
                .iter()
                .position(|&p| p == pool)
                .unwrap_or(i),
            _ => i,
        };
        PoolReason::Steering {
            passed: u8::try_from(passed).unwrap_or(u8::MAX),
        }
    }

    /// Steers within one pool; `None` when it has no eligible endpoint.
    fn in_pool(
        &self,
        s: &mut Step<'_, '_>,
        pool: PoolId,
        later: &[PoolId],
        last_resort: Option<PoolId>,
        admit: Admit,
    ) -> Option<(Outcome, AffinityUpdate, Option<SetCookie>)> {
        let eligible = endpoint::eligible(&s.endpoints, pool, None, admit, &mut s.trace);
        if eligible.is_empty() {
            s.trace.note(|| {
                format!(
                    "pool {} has no eligible endpoint",
                    self.config.pool(pool).name
                )
            });
            return None;
        }
        if s.ctx.mode == Mode::Dns {
            let endpoints = self.dns_answer(s, pool, eligible);
            return Some((
                Outcome::Answer { pool, endpoints },
                AffinityUpdate::None,
                None,
            ));
        }
        let chosen = endpoint::pick(&s.endpoints, pool, &eligible, s.rng, &mut s.trace)?;
        let target = Target {
            pool,
            endpoint: chosen,
        };
        let mut next_pools = PoolList::from_slice(later);
        next_pools.extend(last_resort);
        let (retry, retry_cookie) = self.retry_target(s, target, &next_pools, admit);
        let update = match s.settings.session_affinity.kind {
            AffinityKind::Cookie | AffinityKind::IpCookie => {
                AffinityUpdate::SetCookie(self.affinity_cookie(s.lb, s.settings, target, s.ctx))
            }
            AffinityKind::Header => match s.header_key {
                Some(key) => AffinityUpdate::BindHeaderSession {
                    key,
                    target,
                    ttl: s.settings.session_affinity.ttl,
                },
                None => AffinityUpdate::None,
            },
            AffinityKind::None => AffinityUpdate::None,
        };
        Some((Outcome::Forward { target, retry }, update, retry_cookie))
    }

    /// The DNS answer set: the pool is chosen whatever the query type (so A and AAAA agree);
    /// within it, A answers carry IPv4 endpoints, AAAA answers IPv6 ones, and a hostname
    /// endpoint (a CNAME) fits either. All of them when their weights are equal (Cloudflare's
    /// DNS-only rule), else one by the pool's policy; a CNAME is always alone. An empty set is
    /// NODATA.
    fn dns_answer(
        &self,
        s: &mut Step<'_, '_>,
        pool: PoolId,
        mut eligible: EndpointList,
    ) -> Vec<EndpointId> {
        let p = self.config.pool(pool);
        let qtype = s.ctx.dns.map_or("", |q| q.qtype);
        let fits = |e: &EndpointId| match &p.endpoints[e.0].address {
            Address::Ip(ip) if qtype.eq_ignore_ascii_case("A") => ip.is_ipv4(),
            Address::Ip(ip) if qtype.eq_ignore_ascii_case("AAAA") => ip.is_ipv6(),
            _ => true,
        };
        eligible.retain(|e| fits(e));
        let has_cname = eligible
            .iter()
            .any(|e| matches!(p.endpoints[e.0].address, Address::Hostname(_)));
        let all = !has_cname
            && s.settings.session_affinity.kind != AffinityKind::IpCookie
            && endpoint::equal_weights(&s.endpoints, pool, &eligible);
        if all {
            s.trace.note(|| {
                format!(
                    "equal weights: answer with all {} eligible endpoints",
                    eligible.len()
                )
            });
            return eligible.into_vec();
        }
        if s.keep_dns_draw {
            s.dns_draw = Some(endpoint::weighted_choices(&s.endpoints, pool, &eligible).into_vec());
        }
        endpoint::pick(&s.endpoints, pool, &eligible, s.rng, &mut s.trace)
            .into_iter()
            .collect()
    }

    /// Zero-downtime failover (docs/design.md#zero-downtime-failover): one retry on another eligible endpoint of the pool;
    /// with `adaptive_routing.failover_across_pools`, on the next pool when the pool has none.
    /// With `sticky`, also the cookie that rebinds the session to the retry target.
    fn retry_target(
        &self,
        s: &mut Step<'_, '_>,
        target: Target,
        next_pools: &[PoolId],
        admit: Admit,
    ) -> (Option<Target>, Option<SetCookie>) {
        let mode = s.settings.session_affinity.zero_downtime_failover;
        if mode == ZeroDowntimeFailover::None {
            return (None, None);
        }
        let mut quiet = Trace::new(false);
        let same = endpoint::eligible(
            &s.endpoints,
            target.pool,
            Some(target.endpoint),
            admit,
            &mut quiet,
        );
        let mut retry =
            endpoint::pick(&s.endpoints, target.pool, &same, s.rng, &mut quiet).map(|endpoint| {
                Target {
                    pool: target.pool,
                    endpoint,
                }
            });
        if retry.is_none() && s.settings.adaptive_routing.failover_across_pools {
            for &pool in next_pools {
                let eligible =
                    endpoint::eligible(&s.endpoints, pool, None, Admit::Healthy, &mut quiet);
                if let Some(endpoint) =
                    endpoint::pick(&s.endpoints, pool, &eligible, s.rng, &mut quiet)
                {
                    retry = Some(Target { pool, endpoint });
                    break;
                }
            }
        }
        let cookie = match (mode, retry) {
            (ZeroDowntimeFailover::Sticky, Some(r)) => {
                Some(self.affinity_cookie(s.lb, s.settings, r, s.ctx))
            }
            _ => None,
        };
        (retry, cookie)
    }

    /// The Set-Cookie binding a client to `target`, issued now.
    pub fn affinity_cookie(
        &self,
        lb: &LoadBalancer,
        settings: &SteeringSettings,
        target: Target,
        ctx: &RequestContext<'_>,
    ) -> SetCookie {
        let pool = self.config.pool(target.pool);
        let claim = CookieClaim {
            pool: pool.name.clone(),
            endpoint: pool.endpoints[target.endpoint.0].name.clone(),
            issued_at: ctx.now,
            ttl: Some(settings.session_affinity.ttl),
        };
        let value = encode_cookie(self.key, &lb.name, &claim);
        SetCookie::new(
            value,
            &settings.session_affinity,
            ctx.http.is_some_and(|h| h.tls),
        )
    }
}

/// Runs the load balancer's custom rules in order: each that matches is named in
/// `matched_rules` and the trace and applies its overrides to the settings, until one
/// terminates evaluation or answers with a fixed response, returned with the settings so far.
#[inline]
fn apply_rules<'l>(
    lb: &'l LoadBalancer,
    ctx: &RequestContext<'_>,
    trace: &mut Trace,
    matched_rules: &mut Vec<String>,
) -> (Cow<'l, SteeringSettings>, Option<&'l FixedResponse>) {
    let mut settings = Cow::Borrowed(&lb.settings);
    if lb.rules.is_empty() {
        return (settings, None);
    }
    let input = rule_input::build(lb, ctx);
    for rule in &lb.rules {
        if !rule.condition.matches(&input) {
            continue;
        }
        matched_rules.push(rule.name.clone());
        trace.note(|| format!("rule `{}` matched: {}", rule.name, rule.condition.source()));
        match &rule.action {
            RuleAction::FixedResponse(f) => {
                trace.note(|| format!("fixed response {}", f.status_code));
                return (settings, Some(f));
            }
            RuleAction::Overrides(o) => o.apply_to(settings.to_mut()),
        }
        if rule.terminates {
            trace.note(|| format!("rule `{}` terminates rule evaluation", rule.name));
            break;
        }
    }
    (settings, None)
}

/// A decision made before steering (a disabled load balancer, a rule's fixed response): the
/// settings' TTL and policy, no affinity.
fn unsteered(
    outcome: Outcome,
    settings: &SteeringSettings,
    matched_rules: Vec<String>,
    trace: Trace,
) -> Decision {
    let mut decision = finish(
        outcome,
        settings.ttl,
        AffinityUpdate::None,
        matched_rules,
        trace,
    );
    decision.why = Why::new(settings.steering_policy);
    decision
}

/// With `ip_cookie` affinity and a known client address, the seed of the client's draws:
/// its address hashed with the load balancer's name.
#[inline]
fn ip_cookie_seed(
    settings: &SteeringSettings,
    lb: &LoadBalancer,
    ctx: &RequestContext<'_>,
) -> Option<u64> {
    match (settings.session_affinity.kind, ctx.client_ip) {
        (AffinityKind::IpCookie, Some(ip)) => {
            Some(weighted::client_hash(ip, &["ip_cookie", &lb.name]))
        }
        _ => None,
    }
}

/// With `header` affinity, at the proxy: the key of the request's header session, when its
/// headers name one.
#[inline]
fn header_session(
    settings: &SteeringSettings,
    lb: &LoadBalancer,
    ctx: &RequestContext<'_>,
) -> Option<u64> {
    match (settings.session_affinity.kind, ctx.mode, ctx.http.as_ref()) {
        (AffinityKind::Header, Mode::Proxy, Some(http)) => {
            header_session_key(&settings.session_affinity, &lb.name, http)
        }
        _ => None,
    }
}

fn finish(
    outcome: Outcome,
    ttl: u32,
    affinity: AffinityUpdate,
    matched_rules: Vec<String>,
    trace: Trace,
) -> Decision {
    Decision {
        outcome,
        ttl,
        affinity,
        matched_rules,
        explanation: trace.into_steps(),
        retry_cookie: None,
        why: Why::new(SteeringPolicy::Off),
    }
}

#[cfg(test)]
mod tests;
