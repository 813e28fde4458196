//! The DNS answer of a load balancer whose decision reads nothing of the query but its type:
//! until the health snapshot changes, every A (or AAAA) query gets the same endpoints, or one
//! endpoint drawn by weight from the same choices. A DNS frontend can then encode the answers
//! once per snapshot and serve each query by copying bytes and, for a draw, drawing an index
//! (`lb-core/dns/src/prepared.rs`), which is what the engine would have answered.
//!
//! The plan is the engine's own decision, made once with no client: `plannable` rules out
//! every input a query could change (custom rules, `ip_cookie`, location-steered policies,
//! client-hashed endpoints and load shedding), and a counting RNG checks that the only draw
//! left was the answer's endpoint draw, whose choices the engine hands back.

use rand::RngCore;

use super::{Engine, Outcome};
use crate::config::{AffinityKind, EndpointId, LoadBalancer, OriginPolicy, PoolId, SteeringPolicy};
use crate::health::HealthSnapshot;
use crate::request::{DnsQuestion, Mode, Pop, RequestContext};
use crate::steering::weighted::weighted_pick;

/// What every DNS query of one type for one load balancer is answered with, on one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsPlan {
    /// The TTL of the answer's records.
    pub ttl: u32,
    pub answer: DnsAnswerPlan,
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

/// Whether `lb`'s DNS decision can depend on nothing of a query but its type: no custom
/// rules (they read the client, its location and the clock), no `ip_cookie` (its draws are
/// seeded by the client), failover steering (every other policy draws or reads the client's
/// location), and in every pool it can answer from, no load shedding (hashed by client or
/// drawn) and no `hash` endpoint steering (the client's address picks).
fn plannable(engine: &Engine<'_>, lb: &LoadBalancer) -> bool {
    let settings = &lb.settings;
    lb.rules.is_empty()
        && settings.session_affinity.kind != AffinityKind::IpCookie
        && settings.steering_policy == SteeringPolicy::Off
        && settings.all_pools().into_iter().all(|p| {
            let pool = engine.config.pool(p);
            pool.load_shedding.default_percent <= 0.0
                && pool.origin_steering.policy != OriginPolicy::Hash
        })
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
    /// The plan for A, AAAA or CNAME queries (`qtype`) for `lb` served at `pop` on `health`,
    /// or `None` when the answer may depend on more than that (then every query needs its own
    /// `decide`). `now` is the clock a decision would read; a plannable one does not.
    pub fn dns_plan(
        &self,
        lb: &LoadBalancer,
        health: &HealthSnapshot,
        pop: Pop<'_>,
        qtype: &'static str,
        now: u64,
    ) -> Option<DnsPlan> {
        if !plannable(self, lb) {
            return None;
        }
        let mut ctx = RequestContext::new(Mode::Dns, pop, now);
        ctx.dns = Some(DnsQuestion {
            qname: &lb.name,
            qtype,
        });
        let mut rng = CountingRng::default();
        let (decision, draw) = self.decide_keeping_draw(lb, health, &ctx, &mut rng, true);
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
        })
    }
}

#[cfg(test)]
mod tests;
