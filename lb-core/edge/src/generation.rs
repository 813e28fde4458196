//! One configuration generation and what serves it.
//!
//! A [`Generation`] pairs a config with the health tallied for it, so a frontend built for one
//! config can only ever read that config's snapshot: the snapshot's pools and endpoints are
//! positional, and reading them with another config's indices would steer to the wrong
//! origin. A reload builds a new generation and new frontends for it, and swaps them in whole
//! ([`Serving`]); a request or query that began on the old ones finishes on them.

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use lb_core::config::Config;
use lb_core::health::HealthSnapshot;

/// A snapshot that does not belong to the generation it was offered to.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GenerationMismatch {
    #[error("a snapshot of config generation {snapshot} offered to generation {generation}")]
    Generation { snapshot: u64, generation: u64 },
    #[error("a snapshot shaped for another config offered to generation {generation}")]
    Shape { generation: u64 },
}

/// One configuration and the live health of its endpoints.
#[derive(Debug)]
pub struct Generation {
    id: u64,
    config: Arc<Config>,
    health: ArcSwap<HealthSnapshot>,
}

/// Whether `snapshot` is indexed like `config`: a pool per pool, an endpoint per endpoint.
fn fits(config: &Config, snapshot: &HealthSnapshot) -> bool {
    snapshot.pools.len() == config.pools.len()
        && snapshot.endpoints.len() == config.pools.len()
        && config
            .pools
            .iter()
            .zip(&snapshot.endpoints)
            .all(|(p, e)| p.endpoints.len() == e.len())
}

impl Generation {
    /// Generation `id` of `config`, serving `initial` until the first [`Generation::publish`].
    pub fn new(
        id: u64,
        config: Arc<Config>,
        mut initial: HealthSnapshot,
    ) -> Result<Generation, GenerationMismatch> {
        if !fits(&config, &initial) {
            return Err(GenerationMismatch::Shape { generation: id });
        }
        initial.generation = id;
        Ok(Generation {
            id,
            config,
            health: ArcSwap::from_pointee(initial),
        })
    }

    /// Generation `id` of `config` with every monitored endpoint Unknown.
    pub fn unknown(id: u64, config: Arc<Config>) -> Generation {
        let mut initial = HealthSnapshot::initial(&config);
        initial.generation = id;
        Generation {
            id,
            config,
            health: ArcSwap::from_pointee(initial),
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The latest snapshot of this generation.
    pub fn snapshot(&self) -> Guard<Arc<HealthSnapshot>> {
        self.health.load()
    }

    /// Makes `snapshot` the live one; refused unless it was tallied for this generation.
    pub fn publish(&self, snapshot: HealthSnapshot) -> Result<(), GenerationMismatch> {
        if snapshot.generation != self.id {
            return Err(GenerationMismatch::Generation {
                snapshot: snapshot.generation,
                generation: self.id,
            });
        }
        if !fits(&self.config, &snapshot) {
            return Err(GenerationMismatch::Shape {
                generation: self.id,
            });
        }
        self.health.store(Arc::new(snapshot));
        Ok(())
    }
}

/// The frontend (a DNS responder, a proxy) of the current generation, swapped whole on reload.
/// Each query or request loads it once and keeps what it loaded until it is done.
#[derive(Debug)]
pub struct Serving<T> {
    current: ArcSwap<T>,
}

impl<T> Serving<T> {
    pub fn new(first: T) -> Serving<T> {
        Serving {
            current: ArcSwap::from_pointee(first),
        }
    }

    /// Serving `first`, which the caller keeps a handle to as well.
    pub fn new_shared(first: Arc<T>) -> Serving<T> {
        Serving {
            current: ArcSwap::new(first),
        }
    }

    /// The current frontend, cheaply (no reference count taken).
    pub fn load(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    /// The current frontend, to keep across awaits.
    pub fn load_full(&self) -> Arc<T> {
        self.current.load_full()
    }

    /// Makes `next` the frontend of new queries and requests; returns the one it replaces.
    pub fn replace(&self, next: Arc<T>) -> Arc<T> {
        self.current.swap(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;

    fn config(endpoints: &str) -> Arc<Config> {
        let text = format!(
            "[[pools]]\nname = \"p\"\n{endpoints}\n[[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"p\"]\n"
        );
        Arc::new(
            Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions"))
                .expect("config parses"),
        )
    }

    const ONE: &str = "endpoints = [{ name = \"a\", address = \"127.0.0.1\" }]";
    const TWO: &str = "endpoints = [{ name = \"a\", address = \"127.0.0.1\" }, { name = \"b\", address = \"127.0.0.2\" }]";

    #[test]
    fn a_snapshot_is_published_only_to_its_own_generation() {
        let one = config(ONE);
        let generation = Generation::unknown(3, Arc::clone(&one));
        assert_eq!(generation.snapshot().generation, 3);
        let mut other = HealthSnapshot::initial(&one);
        other.generation = 2;
        assert_eq!(
            generation.publish(other.clone()),
            Err(GenerationMismatch::Generation {
                snapshot: 2,
                generation: 3
            })
        );
        other.generation = 3;
        other.version = 9;
        assert_eq!(generation.publish(other), Ok(()));
        assert_eq!(generation.snapshot().version, 9);
    }

    #[test]
    fn a_snapshot_shaped_for_another_config_is_refused() {
        let two = HealthSnapshot::initial(&config(TWO));
        let generation = Generation::unknown(1, config(ONE));
        let mut wrong = two.clone();
        wrong.generation = 1;
        assert_eq!(
            generation.publish(wrong),
            Err(GenerationMismatch::Shape { generation: 1 })
        );
        assert!(Generation::new(1, config(ONE), two).is_err());
    }

    #[test]
    fn serving_swaps_whole_and_keeps_what_was_loaded() {
        let serving = Serving::new(1u32);
        let held = serving.load_full();
        assert_eq!(*serving.replace(Arc::new(2)), 1);
        assert_eq!((*held, **serving.load()), (1, 2));
    }
}
