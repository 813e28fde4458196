//! The aggregator's frontends and their reload: validate a config text, build the next
//! generation's frontends (a DNS responder, a proxy, the layer-4 listeners with any new ports
//! bound) carrying their live state over, have the tally loop adopt the generation, then swap
//! the frontends in. Anything that fails before the adoption leaves the running config
//! serving, untouched; the errors go to the log, the reload's HTTP answer and the metrics
//! (`meshlb_node::reload`). The config protocol (`meshlb_node::control::protocol`) decides
//! when.
//!
//! Settings are not config: listeners, region, datacenter, keys, the regions table, worker
//! counts and timeouts stay as the node started.

use std::path::PathBuf;
use std::sync::Arc;

use lb_core::config::IncrementalParser;
use lb_core::RegionsTable;
use lb_edge::{Generation, PopInfo, Serving};
use mesh::node::config_hash;
use meshlb_node::reload::{self as report, Outcome};

use super::file_stamps::FileStamps;
use super::{Settings, StartError};
use crate::adopt::Adopter;
use crate::shared::{InForce, Shared};

/// What a reload rebuilds, and what it needs to.
pub(super) struct Frontends {
    pub path: PathBuf,
    pub regions: RegionsTable,
    pub node_id: String,
    pub shared: Arc<Shared>,
    pub adopter: Adopter,
    pub dns: Option<DnsFrontend>,
    pub proxy: Option<Arc<Serving<lb_proxy::Proxy>>>,
    /// The layer-4 listeners (`--l4`): a reload binds new ports before anything changes.
    pub l4: Option<lb_l4::Listeners>,
    /// The tunnel hub (`--tunnel-listen`): a reload hands it the new grants.
    pub(super) tunnels: Option<super::tunnels::Tunnels>,
    /// Parses each generation, reusing the resources the one before held.
    pub parser: IncrementalParser,
    /// The files the config in force names, as they were when it was built.
    pub files: FileStamps,
}

/// The DNS server's responder and what building the next one takes.
pub(super) struct DnsFrontend {
    pub serving: Arc<Serving<lb_dns::Responder>>,
    regions: Arc<RegionsTable>,
    key: lb_core::affinity::AffinityKey,
    pop: PopInfo,
    pops: Arc<lb_edge::Pops>,
    /// The SOA serial of zones that set none; rises with every reload.
    serial: u32,
    /// `--dns-prepared-places`.
    prepared_places: usize,
    /// `--dns-nsid`.
    nsid: Option<Arc<[u8]>>,
    /// Server cookies' secrets, from the cluster key (`--dns-cookies`).
    cookies: Option<lb_dns::Cookies>,
}

impl DnsFrontend {
    /// The frontend of the first generation.
    pub fn start(
        generation: &Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: lb_core::affinity::AffinityKey,
        pop: PopInfo,
        pops: Arc<lb_edge::Pops>,
        (prepared_places, nsid, cookies): (usize, Option<Arc<[u8]>>, Option<lb_dns::Cookies>),
    ) -> Result<DnsFrontend, lb_dns::DnsConfigError> {
        let serial = next_serial(0);
        let first = lb_dns::Responder::new(
            Arc::clone(generation),
            Arc::clone(&regions),
            key.clone(),
            pop.clone(),
            Arc::clone(&pops),
            serial,
        )?
        .with_prepared_places(prepared_places)
        .with_nsid(nsid.clone())
        .with_cookies(cookies);
        Ok(DnsFrontend {
            serving: Arc::new(Serving::new(first)),
            regions,
            key,
            pop,
            pops,
            serial,
            prepared_places,
            nsid,
            cookies,
        })
    }

    /// A responder for `generation`, with the serial that follows the running one's.
    fn responder(
        &self,
        generation: &Arc<Generation>,
    ) -> Result<(lb_dns::Responder, u32), lb_dns::DnsConfigError> {
        let serial = next_serial(self.serial);
        let r = lb_dns::Responder::new(
            Arc::clone(generation),
            Arc::clone(&self.regions),
            self.key.clone(),
            self.pop.clone(),
            Arc::clone(&self.pops),
            serial,
        )?
        .with_prepared_places(self.prepared_places)
        .with_nsid(self.nsid.clone())
        .with_cookies(self.cookies);
        Ok((r, serial))
    }
}

/// The SOA serial for a config loaded now, after `previous`.
fn next_serial(previous: u32) -> u32 {
    let now = u32::try_from(lb_core::clock::unix_secs()).unwrap_or(u32::MAX);
    now.max(previous.saturating_add(1)).max(1)
}

/// The first generation's frontends, bound and serving.
pub(super) struct Started {
    pub frontends: Frontends,
    pub dns_server: Option<lb_dns::DnsServer>,
    pub proxies: Vec<lb_proxy::ProxyListener>,
}

/// What every frontend is built from, beside its own settings.
struct Building<'a> {
    settings: &'a Settings,
    generation: &'a Arc<Generation>,
    regions: Arc<lb_core::RegionsTable>,
    /// The config file's name, for errors.
    file: String,
}

impl Building<'_> {
    /// This PoP: its region and datacenter.
    fn pop(&self) -> PopInfo {
        PopInfo::new(
            &self.settings.node.regions,
            self.settings.node.region,
            Some(&self.settings.node.dc),
        )
    }

    /// The DNS frontend and its server, bound.
    async fn dns(
        &self,
        d: &super::DnsSettings,
        shared: &Shared,
    ) -> Result<(lb_dns::DnsServer, DnsFrontend), StartError> {
        let frontend = DnsFrontend::start(
            self.generation,
            Arc::clone(&self.regions),
            self.settings.affinity_key.clone(),
            self.pop(),
            Arc::clone(&shared.pops),
            (d.prepared_places, d.nsid.clone(), d.cookies),
        )
        .map_err(|e| StartError::frontend("DNS")(format!("{}: {e}", self.file)))?;
        let server = lb_dns::DnsServer::start(
            Arc::clone(&frontend.serving),
            &d.addrs,
            d.sockets,
            d.rrl,
            d.tcp,
            d.dnstap.clone(),
        )
        .await
        .map_err(|e| StartError::frontend("DNS")(e.to_string()))?;
        eprintln!("authoritative DNS on {:?} (UDP and TCP)", server.addrs);
        Ok((server, frontend))
    }

    /// The proxy and its listeners, plain and TLS, bound.
    fn proxy(
        &self,
        p: &super::ProxyListeners,
        private: Option<lb_edge::PrivateDialer>,
    ) -> Result<(Arc<Serving<lb_proxy::Proxy>>, Vec<lb_proxy::ProxyListener>), StartError> {
        let settings = lb_proxy::ProxySettings {
            private,
            ..p.settings.clone()
        };
        let serving = Arc::new(Serving::new(
            lb_proxy::Proxy::new(
                Arc::clone(self.generation),
                Arc::clone(&self.regions),
                self.settings.affinity_key.clone(),
                self.pop(),
                settings,
            )
            .map_err(|e| StartError::frontend("proxy")(format!("{}: {e}", self.file)))?,
        ));
        let listen_error = |e: std::io::Error| StartError::frontend("proxy")(e.to_string());
        let mut proxies = Vec::new();
        for &addr in &p.plain {
            proxies.push(lb_proxy::listen(Arc::clone(&serving), addr, None).map_err(listen_error)?);
        }
        if !p.tls.is_empty() {
            if p.certificates.is_empty() {
                return Err(StartError::Settings(
                    "--proxy-tls needs --tls-cert and --tls-key given in pairs".into(),
                ));
            }
            let tls = lb_proxy::Certificates::load(&p.certificates)
                .and_then(lb_proxy::Certificates::server_config)
                .map_err(|e| StartError::frontend("TLS")(e.to_string()))?;
            for &addr in &p.tls {
                proxies.push(
                    lb_proxy::listen(Arc::clone(&serving), addr, Some(Arc::clone(&tls)))
                        .map_err(listen_error)?,
                );
            }
        }
        for l in &proxies {
            eprintln!("HTTP proxy on {}", l.addr);
        }
        Ok((serving, proxies))
    }

    /// The layer-4 frontend's listeners, bound.
    async fn l4(
        &self,
        l4: &lb_l4::L4Settings,
        private: lb_edge::PrivateDialer,
    ) -> Result<lb_l4::Listeners, StartError> {
        let frontend = lb_l4::Layer4::new(
            Arc::clone(self.generation),
            Arc::clone(&self.regions),
            self.settings.affinity_key.clone(),
            self.pop(),
            lb_l4::L4Settings {
                private: Some(private),
                ..l4.clone()
            },
        )
        .map_err(|e| StartError::frontend("layer 4")(format!("{}: {e}", self.file)))?;
        let listeners = lb_l4::Listeners::start(frontend)
            .await
            .map_err(|e| StartError::frontend("layer 4")(e.to_string()))?;
        for (t, addr) in listeners.addresses() {
            eprintln!("layer-4 {} on {addr}", t.name());
        }
        Ok(listeners)
    }
}

impl Frontends {
    /// Builds and binds the frontends `settings` ask for, serving `generation`.
    pub(super) async fn start(
        settings: &Settings,
        generation: &Arc<Generation>,
        shared: &Arc<Shared>,
        adopter: Adopter,
        gossip: Arc<tokio::sync::Mutex<chitchat::Chitchat>>,
    ) -> Result<Started, StartError> {
        let building = Building {
            settings,
            generation,
            regions: Arc::new(settings.node.regions.clone()),
            file: settings.node.config.display().to_string(),
        };
        let (dns_server, dns) = match &settings.dns {
            Some(d) => {
                let (server, frontend) = building.dns(d, shared).await?;
                (Some(server), Some(frontend))
            }
            None => (None, None),
        };
        let tunnels = match &settings.tunnels {
            Some(t) => Some(
                super::tunnels::Tunnels::start(t, generation.config(), &settings.relay_key, gossip)
                    .await?,
            ),
            None => None,
        };
        if let Some(t) = &tunnels {
            let _ = shared.tunnel_hub.set(t.hub());
        }
        let dialer = super::tunnels::dialer(
            tunnels.as_ref(),
            &settings.relay_key,
            Arc::clone(&shared.tunnel_holders),
        );
        let (proxy, proxies) = match &settings.proxy {
            Some(p) => {
                let (serving, listeners) = building.proxy(p, Some(dialer.clone()))?;
                (Some(serving), listeners)
            }
            None => (None, Vec::new()),
        };
        let l4 = match &settings.l4 {
            Some(l4) => Some(building.l4(l4, dialer).await?),
            None => None,
        };
        let frontends = Frontends {
            path: settings.node.config.clone(),
            regions: settings.node.regions.clone(),
            node_id: settings.node.node_id.clone(),
            shared: Arc::clone(shared),
            adopter,
            dns,
            proxy,
            l4,
            tunnels,
            parser: IncrementalParser::new(),
            files: FileStamps::of(generation.config()),
        };
        Ok(Started {
            frontends,
            dns_server,
            proxies,
        })
    }

    /// The layer-4 listeners' end, to watch with the vital tasks (once).
    pub(super) fn l4_ended(&mut self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.l4.as_mut().and_then(lb_l4::Listeners::take_ended)
    }

    /// One reload with `text` as the config; `persist` runs once the next generation is
    /// built and before it serves (a failure there leaves the running config serving).
    async fn rebuild(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), meshlb_node::control::StoreError>,
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
                Err(e) => refused(vec![e.to_string()]),
                Ok(()) => Outcome {
                    reloaded: false,
                    generation: before.generation.id(),
                    config_hash: before.config_hash.clone(),
                    unchanged: true,
                    errors: Vec::new(),
                },
            },
            Ok(Some(next)) => match persist() {
                Err(e) => refused(vec![e.to_string()]),
                Ok(()) => match self.apply(next).await {
                    Ok(outcome) => outcome,
                    Err(e) => refused(vec![e.to_string()]),
                },
            },
        };
        let ok = outcome.reloaded || outcome.unchanged;
        report::record(ok);
        report::count(ok);
        if outcome.reloaded {
            tracing::info!(
                why,
                generation = outcome.generation,
                hash = %outcome.config_hash,
                "config reloaded ({why}): generation {}, hash {}",
                outcome.generation,
                outcome.config_hash
            );
        } else if outcome.unchanged {
            tracing::info!(why, "config reload ({why}): the file is the one in force");
        } else {
            tracing::warn!(
                why,
                generation = outcome.generation,
                errors = ?outcome.errors,
                "config reload ({why}) refused, keeping generation {}:\n  {}",
                outcome.generation,
                outcome.errors.join("\n  ")
            );
        }
        outcome
    }

    /// Validates the config's text, and builds everything the next generation serves with;
    /// `None` when the text is the one in force.
    fn prepare(&self, before: &InForce, text: &str) -> Result<Option<Next>, Vec<String>> {
        let file = self.path.display().to_string();
        let hash = config_hash(text);
        if hash == before.config_hash && FileStamps::of(before.generation.config()) == self.files {
            return Ok(None);
        }
        let config = self
            .parser
            .parse(&file, text, &self.regions)
            .map_err(|errors| errors.0.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        // Before anything reads them: a file changed while this builds is seen by the next.
        let files = FileStamps::of(&config);
        let config = Arc::new(config);
        let id = before.generation.id() + 1;
        let generation = Arc::new(Generation::unknown(id, Arc::clone(&config)));
        let notifier = crate::notify::Notifier::start(Arc::clone(&config), self.node_id.clone())
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
        let config_drains = crate::drains::from_config(
            &config,
            Some((before.config(), &before.config_drains)),
            now,
        );
        Ok(Some(Next {
            in_force: InForce::new(generation, hash, now, config_drains, notifier),
            responder,
            proxy,
            l4,
            files,
        }))
    }

    /// Has the tally loop adopt the generation, then serves it.
    async fn apply(&mut self, next: Next) -> Result<Outcome, crate::adopt::LoopGone> {
        let outcome = Outcome {
            reloaded: true,
            generation: next.in_force.generation.id(),
            config_hash: next.in_force.config_hash.clone(),
            unchanged: false,
            errors: Vec::new(),
        };
        let config = Arc::clone(next.in_force.generation.config());
        self.adopter.adopt(next.in_force).await?;
        if let Some(tunnels) = &self.tunnels {
            tunnels.apply(&config);
        }
        self.files = next.files;
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
    files: FileStamps,
    responder: Option<(lb_dns::Responder, u32)>,
    proxy: Option<lb_proxy::Proxy>,
    l4: Option<lb_l4::Plan>,
}

impl meshlb_node::control::Reload for Frontends {
    fn refused(&self, errors: Vec<String>) -> Outcome {
        let in_force = self.shared.in_force.load();
        Outcome {
            reloaded: false,
            generation: in_force.generation.id(),
            config_hash: in_force.config_hash.clone(),
            unchanged: false,
            errors,
        }
    }

    fn reload_text(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), meshlb_node::control::StoreError> + Send,
    ) -> impl std::future::Future<Output = Outcome> + Send {
        self.rebuild(why, text, persist)
    }
}
