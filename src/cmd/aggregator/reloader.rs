//! The aggregator's reload: read and validate the file, build the next generation's
//! frontends (a DNS responder, a proxy, the layer-4 listeners with any new ports bound)
//! carrying their live state over, have the tally loop
//! adopt the generation, then swap the frontends in. Anything that fails before the adoption
//! leaves the running config serving, untouched; the errors go to the log, the reload's HTTP
//! answer and the metrics (`src/cmd/reload.rs`).
//!
//! Flags are not config: listeners, region, datacenter, keys, the regions table, worker
//! counts and timeouts stay as the node started.

use std::path::PathBuf;
use std::sync::Arc;

use aggregator::reload::{Adopter, Outcome};
use aggregator::shared::{InForce, Shared};
use lb_core::config::Config;
use lb_core::RegionsTable;
use lb_edge::{Generation, PopInfo, Serving};
use mesh::node::config_hash;

use crate::cmd::reload as report;

/// What a reload rebuilds, and what it needs to.
pub struct Reloader {
    pub path: PathBuf,
    pub regions: RegionsTable,
    pub node_id: String,
    pub shared: Arc<Shared>,
    pub adopter: Adopter,
    pub dns: Option<DnsFrontend>,
    pub proxy: Option<Arc<Serving<lb_proxy::Proxy>>>,
    /// The layer-4 listeners (`--l4`): a reload binds new ports before anything changes.
    pub l4: Option<lb_l4::Listeners>,
}

/// The DNS server's responder and what building the next one takes.
pub struct DnsFrontend {
    pub serving: Arc<Serving<lb_dns::Responder>>,
    regions: Arc<RegionsTable>,
    key: lb_core::affinity::AffinityKey,
    pop: PopInfo,
    pops: Arc<lb_edge::Pops>,
    /// The SOA serial of zones that set none; rises with every reload.
    serial: u32,
    /// `--dns-prepared-places`.
    prepared_places: usize,
}

impl DnsFrontend {
    /// The frontend of the first generation.
    pub fn start(
        generation: &Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: lb_core::affinity::AffinityKey,
        pop: PopInfo,
        pops: Arc<lb_edge::Pops>,
        prepared_places: usize,
    ) -> Result<DnsFrontend, lb_dns::SetupError> {
        let serial = next_serial(0);
        let first = lb_dns::Responder::new(
            Arc::clone(generation),
            Arc::clone(&regions),
            key.clone(),
            pop.clone(),
            Arc::clone(&pops),
            serial,
        )?
        .with_prepared_places(prepared_places);
        Ok(DnsFrontend {
            serving: Arc::new(Serving::new(first)),
            regions,
            key,
            pop,
            pops,
            serial,
            prepared_places,
        })
    }

    /// A responder for `generation`, with the serial that follows the running one's.
    fn responder(
        &self,
        generation: &Arc<Generation>,
    ) -> Result<(lb_dns::Responder, u32), lb_dns::SetupError> {
        let serial = next_serial(self.serial);
        let r = lb_dns::Responder::new(
            Arc::clone(generation),
            Arc::clone(&self.regions),
            self.key.clone(),
            self.pop.clone(),
            Arc::clone(&self.pops),
            serial,
        )?
        .with_prepared_places(self.prepared_places);
        Ok((r, serial))
    }
}

/// The SOA serial for a config loaded now, after `previous`.
pub fn next_serial(previous: u32) -> u32 {
    let now = u32::try_from(lb_core::clock::unix_secs()).unwrap_or(u32::MAX);
    now.max(previous.saturating_add(1)).max(1)
}

impl Reloader {
    /// One reload of the file, for `why` (logged); never leaves a half-applied config.
    pub async fn reload(&mut self, why: &str) -> Outcome {
        let file = self.path.display().to_string();
        match std::fs::read_to_string(&self.path) {
            Ok(text) => self.reload_text(why, &text, || Ok(())).await,
            Err(e) => {
                let before = self.shared.in_force.load_full();
                let outcome = Outcome {
                    reloaded: false,
                    generation: before.generation.id(),
                    config_hash: before.config_hash.clone(),
                    unchanged: false,
                    errors: vec![format!("{file}: cannot read the config: {e}")],
                };
                report::record(false);
                report::count(false);
                eprintln!("config reload ({why}) refused: {}", outcome.errors[0]);
                outcome
            }
        }
    }

    /// One reload with `text` as the config; `persist` runs once the next generation is
    /// built and before it serves (a failure there leaves the running config serving).
    pub async fn reload_text(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), String>,
    ) -> Outcome {
        let before = self.shared.in_force.load_full();
        let refused = |errors: Vec<String>| Outcome {
            reloaded: false,
            generation: before.generation.id(),
            config_hash: before.config_hash.clone(),
            unchanged: false,
            errors,
        };
        let outcome = match self.prepare(&before, text) {
            Err(errors) => refused(errors),
            Ok(None) => match persist() {
                Err(e) => refused(vec![e]),
                Ok(()) => Outcome {
                    reloaded: false,
                    generation: before.generation.id(),
                    config_hash: before.config_hash.clone(),
                    unchanged: true,
                    errors: Vec::new(),
                },
            },
            Ok(Some(next)) => match persist() {
                Err(e) => refused(vec![e]),
                Ok(()) => match self.apply(next).await {
                    Ok(outcome) => outcome,
                    Err(e) => refused(vec![e]),
                },
            },
        };
        let ok = outcome.reloaded || outcome.unchanged;
        report::record(ok);
        report::count(ok);
        if outcome.reloaded {
            eprintln!(
                "config reloaded ({why}): generation {}, hash {}",
                outcome.generation, outcome.config_hash
            );
        } else if outcome.unchanged {
            eprintln!("config reload ({why}): the file is the one in force");
        } else {
            eprintln!(
                "config reload ({why}) refused, keeping generation {}:",
                outcome.generation
            );
            for e in &outcome.errors {
                eprintln!("  {e}");
            }
        }
        outcome
    }

    /// Validates the config's text, and builds everything the next generation serves with;
    /// `None` when the text is the one in force.
    fn prepare(&self, before: &InForce, text: &str) -> Result<Option<Next>, Vec<String>> {
        let file = self.path.display().to_string();
        let hash = config_hash(text);
        if hash == before.config_hash {
            return Ok(None);
        }
        let config = Config::parse(&file, text, &self.regions)
            .map_err(|errors| errors.0.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        let config = Arc::new(config);
        let id = before.generation.id() + 1;
        let generation = Arc::new(Generation::unknown(id, Arc::clone(&config)));
        let notifier =
            aggregator::notify::Notifier::start(Arc::clone(&config), self.node_id.clone())
                .map_err(|e| vec![format!("{file}: notifications: {e}")])?;
        let responder = match &self.dns {
            None => None,
            Some(dns) => Some(
                dns.responder(&generation)
                    .map_err(|e| vec![format!("{file}: DNS: {e}")])?,
            ),
        };
        let proxy = match &self.proxy {
            None => None,
            Some(serving) => Some(
                serving
                    .load()
                    .reloaded(Arc::clone(&generation))
                    .map_err(|e| vec![format!("{file}: proxy: {e}")])?,
            ),
        };
        let l4 = match &self.l4 {
            None => None,
            Some(listeners) => {
                let next = listeners
                    .serving()
                    .load()
                    .reloaded(Arc::clone(&generation))
                    .map_err(|e| vec![format!("{file}: layer 4: {e}")])?;
                Some(
                    listeners
                        .prepare(next)
                        .map_err(|e| vec![format!("{file}: {e}")])?,
                )
            }
        };
        let now = lb_core::clock::unix_secs();
        let config_drains = aggregator::drains::from_config(
            &config,
            Some((before.config(), &before.config_drains)),
            now,
        );
        Ok(Some(Next {
            in_force: InForce::new(generation, hash, now, config_drains, notifier),
            responder,
            proxy,
            l4,
        }))
    }

    /// Has the tally loop adopt the generation, then serves it.
    async fn apply(&mut self, next: Next) -> Result<Outcome, String> {
        let outcome = Outcome {
            reloaded: true,
            generation: next.in_force.generation.id(),
            config_hash: next.in_force.config_hash.clone(),
            unchanged: false,
            errors: Vec::new(),
        };
        self.adopter
            .adopt(next.in_force)
            .await
            .map_err(|e| e.to_string())?;
        if let (Some(dns), Some((responder, serial))) = (&mut self.dns, next.responder) {
            dns.serving.replace(Arc::new(responder));
            dns.serial = serial;
        }
        if let (Some(serving), Some(mut proxy)) = (&self.proxy, next.proxy) {
            proxy.take_sessions_from(&serving.load());
            serving.replace(Arc::new(proxy));
        }
        if let (Some(listeners), Some(plan)) = (&mut self.l4, next.l4) {
            // The ports were bound in `prepare`; only registering them can fail here.
            if let Err(e) = listeners.apply(plan) {
                tracing::error!(error = %e, "layer-4 listeners after a reload");
            }
        }
        Ok(outcome)
    }
}

/// A validated config and what serves it, not yet in force.
struct Next {
    in_force: InForce,
    responder: Option<(lb_dns::Responder, u32)>,
    proxy: Option<lb_proxy::Proxy>,
    l4: Option<lb_l4::Plan>,
}
