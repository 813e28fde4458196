//! Following an existing session: a verified, unexpired cookie or header session whose
//! endpoint is still healthy, and still enabled or draining (docs/design.md#draining: a disabled endpoint
//! keeps its sessions for `drain_duration` and takes no new ones). Anything else is ignored
//! and the request is steered afresh.

use crate::affinity::decode_cookie;
use crate::config::{AffinityKind, EndpointId, PoolId};
use crate::request::Mode;
use crate::steering::{Engine, Step, Target};

pub(super) fn bound_target(engine: &Engine<'_>, s: &mut Step<'_, '_>) -> Option<Target> {
    let affinity = &s.settings.session_affinity;
    if s.ctx.mode != Mode::Proxy {
        return None;
    }
    let now = s.ctx.now;
    let (pool, endpoint) = match affinity.kind {
        AffinityKind::None => return None,
        AffinityKind::Cookie | AffinityKind::IpCookie => {
            let raw = s.ctx.affinity_cookie?;
            let Some(claim) = decode_cookie(engine.key, &s.lb.name, raw) else {
                s.trace.note(|| {
                    "affinity cookie ignored: not signed by this cluster for this load balancer"
                        .to_string()
                });
                return None;
            };
            // The TTL the cookie was issued with (a rule's, perhaps), else the load balancer's.
            let ttl = claim.ttl.unwrap_or(affinity.ttl);
            if now >= claim.issued_at.saturating_add(u64::from(ttl)) {
                s.trace.note(|| "affinity cookie expired".to_string());
                return None;
            }
            let pool = engine.config.pool_by_name(&claim.pool)?;
            let endpoint = engine.config.pool(pool).endpoint_by_name(&claim.endpoint)?;
            (pool, endpoint)
        }
        AffinityKind::Header => {
            s.header_key?;
            let b = s.ctx.header_binding?;
            if now >= b.last_seen.saturating_add(u64::from(affinity.ttl)) {
                s.trace.note(|| "header session expired".to_string());
                return None;
            }
            (b.pool, b.endpoint)
        }
    };
    if !s.settings.uses_pool(pool) {
        s.trace
            .note(|| "affinity binding names a pool this load balancer no longer uses".to_string());
        return None;
    }
    let target = Target { pool, endpoint };
    if follows(engine, s, pool, endpoint) {
        s.trace.note(|| {
            let p = engine.config.pool(pool);
            format!(
                "session affinity ({}): bound to {}/{}",
                affinity.kind.name(),
                p.name,
                p.endpoints.get(endpoint.0).map_or("?", |e| e.name.as_str())
            )
        });
        Some(target)
    } else {
        s.trace
            .note(|| "bound endpoint is unhealthy or disabled: steering afresh".to_string());
        None
    }
}

fn follows(engine: &Engine<'_>, s: &Step<'_, '_>, pool: PoolId, endpoint: EndpointId) -> bool {
    let p = engine.config.pool(pool);
    let Some(e) = p.endpoints.get(endpoint.0) else {
        return false;
    };
    let health = s.endpoints.health;
    if !health.endpoint_healthy(p, pool, endpoint, s.ctx.pop.region) {
        // The fallback pool as the last resort ignores health (Cloudflare;
        // docs/design.md#the-fallback-pool): a session bound to
        // it is followed while no other pool of the load balancer can take the request.
        let last_resort = Some(pool) == s.settings.fallback_pool
            && !s
                .settings
                .all_pools()
                .into_iter()
                .any(|other| other != pool && s.pools.usable(other));
        if !last_resort {
            return false;
        }
    }
    if p.enabled && e.enabled && health.endpoint(pool, endpoint).disabled_at.is_none() {
        return true;
    }
    let drain = u64::from(s.settings.session_affinity.drain_duration);
    drain > 0
        && health
            .endpoint(pool, endpoint)
            .disabled_at
            .is_some_and(|t| s.ctx.now < t.saturating_add(drain))
}
