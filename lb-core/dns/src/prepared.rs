//! Answers encoded once per health snapshot. A load balancer whose answer reads nothing of a
//! query but its type — and, for geo, dynamic latency and proximity steering, where the client
//! is located — has a plan (`lb_core::steering::DnsPlan`): the same records every time, or one
//! of a few drawn by weight. Its answer section is encoded the first time it is asked for on a
//! snapshot (per place, for the location-steered); each query then costs a header, its own
//! question, a copy and, for a draw, one draw from the thread's RNG, the one the engine would
//! have drawn from. A new snapshot starts an empty set; what cannot be planned takes the
//! per-query path (`answer.rs`), which gives the same bytes (`tests_fast.rs`).
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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use hickory_proto::rr::RecordType;
use lb_core::config::{LbId, PoolId};
use lb_core::health::HealthSnapshot;
use lb_core::regions_table::CountryCode;
use lb_core::steering::{ClientLocation, DnsPlan, LocationSource};
use lb_core::Region;

/// One place a location-steered answer holds for: `ClientLocation` with its coordinates as
/// bits, so that it can key a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LocatedKey {
    lb: usize,
    aaaa: bool,
    region: Region,
    country: Option<CountryCode>,
    latitude: u64,
    longitude: u64,
    source: LocationSource,
}

impl LocatedKey {
    pub(crate) fn new(lb: LbId, qtype: RecordType, at: ClientLocation) -> LocatedKey {
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
    Fixed {
        count: u16,
        records: Box<[u8]>,
        pool: PoolId,
    },
    /// One record per query, `records[i]` drawn with `weights[i].1` (`weights[i].0 == i`).
    Draw {
        weights: Box<[(usize, f64)]>,
        records: Box<[Box<[u8]>]>,
        pool: PoolId,
    },
}

impl Prepared {
    /// The pool the answer's records are of (for dnstap).
    pub fn pool(&self) -> PoolId {
        match self {
            Prepared::Fixed { pool, .. } | Prepared::Draw { pool, .. } => *pool,
        }
    }

    /// The answer section for one query, and its record count; `None` when a draw finds no
    /// positive weight.
    pub fn section(&self) -> Option<(u16, &[u8])> {
        match self {
            Prepared::Fixed { count, records, .. } => Some((*count, records)),
            Prepared::Draw {
                weights, records, ..
            } => {
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
    pub(crate) fn with_located<R>(
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
            pool: PoolId(0),
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
