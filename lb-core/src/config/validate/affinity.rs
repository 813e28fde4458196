//! Validation of session affinity: the kind, its TTL range, the attributes, and the rules that
//! tie them together. A rule's overrides are merged onto the load balancer's own affinity, so
//! overriding only the TTL (Cloudflare: a longer TTL for one path) keeps the kind and attributes.

use super::*;

/// Cloudflare's ranges: cookie TTL default 82800 s in 1800..=604800; header 1800 s in 30..=3600.
fn ttl_rule(kind: AffinityKind) -> (u32, std::ops::RangeInclusive<u32>) {
    match kind {
        AffinityKind::Header => (1800, 30..=3600),
        _ => (82_800, 1800..=604_800),
    }
}

/// The attribute part of [`SessionAffinity`].
struct Attributes {
    samesite: SameSite,
    secure: Secure,
    drain_duration: u32,
    zero_downtime_failover: ZeroDowntimeFailover,
    headers: Vec<String>,
    require_all_headers: bool,
}

impl Validator<'_> {
    /// `base`: the load balancer's affinity when validating a rule's overrides; the parts the
    /// override leaves unset keep the base's values.
    pub(super) fn session_affinity(
        &mut self,
        path: &str,
        kind: Option<&str>,
        ttl: Option<u32>,
        attrs: Option<&RawAffinityAttributes>,
        proxied: bool,
        base: Option<&SessionAffinity>,
    ) -> SessionAffinity {
        let kind = match kind {
            None => base.map_or(AffinityKind::None, |b| b.kind),
            // Cloudflare's API sends "" for none.
            Some("") => AffinityKind::None,
            Some(raw) => self.choice(
                format!("{path}.session_affinity"),
                "session affinity",
                raw,
                AffinityKind::None,
            ),
        };
        if !proxied && matches!(kind, AffinityKind::Cookie | AffinityKind::Header) {
            self.sink.push(
                format!("{path}.session_affinity"),
                format!("`{}` affinity needs a proxied load balancer; DNS-only load balancers support ip_cookie (a stable answer per client address)", kind.name()),
            );
        }
        let (default_ttl, range) = ttl_rule(kind);
        let ttl = match (ttl, base) {
            (Some(t), _) => {
                if kind != AffinityKind::None && !range.contains(&t) {
                    self.sink.push(
                        format!("{path}.session_affinity_ttl"),
                        format!(
                            "must be {}..={} seconds for {} affinity (got {t})",
                            range.start(),
                            range.end(),
                            kind.name()
                        ),
                    );
                }
                t
            }
            (None, Some(b)) if range.contains(&b.ttl) => b.ttl,
            _ => default_ttl,
        };
        let apath = format!("{path}.session_affinity_attributes");
        let a = match (attrs, base) {
            (Some(raw), _) => self.attributes(&apath, raw),
            (None, Some(b)) => Attributes {
                samesite: b.samesite,
                secure: b.secure,
                drain_duration: b.drain_duration,
                zero_downtime_failover: b.zero_downtime_failover,
                headers: b.headers.clone(),
                require_all_headers: b.require_all_headers,
            },
            (None, None) => Attributes {
                samesite: SameSite::Auto,
                secure: Secure::Auto,
                drain_duration: 0,
                zero_downtime_failover: ZeroDowntimeFailover::None,
                headers: Vec::new(),
                require_all_headers: false,
            },
        };
        self.check_combination(&apath, kind, &a);
        SessionAffinity {
            kind,
            ttl,
            samesite: a.samesite,
            secure: a.secure,
            drain_duration: a.drain_duration,
            zero_downtime_failover: a.zero_downtime_failover,
            headers: a.headers,
            require_all_headers: a.require_all_headers,
        }
    }

    fn attributes(&mut self, apath: &str, a: &RawAffinityAttributes) -> Attributes {
        let samesite = self.choice_ignoring_case(
            format!("{apath}.samesite"),
            "value",
            &a.samesite,
            SameSite::Auto,
        );
        let secure =
            self.choice_ignoring_case(format!("{apath}.secure"), "value", &a.secure, Secure::Auto);
        let zero_downtime_failover = self.choice(
            format!("{apath}.zero_downtime_failover"),
            "value",
            &a.zero_downtime_failover,
            ZeroDowntimeFailover::None,
        );
        if a.drain_duration > 86_400 {
            self.sink.push(
                format!("{apath}.drain_duration"),
                format!("must be 0..=86400 seconds (got {})", a.drain_duration),
            );
        }
        let mut headers = Vec::new();
        for (k, h) in a.headers.iter().enumerate() {
            // Header names are case-insensitive; cookie names are not, so keep those as written.
            let normalized = match h.strip_prefix("cookie:") {
                Some(cookie) => format!("cookie:{cookie}"),
                None => h.to_ascii_lowercase(),
            };
            let name = normalized.strip_prefix("cookie:").unwrap_or(&normalized);
            if name.is_empty() || name.contains([' ', ':', '\r', '\n', ';', '=']) {
                self.sink.push(
                    format!("{apath}.headers[{k}]"),
                    format!("`{h}` is not a header name or `cookie:<name>`"),
                );
            }
            headers.push(normalized);
        }
        Attributes {
            samesite,
            secure,
            drain_duration: a.drain_duration.min(86_400),
            zero_downtime_failover,
            headers,
            require_all_headers: a.require_all_headers,
        }
    }

    /// Settings that contradict each other or would silently do nothing.
    fn check_combination(&mut self, apath: &str, kind: AffinityKind, a: &Attributes) {
        if a.samesite == SameSite::None && a.secure == Secure::Never {
            self.sink.push(format!("{apath}.secure"), "SameSite=None cookies must be Secure (browsers drop them otherwise): use Auto or Always");
        }
        if a.zero_downtime_failover == ZeroDowntimeFailover::Sticky
            && !matches!(kind, AffinityKind::Cookie | AffinityKind::IpCookie)
        {
            self.sink.push(
                format!("{apath}.zero_downtime_failover"),
                "sticky failover rewrites the affinity cookie, which needs cookie or ip_cookie affinity: use temporary",
            );
        }
        if kind == AffinityKind::Header && !(1..=5).contains(&a.headers.len()) {
            self.sink.push(
                format!("{apath}.headers"),
                format!(
                    "header affinity needs 1 to 5 header names (got {})",
                    a.headers.len()
                ),
            );
        }
        if kind != AffinityKind::Header && !a.headers.is_empty() {
            self.sink.push(
                format!("{apath}.headers"),
                "headers only apply to header affinity",
            );
        }
        if kind == AffinityKind::None && a.drain_duration > 0 {
            self.sink.push(
                format!("{apath}.drain_duration"),
                "draining keeps existing sessions, so it needs session affinity",
            );
        }
    }
}
