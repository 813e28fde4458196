//! The DNS answer of a load balancer whose decision reads nothing of the query but its type
//! and, for the location-steered policies, where the client is: until the health snapshot
//! changes, every A (or AAAA) query from the same place gets the same endpoints, or one
//! endpoint drawn by weight from the same choices. A DNS frontend can then encode the answers
//! once per snapshot (and place) and serve each query by copying bytes and, for a draw,
//! drawing an index (`lb-core/dns/src/prepared.rs`), which is what the engine would have
//! answered.
//!
//! The plan is the engine's own decision, made once: `plan_scope` rules out every input a
//! query could change besides the client's location (custom rules, `ip_cookie`, policies that
//! draw pools, client-hashed endpoints and load shedding), and a counting RNG checks that the
//! only draw left was the answer's endpoint draw, whose choices the engine hands back.

use rand::RngCore;

use super::{locate, ClientLocation, Engine, Outcome};
use crate::config::{AffinityKind, EndpointId, LoadBalancer, OriginPolicy, PoolId};
use crate::health::HealthSnapshot;
use crate::request::{Mode, RequestContext};
use crate::steering::weighted::weighted_pick;

/// What every DNS query of one type for one load balancer is answered with, on one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsPlan {
    /// The TTL of the answer's records.
    pub ttl: u32,
    pub answer: DnsAnswerPlan,
    /// With `PlanScope::Location`: the client location the plan holds for.
    pub location: Option<ClientLocation>,
}

/// Which queries of one type one plan answers, on one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanScope {
    /// All of them: failover steering does not read the client's location.
    Everywhere,
    /// Those whose client is located (`steering::locate`) at the same place: geo, dynamic
    /// latency and proximity steering read nothing else of the client.
    Location,
}

/// The answer part of a `DnsPlan`.
#[derive(Debug, Clone, PartialEq)]
pub enum DnsAnswerPlan {
    /// These endpoints of `pool`, every time (equal weights: all of the eligible ones).
    Fixed {
        pool: PoolId,
        endpoints: Vec<EndpointId>,
    },
    /// One endpoint of `pool`, drawn per query by `DnsPlan::draw` from `choices`.
    Draw {
        pool: PoolId,
        choices: Vec<(EndpointId, f64)>,
    },
    /// No pool can answer: NODATA.
    Nothing,
}

impl DnsPlan {
    /// The draw the engine makes for a `Draw` answer, with the same RNG use: the same RNG
    /// state picks the same endpoint here as in `Engine::decide`. `None` when no choice has a
    /// positive weight. The items may stand for the endpoints in any way (an index into
    /// pre-encoded answers): the draw reads only the weights, in order.
    pub fn draw<T: Copy>(choices: &[(T, f64)], rng: &mut dyn RngCore) -> Option<T> {
        weighted_pick(choices, rng)
    }
}

/// Whether `lb`'s DNS decision can depend on nothing of a query but its type and (with
/// `PlanScope::Location`) the client's location: no custom rules (they read the client's
/// address, subnet and the clock), no `ip_cookie` (its draws are seeded by the client), no
/// policy that draws pools (random, least outstanding requests, least connections), and in
/// every pool it can answer from, no load shedding (hashed by client or drawn) and no `hash`
/// endpoint steering (the client's address picks).
fn plan_scope(engine: &Engine<'_>, lb: &LoadBalancer) -> Option<PlanScope> {
    let settings = &lb.settings;
    let policy = settings.steering_policy;
    if policy.draws() {
        return None;
    }
    let scope = if policy.reads_location() {
        PlanScope::Location
    } else {
        PlanScope::Everywhere
    };
    let pools_plannable = settings.all_pools().into_iter().all(|p| {
        let pool = engine.config.pool(p);
        pool.load_shedding.default_percent <= 0.0
            && pool.origin_steering.policy != OriginPolicy::Hash
    });
    (lb.rules.is_empty()
        && settings.session_affinity.kind != AffinityKind::IpCookie
        && pools_plannable)
        .then_some(scope)
}

/// An RNG that counts what is drawn from it and always yields zero.
#[derive(Debug, Default)]
struct CountingRng {
    draws: u32,
}

impl RngCore for CountingRng {
    fn next_u32(&mut self) -> u32 {
        self.draws += 1;
        0
    }

    fn next_u64(&mut self) -> u64 {
        self.draws += 1;
        0
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.draws += 1;
        dst.fill(0);
    }
}

impl Engine<'_> {
    /// Whether `lb`'s DNS answers can be planned, and which queries one plan answers.
    pub fn dns_plan_scope(&self, lb: &LoadBalancer) -> Option<PlanScope> {
        plan_scope(self, lb)
    }

    /// The plan for `lb` on `health` that answers the DNS query of `ctx` (its question set)
    /// and every other query of its scope: of the same type, and with `PlanScope::Location`
    /// from a client located where this one is (`DnsPlan::location`). `None` when the answer
    /// may depend on more than that (then every query needs its own `decide`).
    pub fn dns_plan(
        &self,
        lb: &LoadBalancer,
        health: &HealthSnapshot,
        ctx: &RequestContext<'_>,
    ) -> Option<DnsPlan> {
        let scope = plan_scope(self, lb)?;
        if ctx.mode != Mode::Dns || ctx.dns.is_none() {
            return None;
        }
        // Only what the scope allows the decision to read: the PoP, the question, the clock
        // (which a plannable decision does not read) and, per location, the location inputs.
        let mut at = RequestContext::new(Mode::Dns, ctx.pop, ctx.now);
        at.dns = ctx.dns;
        let location = match scope {
            PlanScope::Everywhere => None,
            PlanScope::Location => {
                at.client_location = ctx.client_location;
                at.ecs = ctx.ecs;
                let settings = &lb.settings;
                Some(locate(
                    settings.location_strategy,
                    settings.steering_policy,
                    &at,
                    self.regions,
                ))
            }
        };
        let mut rng = CountingRng::default();
        let (decision, draw) = self.decide_keeping_draw(lb, health, &at, &mut rng, true);
        let answer = match (decision.outcome, draw, rng.draws) {
            (Outcome::NoPool, None, 0) => DnsAnswerPlan::Nothing,
            (Outcome::Answer { pool, endpoints }, None, 0) => {
                DnsAnswerPlan::Fixed { pool, endpoints }
            }
            (Outcome::Answer { pool, .. }, Some(choices), 1) => {
                DnsAnswerPlan::Draw { pool, choices }
            }
            // Anything else drew or answered in a way a plan cannot repeat.
            _ => return None,
        };
        Some(DnsPlan {
            ttl: decision.ttl,
            answer,
            location,
        })
    }
}

#[cfg(test)]
mod tests;
