//! Failover as origins stop: primary -> secondary (within the bound) -> fallback, which
//! answers whatever its own health, -> nothing once a reload disables it; and back.

use std::time::Duration;

use super::world::World;
use crate::harness::Stopped;
use crate::{addresses, one};
use test_support::wait_for;

fn www(w: &World) -> Vec<String> {
    addresses(&one(w.dns4, &["www.example.test", "A"]))
}

/// The origins of the primary and, with `secondary`, the secondary pool, stopped until the
/// guard drops.
fn stop_pools<'w>(w: &'w World, secondary: bool) -> Stopped<'w> {
    let mut ips = vec!["127.0.0.11", "127.0.0.12"];
    if secondary {
        ips.push("127.0.0.21");
    }
    Stopped::new(ips.into_iter().map(|ip| &w.origins[ip]))
}

/// The primary pool's origins stop: the secondary pool answers within
/// interval x consecutive_down + 1 s = 3 s (asserted with a margin for a loaded machine); they
/// start again: the primary pool answers again.
pub fn a_dead_primary_pool_fails_over_to_the_secondary_within_the_bound_and_back(w: &mut World) {
    w.wait_all_healthy();
    let stopped = stop_pools(w, false);
    let took = wait_for(
        "failover to the secondary pool",
        Duration::from_secs(15),
        || www(w) == ["127.0.0.21"],
    );
    eprintln!("DNS failover after {took:?}");
    assert!(took < Duration::from_secs(8), "failover took {took:?}");
    drop(stopped);
    wait_for("the primary pool again", Duration::from_secs(15), || {
        www(w) == ["127.0.0.11", "127.0.0.12"]
    });
}

/// With the primary and secondary pools down, the fallback pool answers.
pub fn with_every_pool_down_the_fallback_pool_answers(w: &mut World) {
    w.wait_all_healthy();
    let _stopped = stop_pools(w, true);
    wait_for("the fallback pool", Duration::from_secs(15), || {
        www(w) == ["127.0.0.31"]
    });
}

/// The fallback keeps answering once its own origin is down and voted unhealthy: the fallback
/// pool's state is not considered when routing (Cloudflare's fallback pool; docs/design.md).
pub fn the_fallback_pool_answers_whatever_its_health(w: &mut World) {
    w.wait_all_healthy();
    let _stopped = stop_pools(w, true);
    let _fallback = Stopped::new([&w.origins["127.0.0.31"]]);
    wait_for(
        "every pool's origins voted down, the fallback's too",
        Duration::from_secs(15),
        || {
            ["primary", "secondary", "last"]
                .iter()
                .all(|p| w.pool_voted(p, "unhealthy"))
        },
    );
    assert_eq!(
        www(w),
        ["127.0.0.31"],
        "the fallback answers whatever its health"
    );
}

/// Writes the config back and reloads when dropped.
struct Restore<'w>(&'w World);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        std::fs::write(&self.0.config, &self.0.text).expect("config");
        self.0.reload();
    }
}

/// With every pool down and the fallback disabled by a reload, nothing is left: NODATA with
/// the SOA (docs/design.md#when-nothing-is-left). A reload enabling it again brings the
/// fallback back.
pub fn with_the_fallback_disabled_nothing_left_is_nodata_with_the_soa(w: &mut World) {
    w.wait_all_healthy();
    let _stopped = stop_pools(w, true);
    let _fallback = Stopped::new([&w.origins["127.0.0.31"]]);
    wait_for("the fallback pool", Duration::from_secs(15), || {
        www(w) == ["127.0.0.31"]
    });
    let restore = Restore(w);
    std::fs::write(&w.config, &w.fallback_disabled).expect("config");
    w.reload();
    wait_for("NODATA", Duration::from_secs(15), || {
        let d = one(w.dns4, &["www.example.test", "A"]);
        d.status == "NOERROR"
            && d.answers.is_empty()
            && d.authority.first().is_some_and(|a| a.0 == "SOA")
    });
    drop(restore);
    wait_for("the fallback again", Duration::from_secs(15), || {
        www(w) == ["127.0.0.31"]
    });
}
