//! Validation of monitor groups.

use std::collections::HashSet;

use super::*;

impl Validator<'_> {
    /// Every group, as far as it is valid; a pool naming an invalid one gets no second error.
    pub(super) fn monitor_groups(&mut self, raw: &[RawMonitorGroup]) -> Vec<MonitorGroup> {
        let mut out = Vec::new();
        for (i, g) in raw.iter().enumerate() {
            let path = format!("monitor_groups[{i}]");
            if let Some(problem) = name_problem(&g.name) {
                self.sink.push(format!("{path}.name"), problem);
            } else if out.iter().any(|o: &MonitorGroup| o.name == g.name) {
                self.sink.push(
                    format!("{path}.name"),
                    format!("duplicate monitor group name `{}`", g.name),
                );
            }
            if g.members.is_empty() {
                self.sink.push(
                    format!("{path}.members"),
                    "a group needs at least one member",
                );
            } else if g.members.len() > MAX_GROUP_MEMBERS {
                self.sink.push(
                    format!("{path}.members"),
                    format!(
                        "at most {MAX_GROUP_MEMBERS} members (got {})",
                        g.members.len()
                    ),
                );
            }
            let mut seen = HashSet::new();
            let mut members = Vec::new();
            for (j, m) in g.members.iter().enumerate() {
                let mpath = format!("{path}.members[{j}]");
                let Some(&monitor) = self.monitor_index.get(&m.monitor) else {
                    self.sink.push(
                        format!("{mpath}.monitor"),
                        format!("no monitor is named `{}`", m.monitor),
                    );
                    continue;
                };
                if !seen.insert(monitor) {
                    self.sink.push(
                        format!("{mpath}.monitor"),
                        format!("monitor `{}` is already a member of this group", m.monitor),
                    );
                }
                let role = match (m.monitoring_only, m.must_be_healthy) {
                    (true, true) => {
                        self.sink.push(
                            format!("{mpath}.must_be_healthy"),
                            "a monitoring_only member never decides, so it cannot be must_be_healthy",
                        );
                        MemberRole::MonitoringOnly
                    }
                    (true, false) => MemberRole::MonitoringOnly,
                    (false, true) => MemberRole::MustBeHealthy,
                    (false, false) => MemberRole::Decides,
                };
                members.push(GroupMember {
                    monitor,
                    enabled: m.enabled,
                    role,
                });
            }
            if !g.members.is_empty() && !g.members.iter().any(|m| m.enabled && !m.monitoring_only) {
                self.sink.push(
                    format!("{path}.members"),
                    "no enabled member decides (each is disabled or monitoring_only), so no endpoint could ever get a verdict",
                );
            }
            let group = MonitorGroup {
                name: g.name.clone(),
                description: g.description.clone(),
                members,
            };
            let checks = group
                .members
                .iter()
                .filter(|m| m.enabled)
                .map(|m| PoolCheck {
                    monitor: m.monitor,
                    role: m.role,
                })
                .collect();
            self.groups
                .entry(g.name.clone())
                .or_insert((out.len(), checks));
            out.push(group);
        }
        out
    }
}
