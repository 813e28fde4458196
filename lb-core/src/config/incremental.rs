//! Parsing successive generations of one config: a node that follows the mesh's config parses
//! every generation, and a generation mostly repeats the one before (an API write changes one
//! resource). [`IncrementalParser`] keeps each resource's parse, keyed by its exact text
//! (`sections.rs`), and parses only the sections it has not seen; validation then runs over the
//! whole as [`Config::parse`] runs it. On 10,000 endpoints that is a few milliseconds instead
//! of tens (`cargo bench -p lb-core --bench config_parse`), and on a 41-node mesh of two cores
//! the difference between a config reaching every node in under a second or in two
//! (docs/performance.md#config-propagation).
//!
//! The result is [`Config::parse`]'s, errors included: any section that does not parse cleanly
//! alone (a syntax or type error, an unknown field) sends the whole text through
//! [`Config::parse`], whose messages name lines and field paths in the whole file.

use std::collections::HashMap;
use std::sync::Mutex;

use xxhash_rust::xxh3::Xxh3Builder;

use super::raw::{RawConfig, RawLoadBalancer, RawMonitor, RawMonitorGroup, RawPool, RawZone};
use super::sections::{self, Section};
use super::{validate, Config};
use crate::error::{parse_toml_strict, ConfigErrors, ErrorSink};
use crate::RegionsTable;

/// One resource as written.
#[derive(Debug, Clone)]
enum Resource {
    Monitor(RawMonitor),
    MonitorGroup(RawMonitorGroup),
    Pool(RawPool),
    LoadBalancer(RawLoadBalancer),
    Zone(RawZone),
}

impl Resource {
    /// The one resource a section's text holds, if it parses cleanly alone.
    fn parse(file: &str, key: &str, text: &str) -> Option<Resource> {
        let (mut raw, sink): (RawConfig, ErrorSink) = parse_toml_strict(file, text).ok()?;
        if sink.len() > 0 {
            return None;
        }
        let one = |n: usize| n == 1;
        match key {
            "monitors" if one(raw.monitors.len()) => raw.monitors.pop().map(Resource::Monitor),
            "monitor_groups" if one(raw.monitor_groups.len()) => {
                raw.monitor_groups.pop().map(Resource::MonitorGroup)
            }
            "pools" if one(raw.pools.len()) => raw.pools.pop().map(Resource::Pool),
            "load_balancers" if one(raw.load_balancers.len()) => {
                raw.load_balancers.pop().map(Resource::LoadBalancer)
            }
            "zones" if one(raw.zones.len()) => raw.zones.pop().map(Resource::Zone),
            _ => None,
        }
    }

    fn add_to(self, raw: &mut RawConfig) {
        match self {
            Resource::Monitor(r) => raw.monitors.push(r),
            Resource::MonitorGroup(r) => raw.monitor_groups.push(r),
            Resource::Pool(r) => raw.pools.push(r),
            Resource::LoadBalancer(r) => raw.load_balancers.push(r),
            Resource::Zone(r) => raw.zones.push(r),
        }
    }
}

/// Resources by their section's text. XXH3 hashes the 690 KB of a 10,000-endpoint document
/// in a tenth of SipHash's time; its seed is random, so that a writer cannot aim collisions.
type Resources = HashMap<String, Resource, Xxh3Builder>;

/// Parses one config's generations, reusing what did not change. At most one generation's
/// resources are kept.
pub struct IncrementalParser {
    kept: Mutex<Kept>,
    hasher: Xxh3Builder,
}

struct Kept {
    resources: Resources,
    last: Reuse,
}

/// How the last parse went: resources parsed from their text, and taken from the generation
/// before. Both 0 when the text was parsed whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reuse {
    pub parsed: usize,
    pub reused: usize,
}

impl Default for IncrementalParser {
    fn default() -> Self {
        let hasher = Xxh3Builder::new().with_seed(rand::random());
        IncrementalParser {
            kept: Mutex::new(Kept {
                resources: HashMap::with_hasher(hasher),
                last: Reuse::default(),
            }),
            hasher,
        }
    }
}

impl std::fmt::Debug for IncrementalParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map_or(0, |k| k.resources.len());
        f.debug_struct("IncrementalParser")
            .field("resources_kept", &kept)
            .finish()
    }
}

impl IncrementalParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// What [`Config::parse`] gives for `text`.
    pub fn parse(
        &self,
        file: &str,
        text: &str,
        regions: &RegionsTable,
    ) -> Result<Config, ConfigErrors> {
        let mut kept = match self.kept.lock() {
            Ok(kept) => kept,
            // A panic while parsing left the map as it was: it only ever holds parses.
            Err(poisoned) => poisoned.into_inner(),
        };
        // Taken out: what the text no longer holds is dropped with it.
        let before = std::mem::replace(&mut kept.resources, HashMap::with_hasher(self.hasher));
        match assemble(file, text, before) {
            Some((raw, seen, parsed)) => {
                kept.last = Reuse {
                    parsed,
                    reused: seen.len() - parsed,
                };
                kept.resources = seen;
                validate::validate(ErrorSink::new(file), raw, regions)
            }
            None => {
                kept.last = Reuse::default();
                Config::parse_whole(file, text, regions)
            }
        }
    }

    /// How the last parse went.
    pub fn last_reuse(&self) -> Reuse {
        self.kept.lock().map_or(Reuse::default(), |k| k.last)
    }
}

/// The raw config of `text` from its sections, parsing those `before` does not hold; the
/// resources it holds by text, and how many were parsed.
fn assemble(
    file: &str,
    text: &str,
    mut before: Resources,
) -> Option<(RawConfig, Resources, usize)> {
    let cut = sections::split(text)?;
    let rest: String = cut
        .iter()
        .filter_map(|s| match s {
            Section::Rest(t) => Some(*t),
            Section::Resource { .. } => None,
        })
        .collect();
    let (mut raw, sink): (RawConfig, ErrorSink) = parse_toml_strict(file, &rest).ok()?;
    let inline = raw.monitors.len()
        + raw.monitor_groups.len()
        + raw.pools.len()
        + raw.load_balancers.len()
        + raw.zones.len();
    if sink.len() > 0 || inline > 0 {
        return None;
    }
    let mut seen = Resources::with_capacity_and_hasher(before.len(), *before.hasher());
    let mut parsed = 0;
    for section in cut {
        let Section::Resource { key, text } = section else {
            continue;
        };
        if let Some(twin) = seen.get(text) {
            twin.clone().add_to(&mut raw);
            continue;
        }
        let resource = match before.remove(text) {
            Some(r) => r,
            None => {
                parsed += 1;
                Resource::parse(file, key, text)?
            }
        };
        resource.clone().add_to(&mut raw);
        seen.insert(text.to_string(), resource);
    }
    Some((raw, seen, parsed))
}

/// Panics unless the section-wise parse of `text`, cold and then with its own resources kept,
/// gives what the whole parse gave (`whole`), or leaves the text to the whole parse.
#[cfg(test)]
pub(super) fn assert_same_as_whole(
    file: &str,
    text: &str,
    regions: &RegionsTable,
    whole: &Result<Config, ConfigErrors>,
) {
    let Some((raw, seen, _)) = assemble(file, text, Resources::default()) else {
        return;
    };
    let cold = validate::validate(ErrorSink::new(file), raw, regions);
    let (raw, _, _) = assemble(file, text, seen).expect("the same text cuts the same way");
    let warm = validate::validate(ErrorSink::new(file), raw, regions);
    let expected = outcome(whole);
    assert_eq!(outcome(&cold), expected, "cold, on {text}");
    assert_eq!(outcome(&warm), expected, "warm, on {text}");
}

/// A parse's result without the name indexes (hash maps, whose order differs between runs).
#[cfg(test)]
fn outcome(result: &Result<Config, ConfigErrors>) -> String {
    match result {
        Ok(c) => format!(
            "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
            c.monitors,
            c.monitor_groups,
            c.pools,
            c.load_balancers,
            c.zones,
            c.geolocation,
            c.notifications,
            c.private,
            c.fallback_only
        ),
        Err(e) => format!("{e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions() -> RegionsTable {
        RegionsTable::embedded().expect("regions")
    }

    /// Three pools of two endpoints, the first endpoint of `pool-1` at `weight`, and `extra`
    /// in it.
    fn generation(weight: &str, extra: &str) -> String {
        let mut text = String::from("[[monitors]]\nname = \"m\"\n");
        for p in 0..3 {
            text.push_str(&format!(
                "[[pools]]\nname = \"pool-{p}\"\nmonitor = \"m\"\n"
            ));
            for e in 0..2 {
                let w = if (p, e) == (1, 0) { weight } else { "1.0" };
                let more = if (p, e) == (1, 0) { extra } else { "" };
                text.push_str(&format!(
                    "[[pools.origins]]\nname = \"e{e}\"\naddress = \"127.0.{p}.{e}\"\nweight = {w}\n{more}"
                ));
            }
        }
        text.push_str("[[load_balancers]]\nname = \"lb.test\"\ndefault_pools = [\"pool-0\"]\n");
        text
    }

    #[test]
    fn a_generation_with_one_pool_changed_reparses_that_pool_alone() {
        let parser = IncrementalParser::new();
        let first = parser.parse("t.toml", &generation("1.0", ""), &regions());
        assert!(first.is_ok());
        assert_eq!(
            parser.last_reuse(),
            Reuse {
                parsed: 5,
                reused: 0
            }
        );
        let text = generation("0.5", "");
        let next = parser.parse("t.toml", &text, &regions());
        assert_eq!(
            parser.last_reuse(),
            Reuse {
                parsed: 1,
                reused: 4
            }
        );
        assert_eq!(
            outcome(&next),
            outcome(&Config::parse("t.toml", &text, &regions()))
        );
        let weight = next.expect("valid").pools[1].endpoints[0].weight;
        assert_eq!(weight, 0.5);
    }

    #[test]
    fn a_changed_pool_with_an_unknown_field_gets_the_whole_files_errors() {
        let parser = IncrementalParser::new();
        assert!(parser
            .parse("t.toml", &generation("1.0", ""), &regions())
            .is_ok());
        let text = generation("1.0", "wieght = 2\n");
        let errors = parser
            .parse("t.toml", &text, &regions())
            .expect_err("an unknown field");
        assert_eq!(errors.0.len(), 1);
        assert_eq!(errors.0[0].path, "pools[1].origins[0].wieght");
        assert_eq!(
            format!("{errors:?}"),
            format!(
                "{:?}",
                Config::parse("t.toml", &text, &regions()).expect_err("too")
            )
        );
    }

    #[test]
    fn a_text_the_cut_does_not_model_is_parsed_whole_with_the_same_result() {
        let parser = IncrementalParser::new();
        let text = generation("1.0", "").replace(
            "[[monitors]]\nname = \"m\"\n",
            "[[monitors]]\nname = \"m\"\ndescription = \"\"\"\nmany\nlines\"\"\"\n",
        );
        let parsed = parser.parse("t.toml", &text, &regions());
        assert!(parsed.is_ok());
        assert_eq!(parser.last_reuse(), Reuse::default());
        assert_eq!(
            outcome(&parsed),
            outcome(&Config::parse("t.toml", &text, &regions()))
        );
    }
}
