//! Validated monitor groups (Cloudflare Load Balancing's monitor groups): several monitors
//! checking the same endpoints, combined into one verdict by `crate::group_verdict`.

/// Members a group may hold (`MAX_GROUP_MEMBERS`): each is one more probe per endpoint and
/// prober and one more gossip value per pool and prober.
pub const MAX_GROUP_MEMBERS: usize = 16;

/// A `[[monitor_groups]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorGroup {
    pub name: String,
    pub description: String,
    /// In the file's order, disabled ones included (shown, never probed).
    pub members: Vec<GroupMember>,
}

/// One member of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupMember {
    /// Index into `Config::monitors`.
    pub monitor: usize,
    /// A disabled member is not probed and has no say.
    pub enabled: bool,
    pub role: MemberRole,
}

crate::choice! {
    /// What a member's verdict does to its endpoint's. `monitoring_only` together with
    /// `must_be_healthy` is refused by validation, so the three cases are all there are.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MemberRole {
        /// Counts in the majority of deciding members.
        Decides => "decides",
        /// Counts in the majority, and the endpoint is unhealthy whenever it is.
        MustBeHealthy => "must_be_healthy",
        /// Probed, shown and notified on; never changes the endpoint's verdict.
        MonitoringOnly => "monitoring_only",
    }
}

impl MemberRole {
    /// Counts in the endpoint's verdict (and its RTT for steering).
    pub fn decides(self) -> bool {
        self != MemberRole::MonitoringOnly
    }
}

/// One monitor a pool's endpoints are probed with: the pool's `monitor`, or an enabled member
/// of its `monitor_group`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolCheck {
    /// Index into `Config::monitors`.
    pub monitor: usize,
    pub role: MemberRole,
}
