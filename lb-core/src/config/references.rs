//! Which resources of a config document name which (Cloudflare's `references` of monitors and
//! pools): a pool names its monitor or monitor group, a monitor group its members' monitors, a
//! load balancer its pools — default, fallback, per region, country and PoP, and in its rules'
//! overrides. A resource's *referrers* name it; its *referrals* are what it names.

use toml::{Table, Value};

use super::document::{Document, Kind};

/// Which way a reference points, seen from the resource asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The other resource names this one.
    Referrer,
    /// This resource names the other one.
    Referral,
}

impl Direction {
    /// Cloudflare's `reference_type`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Referrer => "referrer",
            Direction::Referral => "referral",
        }
    }
}

/// One reference of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub direction: Direction,
    pub kind: Kind,
    /// The other resource's id (its name).
    pub id: String,
}

/// The load balancer fields that name pools (also inside a rule's `overrides`).
const POOL_FIELDS: [&str; 5] = [
    "default_pools",
    "fallback_pool",
    "region_pools",
    "country_pools",
    "pop_pools",
];

/// Every string in `v`: itself, a list's, or a table's lists' (`region_pools`).
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Table(t) => t.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

fn pools_of(t: &Table, out: &mut Vec<String>) {
    for field in POOL_FIELDS {
        if let Some(v) = t.get(field) {
            strings(v, out);
        }
    }
}

/// What a resource of `kind` (its table `t`) names, in the file's order.
pub fn named(kind: Kind, t: &Table) -> Vec<(Kind, String)> {
    let mut out = Vec::new();
    match kind {
        Kind::Monitor => {}
        Kind::Pool => {
            for (field, k) in [
                ("monitor", Kind::Monitor),
                ("monitor_group", Kind::MonitorGroup),
            ] {
                if let Some(name) = t.get(field).and_then(Value::as_str) {
                    out.push((k, name.to_string()));
                }
            }
        }
        Kind::MonitorGroup => {
            let members = t.get("members").and_then(Value::as_array);
            for m in members.into_iter().flatten().filter_map(Value::as_table) {
                // `monitor_id` is Cloudflare's name of the field (`raw::RawGroupMember`).
                let monitor = m.get("monitor").or_else(|| m.get("monitor_id"));
                if let Some(name) = monitor.and_then(Value::as_str) {
                    out.push((Kind::Monitor, name.to_string()));
                }
            }
        }
        Kind::LoadBalancer => {
            let mut pools = Vec::new();
            pools_of(t, &mut pools);
            let rules = t.get("rules").and_then(Value::as_array);
            for rule in rules.into_iter().flatten().filter_map(Value::as_table) {
                if let Some(overrides) = rule.get("overrides").and_then(Value::as_table) {
                    pools_of(overrides, &mut pools);
                }
            }
            out.extend(pools.into_iter().map(|p| (Kind::Pool, p)));
        }
    }
    let mut seen = Vec::new();
    out.retain(|r| {
        let new = !seen.contains(r);
        seen.push(r.clone());
        new
    });
    out
}

/// The references of resource `id` of `kind`: the resources that name it, then what it
/// names; none for a resource the document lacks.
pub fn references(doc: &Document, kind: Kind, id: &str) -> Vec<Reference> {
    let Some(me) = doc.get(kind, id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for other in Kind::ALL {
        for t in doc.list(other) {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            if named(other, t)
                .iter()
                .any(|(k, n)| *k == kind && kind.same_id(n, id))
            {
                out.push(Reference {
                    direction: Direction::Referrer,
                    kind: other,
                    id: name.to_string(),
                });
            }
        }
    }
    out.extend(named(kind, me).into_iter().map(|(k, n)| Reference {
        direction: Direction::Referral,
        kind: k,
        id: n,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[monitors]]
name = "http"
[[monitors]]
name = "tcp"
[[monitor_groups]]
name = "g"
members = [{ monitor = "http" }, { monitor_id = "tcp" }]
[[pools]]
name = "eu"
monitor = "http"
[[pools]]
name = "us"
monitor_group = "g"
[[pools]]
name = "spare"
[[load_balancers]]
name = "www.example.test"
default_pools = ["eu"]
fallback_pool = "spare"
region_pools = { ENAM = ["us"] }
[[load_balancers]]
name = "api.example.test"
default_pools = ["us"]
rules = [{ name = "r", condition = "true", overrides = { default_pools = ["eu"] } }]
"#;

    fn refs(kind: Kind, id: &str) -> Vec<(Direction, Kind, String)> {
        let doc = Document::parse(FILE).expect("parses");
        references(&doc, kind, id)
            .into_iter()
            .map(|r| (r.direction, r.kind, r.id))
            .collect()
    }

    #[test]
    fn a_monitor_is_referred_to_by_its_pools_and_groups() {
        assert_eq!(
            refs(Kind::Monitor, "http"),
            vec![
                (Direction::Referrer, Kind::MonitorGroup, "g".into()),
                (Direction::Referrer, Kind::Pool, "eu".into()),
            ]
        );
    }

    #[test]
    fn a_group_member_named_by_cloudflares_monitor_id_is_a_reference() {
        assert_eq!(
            refs(Kind::Monitor, "tcp"),
            vec![(Direction::Referrer, Kind::MonitorGroup, "g".into())]
        );
    }

    #[test]
    fn a_pool_is_referred_to_by_every_field_and_rule_of_its_load_balancers() {
        assert_eq!(
            refs(Kind::Pool, "eu"),
            vec![
                (
                    Direction::Referrer,
                    Kind::LoadBalancer,
                    "www.example.test".into()
                ),
                (
                    Direction::Referrer,
                    Kind::LoadBalancer,
                    "api.example.test".into()
                ),
                (Direction::Referral, Kind::Monitor, "http".into()),
            ]
        );
        assert_eq!(
            refs(Kind::Pool, "us"),
            vec![
                (
                    Direction::Referrer,
                    Kind::LoadBalancer,
                    "www.example.test".into()
                ),
                (
                    Direction::Referrer,
                    Kind::LoadBalancer,
                    "api.example.test".into()
                ),
                (Direction::Referral, Kind::MonitorGroup, "g".into()),
            ]
        );
    }

    #[test]
    fn an_unused_resource_and_a_missing_one_have_none() {
        assert_eq!(
            refs(Kind::Pool, "spare"),
            vec![(
                Direction::Referrer,
                Kind::LoadBalancer,
                "www.example.test".into()
            )]
        );
        assert!(refs(Kind::Monitor, "nowhere").is_empty());
    }
}
