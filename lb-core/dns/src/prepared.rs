//! Answers encoded once per health snapshot. A load balancer whose answer reads nothing of a
//! query but its type has a plan (`lb_core::steering::DnsPlan`): the same records every time,
//! or one of a few drawn by weight. Its answer section is encoded the first time it is asked
//! for on a snapshot; each query then costs a header, its own question, a copy and, for a
//! draw, one draw from the thread's RNG, the one the engine would have drawn from. A new
//! snapshot starts an empty set; what cannot be planned takes the per-query path
//! (`server.rs`), which gives the same bytes (`tests_fast.rs`).
//!
//! Memory: at most two entries (A, AAAA) per load balancer of the configuration, each no
//! larger than the per-query path's answer to the same question.

use std::sync::{Arc, OnceLock};

use hickory_proto::rr::RecordType;
use lb_core::config::{EndpointId, LbId};
use lb_core::health::HealthSnapshot;
use lb_core::steering::{DnsAnswerPlan, DnsPlan};

use super::fast;

/// The answer section of one (load balancer, query type) on one snapshot.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// The same records for every query.
    Fixed { count: u16, records: Box<[u8]> },
    /// One record per query, `records[i]` drawn with `weights[i].1` (`weights[i].0 == i`).
    Draw {
        weights: Box<[(usize, f64)]>,
        records: Box<[Box<[u8]>]>,
    },
}

impl Prepared {
    /// The answer section for one query, and its record count; `None` when a draw finds no
    /// positive weight.
    pub fn section(&self) -> Option<(u16, &[u8])> {
        match self {
            Prepared::Fixed { count, records } => Some((*count, records)),
            Prepared::Draw { weights, records } => {
                let i = lb_edge::with_thread_rng(|rng| DnsPlan::draw(weights, rng))?;
                records.get(i).map(|r| (1, &r[..]))
            }
        }
    }
}

/// The prepared answers of one snapshot, filled as queries ask.
#[derive(Debug)]
pub(crate) struct PreparedAnswers {
    /// Held so that a new snapshot cannot reuse its address while this set exists.
    snapshot: Arc<HealthSnapshot>,
    /// `slots[2 * lb + (qtype is AAAA)]`; `None` inside: no plan, per-query path.
    slots: Box<[OnceLock<Option<Prepared>>]>,
}

impl PreparedAnswers {
    pub fn new(snapshot: Arc<HealthSnapshot>, load_balancers: usize) -> PreparedAnswers {
        PreparedAnswers {
            snapshot,
            slots: (0..2 * load_balancers).map(|_| OnceLock::new()).collect(),
        }
    }

    pub fn snapshot(&self) -> &Arc<HealthSnapshot> {
        &self.snapshot
    }

    /// The entry for `lb` and `qtype` (A or AAAA), made by `prepare` the first time.
    pub fn get_or_prepare(
        &self,
        lb: LbId,
        qtype: RecordType,
        prepare: impl FnOnce() -> Option<Prepared>,
    ) -> Option<&Prepared> {
        let family = match qtype {
            RecordType::A => 0,
            RecordType::AAAA => 1,
            _ => return None,
        };
        self.slots
            .get(2 * lb.0 + family)?
            .get_or_init(prepare)
            .as_ref()
    }
}

impl super::Responder {
    /// The answer section `lb`'s plan gives `qtype` on `snapshot`, encoded for a question
    /// that names the load balancer (`fast::first_owner_at`); `None` without a plan, for an
    /// empty answer (NODATA carries the SOA), or for records the fast encoder does not write.
    pub(crate) fn prepare(
        &self,
        lb: LbId,
        qtype: RecordType,
        snapshot: &HealthSnapshot,
    ) -> Option<Prepared> {
        let plan = self.plan(lb, qtype, snapshot)?;
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
                Some(Prepared::Fixed { count, records })
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
                })
            }
        }
    }
}
