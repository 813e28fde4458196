//! A responder for tests and benchmarks: PoP WEU/ams serving a config in a given health, with
//! no PoPs known. The unit tests (tests.rs, tests_fast.rs) use it as a module of the crate;
//! benches/answer.rs includes this file by path, a bench being a crate of its own.

use std::sync::Arc;

use super::Responder;
use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use lb_core::health::HealthSnapshot;
use lb_core::region::Region;
use lb_core::regions_table::RegionsTable;
use lb_edge::{Generation, PopInfo, Pops};

/// A responder at PoP WEU/ams serving `config` in `snapshot`'s health, with no PoPs known.
pub fn responder_for(config: Config, snapshot: HealthSnapshot) -> Responder {
    let regions = RegionsTable::embedded().expect("regions");
    let generation = Arc::new(Generation::new(1, Arc::new(config), snapshot).expect("generation"));
    let pop = PopInfo::new(&regions, Region::Weu, Some("ams"));
    Responder::new(
        generation,
        Arc::new(regions),
        AffinityKey::derive(b"t"),
        pop,
        Arc::new(Pops::from_pointee(Vec::new())),
        7,
    )
    .expect("responder")
}
