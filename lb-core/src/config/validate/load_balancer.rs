//! Validation of load balancers.

use std::collections::{BTreeMap, HashSet};

use super::*;

impl Validator<'_> {
    pub(super) fn load_balancer(&mut self, i: usize, lb: &RawLoadBalancer) -> Option<LoadBalancer> {
        let path = format!("load_balancers[{i}]");
        let name = lb.name.trim_end_matches('.').to_ascii_lowercase();
        let layer4 = self.layer4(&path, lb);
        // Layer 4 is always proxied (Spectrum ignores the setting).
        let proxied = lb.proxied || layer4.is_some();
        if !is_hostname(&name) {
            self.sink.push(
                format!("{path}.name"),
                format!("`{}` is not a hostname", lb.name),
            );
        }
        if lb.default_pools.is_empty() {
            self.sink
                .push(format!("{path}.default_pools"), "needs at least one pool");
        }
        let (settings, has_geo) = self.steering_settings(&path, lb, proxied);
        self.check_settings(&path, &settings);
        let mut settings = settings;
        if layer4.is_some() {
            // A layer-4 connection whose connect is refused or times out is tried once more
            // on another endpoint (docs/layer4.md).
            settings.session_affinity.zero_downtime_failover = ZeroDowntimeFailover::Temporary;
        }
        let rules = self.rules(&path, lb, proxied, has_geo, &settings);
        let origin_tls = self.origin_tls(&path, lb, proxied);
        let origin_client_cert = self.origin_client_cert(&path, lb, origin_tls);
        Some(LoadBalancer {
            name,
            description: lb.description.clone(),
            enabled: lb.enabled,
            proxied,
            rules,
            settings,
            origin_tls,
            origin_ca_file: lb.origin_ca_file.as_ref().map(Into::into),
            origin_client_cert,
            layer4,
        })
    }

    /// How the load balancer steers: its pools and the geo maps, the policy and its weights,
    /// affinity, location and TTL; and whether it has any geo map.
    fn steering_settings(
        &mut self,
        path: &str,
        lb: &RawLoadBalancer,
        proxied: bool,
    ) -> (SteeringSettings, bool) {
        let default_pools = self.pool_list(&format!("{path}.default_pools"), &lb.default_pools);
        let fallback_pool = lb
            .fallback_pool
            .as_ref()
            .and_then(|f| self.pool_ref(&format!("{path}.fallback_pool"), f));
        let region_pools = self.region_pools(&format!("{path}.region_pools"), &lb.region_pools);
        let country_pools = self.country_pools(&format!("{path}.country_pools"), &lb.country_pools);
        let pop_pools = self.pop_pools(&format!("{path}.pop_pools"), &lb.pop_pools);
        let has_geo =
            !(region_pools.is_empty() && country_pools.is_empty() && pop_pools.is_empty());
        let steering_policy = self.steering_policy(
            &format!("{path}.steering_policy"),
            &lb.steering_policy,
            has_geo,
        );
        let random_steering = self.random_steering(
            &format!("{path}.random_steering"),
            lb.random_steering.as_ref(),
        );
        let session_affinity = self.session_affinity(
            path,
            Some(&lb.session_affinity),
            lb.session_affinity_ttl,
            lb.session_affinity_attributes.as_ref(),
            proxied,
            None,
        );
        let adaptive_routing = AdaptiveRouting {
            failover_across_pools: lb
                .adaptive_routing
                .as_ref()
                .is_some_and(|a| a.failover_across_pools),
        };
        let location_strategy = self.location_strategy(
            &format!("{path}.location_strategy"),
            lb.location_strategy.as_ref(),
        );
        let ttl = self.ttl(&format!("{path}.ttl"), lb.ttl);
        let settings = SteeringSettings {
            default_pools,
            fallback_pool,
            region_pools,
            country_pools,
            pop_pools,
            steering_policy,
            random_steering,
            session_affinity,
            adaptive_routing,
            location_strategy,
            ttl,
        };
        (settings, has_geo)
    }

    /// The enabled custom rules, each validated, by priority.
    fn rules(
        &mut self,
        path: &str,
        lb: &RawLoadBalancer,
        proxied: bool,
        has_geo: bool,
        settings: &SteeringSettings,
    ) -> Vec<Rule> {
        let mut rule_names = HashSet::new();
        let mut rules: Vec<Rule> = Vec::new();
        for (j, r) in lb.rules.iter().enumerate() {
            let rpath = format!("{path}.rules[{j}]");
            if !rule_names.insert(r.name.as_str()) {
                self.sink.push(
                    format!("{rpath}.name"),
                    format!("duplicate rule name `{}`", r.name),
                );
            }
            if let Some(rule) = self.rule(&rpath, r, proxied, has_geo, settings) {
                if !r.disabled {
                    rules.push(rule);
                }
            }
        }
        // Stable sort: equal priorities keep the order of the file.
        rules.sort_by_key(|r| r.priority);
        rules
    }

    /// `origin_tls` (Cloudflare's SSL modes as they concern origins), and what it needs.
    fn origin_tls(&mut self, path: &str, lb: &RawLoadBalancer, proxied: bool) -> OriginTls {
        let origin_tls = match lb.origin_tls.as_deref().unwrap_or("off") {
            "off" | "flexible" => OriginTls::Off,
            "full" => OriginTls::Full,
            "strict" | "full_strict" => OriginTls::Strict,
            other => {
                self.sink.push(
                    format!("{path}.origin_tls"),
                    format!("`{other}` is not one of off, flexible, full, strict"),
                );
                OriginTls::Off
            }
        };
        if origin_tls != OriginTls::Off && !proxied {
            self.sink.push(
                format!("{path}.origin_tls"),
                "only the proxy connects to origins: set `proxied = true` or leave origin_tls out",
            );
        }
        if lb.origin_ca_file.is_some() && origin_tls != OriginTls::Strict {
            self.sink.push(
                format!("{path}.origin_ca_file"),
                "trust anchors are only used with origin_tls = \"strict\"",
            );
        }
        origin_tls
    }

    /// `origin_client_cert` and `origin_client_key`: both or neither, over TLS to origins.
    fn origin_client_cert(
        &mut self,
        path: &str,
        lb: &RawLoadBalancer,
        origin_tls: OriginTls,
    ) -> Option<ClientCertFiles> {
        match (&lb.origin_client_cert, &lb.origin_client_key) {
            (None, None) => None,
            (Some(_), None) => {
                self.sink.push(
                    format!("{path}.origin_client_key"),
                    "origin_client_cert needs its key: set origin_client_key",
                );
                None
            }
            (None, Some(_)) => {
                self.sink.push(
                    format!("{path}.origin_client_cert"),
                    "origin_client_key needs its certificate: set origin_client_cert",
                );
                None
            }
            (Some(cert), Some(key)) => {
                if origin_tls == OriginTls::Off {
                    self.sink.push(
                        format!("{path}.origin_client_cert"),
                        "a client certificate is presented over TLS: set origin_tls to full or strict",
                    );
                }
                Some(ClientCertFiles {
                    cert: cert.into(),
                    key: key.into(),
                })
            }
        }
    }

    pub(super) fn ttl(&mut self, path: &str, ttl: u32) -> u32 {
        if !(1..=86_400).contains(&ttl) {
            self.sink
                .push(path, format!("must be 1..=86400 seconds (got {ttl})"));
        }
        ttl
    }

    pub(super) fn pool_ref(&mut self, path: &str, name: &str) -> Option<PoolId> {
        let found = self.pool_index.get(name).copied();
        if found.is_none() {
            self.sink.push(path, format!("no pool is named `{name}`"));
        }
        found
    }

    pub(super) fn pool_list(&mut self, path: &str, names: &[String]) -> Vec<PoolId> {
        let mut out = Vec::new();
        for (k, name) in names.iter().enumerate() {
            if let Some(id) = self.pool_ref(&format!("{path}[{k}]"), name) {
                if out.contains(&id) {
                    self.sink.push(
                        format!("{path}[{k}]"),
                        format!("pool `{name}` is listed twice"),
                    );
                } else {
                    out.push(id);
                }
            }
        }
        out
    }

    pub(super) fn region_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<Region, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match key.parse::<Region>() {
                Ok(r) => {
                    out.insert(r, list);
                }
                Err(e) => self.sink.push(format!("{path}.{key}"), e.to_string()),
            }
        }
        out
    }

    pub(super) fn country_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<CountryCode, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match key.parse::<CountryCode>() {
                Ok(cc) if self.regions.country_region(cc).is_some() => {
                    out.insert(cc, list);
                }
                Ok(cc) => self.sink.push(
                    format!("{path}.{key}"),
                    format!("`{cc}` is not a country of the regions table"),
                ),
                Err(e) => self.sink.push(format!("{path}.{key}"), e),
            }
        }
        out
    }

    pub(super) fn pop_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<String, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match self.regions.datacenter(key) {
                Some(dc) => {
                    out.insert(dc.code.clone(), list);
                }
                None => self.sink.push(
                    format!("{path}.{key}"),
                    format!("`{key}` is not a datacenter (PoP) of the regions table"),
                ),
            }
        }
        out
    }

    pub(super) fn steering_policy(
        &mut self,
        path: &str,
        raw: &str,
        has_geo: bool,
    ) -> SteeringPolicy {
        if raw.is_empty() {
            // Cloudflare: "" means geo when any geo mapping is set, else off.
            return if has_geo {
                SteeringPolicy::Geo
            } else {
                SteeringPolicy::Off
            };
        }
        self.choice(path, "steering policy", raw, SteeringPolicy::Off)
    }

    pub(super) fn random_steering(
        &mut self,
        path: &str,
        raw: Option<&RawRandomSteering>,
    ) -> RandomSteering {
        let Some(raw) = raw else {
            return RandomSteering {
                default_weight: 1.0,
                pool_weights: BTreeMap::new(),
            };
        };
        let mut check = |p: String, w: f64| {
            if !(0.0..=1.0).contains(&w) {
                self.sink
                    .push(p, format!("must be between 0 and 1 (got {w})"));
            }
        };
        check(format!("{path}.default_weight"), raw.default_weight);
        let mut pool_weights = BTreeMap::new();
        for (name, &w) in &raw.pool_weights {
            let p = format!("{path}.pool_weights.{name}");
            if !(0.0..=1.0).contains(&w) {
                self.sink
                    .push(&p, format!("must be between 0 and 1 (got {w})"));
            }
            if let Some(id) = self.pool_ref(&p, name) {
                pool_weights.insert(id, w.clamp(0.0, 1.0));
            }
        }
        RandomSteering {
            default_weight: raw.default_weight.clamp(0.0, 1.0),
            pool_weights,
        }
    }

    pub(super) fn location_strategy(
        &mut self,
        path: &str,
        raw: Option<&RawLocationStrategy>,
    ) -> LocationStrategy {
        let Some(raw) = raw else {
            return LocationStrategy::default();
        };
        let prefer_ecs = self.choice(
            format!("{path}.prefer_ecs"),
            "value",
            &raw.prefer_ecs,
            PreferEcs::Proximity,
        );
        let mode = self.choice(
            format!("{path}.mode"),
            "value",
            &raw.mode,
            LocationMode::Pop,
        );
        LocationStrategy { prefer_ecs, mode }
    }

    pub(super) fn rule(
        &mut self,
        path: &str,
        r: &RawRule,
        proxied: bool,
        lb_has_geo: bool,
        base: &SteeringSettings,
    ) -> Option<Rule> {
        if let Some(problem) = name_problem(&r.name) {
            self.sink.push(format!("{path}.name"), problem);
        }
        if o_default_pools_empty(r) {
            self.sink.push(
                format!("{path}.overrides.default_pools"),
                "needs at least one pool",
            );
        }
        let condition = match Condition::parse(&r.condition) {
            Ok(c) => Some(c),
            Err(e) => {
                self.sink.push(format!("{path}.condition"), e.to_string());
                None
            }
        };
        let o = &r.overrides;
        let has_overrides = o.default_pools.is_some()
            || o.fallback_pool.is_some()
            || o.region_pools.is_some()
            || o.country_pools.is_some()
            || o.pop_pools.is_some()
            || o.steering_policy.is_some()
            || o.random_steering.is_some()
            || o.session_affinity.is_some()
            || o.session_affinity_ttl.is_some()
            || o.session_affinity_attributes.is_some()
            || o.adaptive_routing.is_some()
            || o.location_strategy.is_some()
            || o.ttl.is_some();
        let action = match &r.fixed_response {
            Some(f) => self.fixed_response(path, f, has_overrides, proxied),
            None => self.overrides(path, o, proxied, lb_has_geo, base),
        };
        Some(Rule {
            name: r.name.clone(),
            condition: condition?,
            priority: r.priority,
            terminates: r.terminates || matches!(action, RuleAction::FixedResponse(_)),
            action,
        })
    }

    /// A rule's fixed response: for a proxied load balancer, instead of overrides.
    fn fixed_response(
        &mut self,
        path: &str,
        f: &RawFixedResponse,
        has_overrides: bool,
        proxied: bool,
    ) -> RuleAction {
        if has_overrides {
            self.sink.push(
                format!("{path}.fixed_response"),
                "a rule either answers with a fixed response or overrides settings, not both",
            );
        }
        if !proxied {
            self.sink.push(
                format!("{path}.fixed_response"),
                "fixed responses need a proxied load balancer (DNS cannot carry them)",
            );
        }
        if !(100..=599).contains(&f.status_code) {
            self.sink.push(
                format!("{path}.fixed_response.status_code"),
                format!("must be 100..=599 (got {})", f.status_code),
            );
        }
        RuleAction::FixedResponse(FixedResponse {
            status_code: f.status_code,
            message_body: f.message_body.clone(),
            content_type: f.content_type.clone(),
            location: f.location.clone(),
        })
    }

    /// A rule's overrides, checked as the settings they make of the load balancer's.
    fn overrides(
        &mut self,
        path: &str,
        o: &RawOverrides,
        proxied: bool,
        lb_has_geo: bool,
        base: &SteeringSettings,
    ) -> RuleAction {
        let opath = format!("{path}.overrides");
        let region_pools = o
            .region_pools
            .as_ref()
            .map(|m| self.region_pools(&format!("{opath}.region_pools"), m));
        let country_pools = o
            .country_pools
            .as_ref()
            .map(|m| self.country_pools(&format!("{opath}.country_pools"), m));
        let pop_pools = o
            .pop_pools
            .as_ref()
            .map(|m| self.pop_pools(&format!("{opath}.pop_pools"), m));
        let has_geo = lb_has_geo
            || region_pools.as_ref().is_some_and(|m| !m.is_empty())
            || country_pools.as_ref().is_some_and(|m| !m.is_empty())
            || pop_pools.as_ref().is_some_and(|m| !m.is_empty());
        let affinity = if o.session_affinity.is_some()
            || o.session_affinity_ttl.is_some()
            || o.session_affinity_attributes.is_some()
        {
            Some(self.session_affinity(
                &opath,
                o.session_affinity.as_deref(),
                o.session_affinity_ttl,
                o.session_affinity_attributes.as_ref(),
                proxied,
                Some(&base.session_affinity),
            ))
        } else {
            None
        };
        let overrides = Overrides {
            default_pools: o
                .default_pools
                .as_ref()
                .map(|l| self.pool_list(&format!("{opath}.default_pools"), l)),
            fallback_pool: o
                .fallback_pool
                .as_ref()
                .and_then(|f| self.pool_ref(&format!("{opath}.fallback_pool"), f)),
            region_pools,
            country_pools,
            pop_pools,
            steering_policy: o
                .steering_policy
                .as_ref()
                .map(|s| self.steering_policy(&format!("{opath}.steering_policy"), s, has_geo)),
            random_steering: o
                .random_steering
                .as_ref()
                .map(|r| self.random_steering(&format!("{opath}.random_steering"), Some(r))),
            session_affinity: affinity,
            adaptive_routing: o.adaptive_routing.as_ref().map(|a| AdaptiveRouting {
                failover_across_pools: a.failover_across_pools,
            }),
            location_strategy: o
                .location_strategy
                .as_ref()
                .map(|l| self.location_strategy(&format!("{opath}.location_strategy"), Some(l))),
            ttl: o.ttl.map(|t| self.ttl(&format!("{opath}.ttl"), t)),
        };
        let mut effective = base.clone();
        overrides.apply_to(&mut effective);
        self.check_settings(&opath, &effective);
        RuleAction::Overrides(Box::new(overrides))
    }

    /// Checks that need the whole of a load balancer's settings.
    fn check_settings(&mut self, path: &str, s: &SteeringSettings) {
        let pools = s.all_pools();
        if s.steering_policy == SteeringPolicy::Proximity {
            for p in s.default_pools.iter().chain(s.fallback_pool.iter()) {
                if !self.pool_located.get(p.0).copied().unwrap_or(true) {
                    let name = self.pool_name(*p);
                    self.sink.push(
                        format!("{path}.steering_policy"),
                        format!("proximity steering needs coordinates on every pool: pool `{name}` has no latitude/longitude"),
                    );
                }
            }
        }
        for p in s.random_steering.pool_weights.keys() {
            if !pools.contains(p) {
                let name = self.pool_name(*p);
                self.sink.push(
                    format!("{path}.random_steering.pool_weights.{name}"),
                    format!("pool `{name}` is not one of this load balancer's pools"),
                );
            }
        }
        if s.steering_policy.draws()
            && !s.default_pools.is_empty()
            && s.default_pools
                .iter()
                .all(|&p| s.random_steering.weight(p) <= 0.0)
        {
            self.sink.push(
                format!("{path}.random_steering"),
                "every default pool has weight 0, so the weighted draw can never pick one",
            );
        }
    }

    fn pool_name(&self, id: PoolId) -> String {
        self.pool_index
            .iter()
            .find(|(_, &v)| v == id)
            .map_or_else(|| format!("#{}", id.0), |(k, _)| k.clone())
    }
}

fn o_default_pools_empty(r: &RawRule) -> bool {
    r.overrides
        .default_pools
        .as_ref()
        .is_some_and(Vec::is_empty)
}
