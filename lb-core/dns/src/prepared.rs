//! Answers encoded once per health snapshot. A load balancer whose answer reads nothing of a
//! query but its type — and, for geo, dynamic latency and proximity steering, where the client
//! is located — has a plan (`lb_core::steering::DnsPlan`): the same records every time, or one
//! of a few drawn by weight. Its answer section is encoded the first time it is asked for on a
//! snapshot (per place, for the location-steered); each query then costs a header, its own
//! question, a copy and, for a draw, one draw from the thread's RNG, the one the engine would
//! have drawn from. A new snapshot starts an empty set; what cannot be planned takes the
//! per-query path (`server.rs`), which gives the same bytes (`tests_fast.rs`).
//!
//! Memory: at most two entries (A, AAAA) per load balancer of the configuration, and at most
//! `Responder::with_prepared_places` entries for the location-steered ones per snapshot
//! (`--dns-prepared-places`, default 4,096: a query from a place beyond them is steered per
//! query), each no larger than the per-query path's answer. Each answer thread also keeps a
//! map of the places it has looked up (pointers to those entries, no more of them than the
//! table holds) and the set they belong to, so that at most one superseded set per thread
//! stays alive until that thread's next location-steered query.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use hickory_proto::rr::rdata::opt::ClientSubnet;
use hickory_proto::rr::RecordType;
use lb_core::config::{EndpointId, LbId};
use lb_core::health::HealthSnapshot;
use lb_core::regions_table::CountryCode;
use lb_core::request::RequestContext;
use lb_core::steering::{
    locate, ClientLocation, DnsAnswerPlan, DnsPlan, LocationSource, PlanScope,
};
use lb_core::Region;

use super::fast;

/// One place a location-steered answer holds for: `ClientLocation` with its coordinates as
/// bits, so that it can key a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LocatedKey {
    lb: usize,
    aaaa: bool,
    region: Region,
    country: Option<CountryCode>,
    latitude: u64,
    longitude: u64,
    source: LocationSource,
}

impl LocatedKey {
    fn new(lb: LbId, qtype: RecordType, at: ClientLocation) -> LocatedKey {
        LocatedKey {
            lb: lb.0,
            aaaa: qtype == RecordType::AAAA,
            region: at.region,
            country: at.country,
            latitude: at.coordinates.latitude.to_bits(),
            longitude: at.coordinates.longitude.to_bits(),
            source: at.source,
        }
    }
}

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
    /// `slots[2 * lb + (qtype is AAAA)]` for `PlanScope::Everywhere`; `None` inside: no
    /// plan, per-query path.
    slots: Box<[OnceLock<Option<Prepared>>]>,
    /// `PlanScope::Location` answers by place, at most `places` of them: a table of
    /// locations (a city database's networks, say) larger than that only has its first
    /// places' answers prepared.
    located: LocatedTable,
}

/// The table of places shared by the answer threads. Each thread reads it through its own
/// copy of what it has looked up (`NEAR`), so that a popular place's queries on every core do
/// not take turns at this lock or at its entry's reference count.
#[derive(Debug)]
struct LocatedTable {
    entries: Mutex<Places>,
    places: usize,
}

type Places = HashMap<LocatedKey, Option<Arc<Prepared>>, foldhash::fast::RandomState>;

impl LocatedTable {
    fn new(places: usize) -> LocatedTable {
        LocatedTable {
            entries: Mutex::new(Places::default()),
            places,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Places> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry for `key`, made by `prepare` the first time, and whether the table holds it
    /// (it does while there is room).
    fn get_or_prepare(
        &self,
        key: LocatedKey,
        prepare: impl FnOnce() -> Option<Prepared>,
    ) -> (Option<Arc<Prepared>>, bool) {
        {
            let entries = self.lock();
            if let Some(found) = entries.get(&key) {
                return (found.clone(), true);
            }
            // Full (or 0 places): the query is steered on its own, with no entry made for it.
            if entries.len() >= self.places {
                return (None, false);
            }
        }
        // Prepared outside the lock: other threads' queries do not wait for the engine.
        let made = prepare().map(Arc::new);
        let mut entries = self.lock();
        if entries.len() < self.places {
            entries.insert(key, made.clone());
            return (made, true);
        }
        (made, false)
    }
}

/// One thread's copy of the entries of one set's table of places that it has looked up: no
/// more than the table holds.
struct NearPlaces {
    /// Held so that a new set cannot reuse its address while this copy exists: an answer
    /// thread keeps at most one set older than the current one alive, until its next
    /// location-steered query.
    set: Arc<PreparedAnswers>,
    entries: Places,
}

thread_local! {
    static NEAR: RefCell<Option<NearPlaces>> = const { RefCell::new(None) };
}

impl PreparedAnswers {
    pub fn new(
        snapshot: Arc<HealthSnapshot>,
        load_balancers: usize,
        places: usize,
    ) -> PreparedAnswers {
        PreparedAnswers {
            snapshot,
            slots: (0..2 * load_balancers).map(|_| OnceLock::new()).collect(),
            located: LocatedTable::new(places),
        }
    }

    /// How many places have a location-steered entry (or the knowledge that they have none).
    #[cfg(test)]
    pub fn located(&self) -> usize {
        self.located.lock().len()
    }

    /// What `answer` makes of the location-steered entry of `set` for `key`, made by
    /// `prepare` the first time; `None` when there is none (no plan, or no room).
    fn with_located<R>(
        set: &Arc<PreparedAnswers>,
        key: LocatedKey,
        prepare: impl FnOnce() -> Option<Prepared>,
        answer: impl FnOnce(&Prepared) -> Option<R>,
    ) -> Option<R> {
        let (mut prepare, mut answer) = (Some(prepare), Some(answer));
        let near_answer = NEAR.try_with(|cell| {
            let mut near = cell.try_borrow_mut().ok()?;
            if !near.as_ref().is_some_and(|n| Arc::ptr_eq(&n.set, set)) {
                *near = Some(NearPlaces {
                    set: Arc::clone(set),
                    entries: Places::default(),
                });
            }
            let near = near.as_mut()?;
            let answer = answer.take()?;
            if let Some(found) = near.entries.get(&key) {
                return Some(found.as_deref().and_then(answer));
            }
            let (entry, held) = set.located.get_or_prepare(key, prepare.take()?);
            let answered = entry.as_deref().and_then(answer);
            if held {
                near.entries.insert(key, entry);
            }
            Some(answered)
        });
        if let Ok(Some(answered)) = near_answer {
            return answered;
        }
        // This thread's copy is in use (an answer made while making another) or gone (the
        // thread is exiting): the shared table alone.
        let (entry, _) = set.located.get_or_prepare(key, prepare?);
        entry.as_deref().and_then(answer?)
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

impl super::Responder {
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
        out: &mut Vec<u8>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::config::Config;
    use lb_core::geo::Coordinates;
    use lb_core::health::Verdict;
    use lb_core::RegionsTable;

    fn key(lb: usize) -> LocatedKey {
        let at = ClientLocation {
            region: Region::Enam,
            country: None,
            coordinates: Coordinates {
                latitude: 40.0,
                longitude: -74.0,
            },
            source: LocationSource::Ecs,
        };
        LocatedKey::new(LbId(lb), RecordType::A, at)
    }

    fn fixed(byte: u8) -> Prepared {
        Prepared::Fixed {
            count: 1,
            records: Box::new([byte]),
        }
    }

    /// A located answer looked up while another is being made on the same thread (the
    /// thread's copy is then in use) takes the shared table instead of panicking.
    #[test]
    fn a_nested_lookup_uses_the_shared_table() {
        let regions = RegionsTable::embedded().expect("regions");
        let config = Config::parse(
            "t.toml",
            "[[monitors]]\nname = \"m\"\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\norigins = [{ name = \"a\", address = \"192.0.2.1\" }]\n",
            &regions,
        )
        .expect("config");
        let snapshot = Arc::new(HealthSnapshot::uniform(&config, Verdict::Healthy));
        let set = Arc::new(PreparedAnswers::new(snapshot, 2, 16));
        let section = |p: &Prepared| p.section().map(|(_, s)| s.to_vec());
        let outer = PreparedAnswers::with_located(
            &set,
            key(0),
            || Some(fixed(1)),
            |p| {
                let inner = PreparedAnswers::with_located(&set, key(1), || Some(fixed(2)), section);
                Some((section(p)?, inner?))
            },
        );
        assert_eq!(outer, Some((vec![1], vec![2])));
        assert_eq!(set.located(), 2);
        // The inner one, which this thread's copy did not take, comes from the shared table
        // without being made again.
        let again = PreparedAnswers::with_located(&set, key(1), || None, section);
        assert_eq!(again, Some(vec![2]));
    }
}
