//! Monitor groups: the enabled members a group gives its pool, in order and with their roles;
//! one deciding check for a pool with one monitor; and every group error at once.

use super::*;

const GROUP_MONITORS: &str = r#"
[[monitors]]
name = "http"
path = "/health"
[[monitors]]
name = "tcp"
type = "tcp"
[[monitors]]
name = "deep"
path = "/deep"
"#;

#[test]
fn a_monitor_group_gives_its_pool_the_enabled_members_in_order() {
    let text = format!(
        r#"{GROUP_MONITORS}
[[monitor_groups]]
name = "web"
description = "front and back"
members = [
  {{ monitor = "http", must_be_healthy = true }},
  {{ monitor_id = "tcp" }},
  {{ monitor = "deep", monitoring_only = true }},
  {{ monitor = "deep-off", enabled = false }},
]
[[monitors]]
name = "deep-off"
[[pools]]
name = "p"
monitor_group = "web"
origins = [{{ name = "a", address = "192.0.2.1" }}]
"#
    );
    let c = parse(&text).expect("valid");
    let p = &c.pools[0];
    assert!(p.is_monitored());
    assert_eq!(p.monitor_group, Some(0));
    let checks: Vec<(&str, MemberRole)> = p
        .checks
        .iter()
        .map(|ch| (c.check_monitor(ch).name.as_str(), ch.role))
        .collect();
    assert_eq!(
        checks,
        [
            ("http", MemberRole::MustBeHealthy),
            ("tcp", MemberRole::Decides),
            ("deep", MemberRole::MonitoringOnly),
        ],
        "the disabled member is not probed"
    );
    assert_eq!(c.monitor_groups[0].members.len(), 4);
    assert_eq!(c.check_label(p, &p.checks[1]), Some("tcp"));
}

#[test]
fn a_pool_with_one_monitor_has_one_deciding_check_without_a_label() {
    let text = format!(
        "{GROUP_MONITORS}\n[[pools]]\nname = \"p\"\nmonitor = \"tcp\"\norigins = [{{ name = \"a\", address = \"192.0.2.1\" }}]\n"
    );
    let c = parse(&text).expect("valid");
    let p = &c.pools[0];
    assert_eq!(p.checks.len(), 1);
    assert_eq!(p.checks[0].role, MemberRole::Decides);
    assert_eq!(c.check_label(p, &p.checks[0]), None);
}

#[test]
fn monitor_group_errors_all_at_once() {
    let members: Vec<String> = (0..17)
        .map(|_| "{ monitor = \"tcp\" }".to_string())
        .collect();
    let text = format!(
        r#"{GROUP_MONITORS}
[[monitor_groups]]
name = "bad"
members = [
  {{ monitor = "nope" }},
  {{ monitor = "http", monitoring_only = true, must_be_healthy = true }},
  {{ monitor = "http" }},
  {{ monitor = "tcp", weight = 2 }},
]
[[monitor_groups]]
name = "silent"
members = [{{ monitor = "http", monitoring_only = true }}, {{ monitor = "tcp", enabled = false }}]
[[monitor_groups]]
name = "empty"
[[monitor_groups]]
name = "big"
members = [{}]
[[monitor_groups]]
name = "silent"
members = [{{ monitor = "http" }}]
[[pools]]
name = "both"
monitor = "http"
monitor_group = "silent"
origins = [{{ name = "a", address = "192.0.2.1" }}]
[[pools]]
name = "ghost"
monitor_group = "ghost"
origins = [{{ name = "a", address = "192.0.2.1" }}]
[[pools]]
name = "uses-bad"
monitor_group = "bad"
origins = [{{ name = "a", address = "192.0.2.1" }}]
"#,
        members.join(", ")
    );
    let e = errors(&text);
    for needle in [
        "monitor_groups[0].members[0].monitor: no monitor is named `nope`",
        "monitor_groups[0].members[1].must_be_healthy: a monitoring_only member never decides",
        "monitor_groups[0].members[2].monitor: monitor `http` is already a member of this group",
        "monitor_groups[0].members[3].weight: unknown field",
        "monitor_groups[1].members: no enabled member decides",
        "monitor_groups[2].members: a group needs at least one member",
        "monitor_groups[3].members: at most 16 members (got 17)",
        "monitor_groups[4].name: duplicate monitor group name `silent`",
        "pools[0].monitor_group: a pool takes `monitor` or `monitor_group`, not both",
        "pools[1].monitor_group: no monitor group is named `ghost`",
    ] {
        has(&e, needle);
    }
    assert!(
        !e.iter().any(|l| l.contains("pools[2]")),
        "a pool naming an invalid group gets no second error: {e:#?}"
    );
}
