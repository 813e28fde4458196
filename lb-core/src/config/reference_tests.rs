//! The configuration reference (docs/configuration.md) is checked against the code: every field
//! the parser accepts must be documented there, so a new knob cannot ship undocumented.

use serde::de::{self, Deserialize, Deserializer, Visitor};

use super::raw::*;

/// Captures the field names serde's derive passes to `deserialize_struct`.
struct FieldNames(Option<&'static [&'static str]>);

#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stop")
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Stop
    }
}

impl<'de> Deserializer<'de> for &mut FieldNames {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        Err(Stop)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Stop> {
        self.0 = Some(fields);
        Err(Stop)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names = FieldNames(None);
    let _ = T::deserialize(&mut names);
    names.0.unwrap_or(&[])
}

#[test]
fn every_config_field_is_documented_in_the_reference() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    let sections: Vec<(&str, &[&str])> = vec![
        ("monitors[]", fields::<RawMonitor>()),
        ("monitors[].threshold", fields::<RawThreshold>()),
        ("monitors[].ldap", fields::<RawLdap>()),
        ("monitor_groups[]", fields::<RawMonitorGroup>()),
        ("monitor_groups[].members[]", fields::<RawGroupMember>()),
        ("pools[]", fields::<RawPool>()),
        ("pools[].origins[]", fields::<RawEndpoint>()),
        ("pools[].load_shedding", fields::<RawLoadShedding>()),
        ("pools[].origin_steering", fields::<RawOriginSteering>()),
        ("load_balancers[]", fields::<RawLoadBalancer>()),
        ("zones[]", fields::<RawZone>()),
        ("geolocation", fields::<RawGeolocation>()),
        ("geolocation.networks[]", fields::<RawGeoNetwork>()),
        (
            "pools[].notification_filter",
            fields::<RawNotificationFilter>(),
        ),
        (
            "pools[].notification_filter.origin",
            fields::<RawKindFilter>(),
        ),
        ("notifications", fields::<RawNotifications>()),
        ("tunnels[]", fields::<RawTunnel>()),
        ("virtual_networks[]", fields::<RawVirtualNetwork>()),
        ("routes[]", fields::<RawRoute>()),
        ("notifications.email[]", fields::<RawEmail>()),
        ("notifications.webhooks[]", fields::<RawWebhook>()),
        (
            "load_balancers[].random_steering",
            fields::<RawRandomSteering>(),
        ),
        (
            "load_balancers[].session_affinity_attributes",
            fields::<RawAffinityAttributes>(),
        ),
        (
            "load_balancers[].adaptive_routing",
            fields::<RawAdaptiveRouting>(),
        ),
        (
            "load_balancers[].location_strategy",
            fields::<RawLocationStrategy>(),
        ),
        ("load_balancers[].rules[]", fields::<RawRule>()),
        (
            "load_balancers[].rules[].fixed_response",
            fields::<RawFixedResponse>(),
        ),
        (
            "load_balancers[].rules[].overrides",
            fields::<RawOverrides>(),
        ),
    ];
    let mut missing = Vec::new();
    for (prefix, names) in &sections {
        assert!(!names.is_empty(), "no fields found for {prefix}");
        for name in *names {
            let key = format!("`{prefix}.{name}`");
            if !readme.contains(&key) {
                missing.push(key);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document: {}",
        missing.join(", ")
    );
}

#[test]
fn every_rule_field_is_documented_in_the_reference() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    for (name, _, _) in crate::rules::FIELDS {
        assert!(
            readme.contains(&format!("`{name}`")),
            "docs/configuration.md does not document rule field `{name}`"
        );
    }
}
