//! What meshlb's frontends (`lb-dns`, `lb-proxy`) share: the configuration generation they
//! serve with its live health, the serving PoP, and one steering decision on the live snapshot
//! with a per-thread RNG (no lock on the hot path). The decision itself is `lb-core`'s.

use std::cell::RefCell;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use lb_core::config::LoadBalancer;
use lb_core::geo::Coordinates;
use lb_core::region::Region;
use lb_core::regions_table::{CountryCode, RegionsTable};
use lb_core::request::{Pop, RequestContext};
use lb_core::steering::{Decision, Engine};

mod accept_backoff;
mod generation;
pub mod private_dial;
mod thread_end;
mod timed_write;

pub use accept_backoff::AcceptBackoff;
pub use generation::{Generation, GenerationMismatch, Serving};
pub use private_dial::{Dial, PrivateDialError, PrivateDialer, PrivateStream};
pub use thread_end::{end_signal, EndSignal, Ended, ThreadEnd};
pub use timed_write::TimedWrite;

/// The PoPs serving the proxy that DNS answers proxied names with (`lb_core::pops`): live and
/// ready aggregators with advertised proxy addresses, as the aggregator last saw the mesh.
/// Not tied to a config generation: it survives reloads.
pub type Pops = arc_swap::ArcSwap<Vec<lb_core::pops::ProxyPop>>;

/// The serving node: a client located by the PoP is here.
#[derive(Debug, Clone)]
pub struct PopInfo {
    pub region: Region,
    pub datacenter: Option<String>,
    pub country: Option<CountryCode>,
    pub coordinates: Coordinates,
}

impl PopInfo {
    /// The PoP of a node in `region`, at datacenter `dc` when regions.toml knows it.
    pub fn new(regions: &RegionsTable, region: Region, dc: Option<&str>) -> PopInfo {
        let known = dc.and_then(|d| regions.datacenter(d));
        PopInfo {
            region,
            datacenter: dc.map(str::to_ascii_lowercase),
            country: known.map(|d| d.country),
            coordinates: known.map_or(regions.region(region).coordinates, |d| d.coordinates),
        }
    }
}

impl PopInfo {
    /// The PoP as a request sees it.
    pub fn pop(&self) -> Pop<'_> {
        Pop {
            region: self.region,
            datacenter: self.datacenter.as_deref(),
            country: self.country,
            coordinates: self.coordinates,
        }
    }
}

thread_local! {
    static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::from_os_rng());
}

/// One decision on the generation's current snapshot (`engine` steers over its config).
pub fn decide_live(
    engine: &Engine<'_>,
    lb: &LoadBalancer,
    generation: &Generation,
    ctx: &RequestContext<'_>,
) -> Decision {
    let snapshot = generation.snapshot();
    with_thread_rng(|rng| engine.decide(lb, &snapshot, ctx, rng))
}

/// Runs `f` with this thread's RNG, the one `decide_live` draws from: a draw made outside the
/// engine on the engine's behalf (`lb_core::steering::DnsPlan::draw`) uses the same stream.
pub fn with_thread_rng<T>(f: impl FnOnce(&mut dyn rand::RngCore) -> T) -> T {
    RNG.with(|rng| f(&mut *rng.borrow_mut()))
}

/// Restarts this thread's RNG from `seed`: two ways of answering the same query can then be
/// compared draw for draw (`lb-core/dns/src/tests_fast.rs`).
pub fn seed_thread_rng(seed: u64) {
    RNG.with(|rng| *rng.borrow_mut() = SmallRng::seed_from_u64(seed));
}
