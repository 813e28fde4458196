//! Failover as origins stop: primary -> secondary (within the bound) -> fallback, which
//! answers whatever its own health, -> nothing once a reload disables it; and back.

use std::time::Duration;

use super::world::World;
use crate::{addresses, one};
use test_support::wait_for;

fn www(w: &World) -> Vec<String> {
    addresses(&one(w.dns4, &["www.example.test", "A"]))
}

const PRIMARY: [&str; 2] = ["127.0.0.11", "127.0.0.12"];
/// The origins of the primary and secondary pools.
const POOLS: [&str; 3] = ["127.0.0.11", "127.0.0.12", "127.0.0.21"];
/// The same and the fallback pool's.
const ALL: [&str; 4] = ["127.0.0.11", "127.0.0.12", "127.0.0.21", "127.0.0.31"];

/// The primary pool's origins stop: the secondary pool answers within
/// interval x consecutive_down + 1 s = 3 s (asserted with a margin for a loaded machine); they
/// start again: the primary pool answers again.
pub fn a_dead_primary_pool_fails_over_to_the_secondary_within_the_bound_and_back(w: &mut World) {
    w.establish(&[]);
    w.set_down(&PRIMARY);
    let took = wait_for(
        "failover to the secondary pool",
        Duration::from_secs(15),
        || www(w) == ["127.0.0.21"],
    );
    eprintln!("DNS failover after {took:?}");
    assert!(took < Duration::from_secs(8), "failover took {took:?}");
    w.set_down(&[]);
    wait_for("the primary pool again", Duration::from_secs(15), || {
        www(w) == PRIMARY
    });
}

/// With the primary and secondary pools down, the fallback pool answers.
pub fn with_every_pool_down_the_fallback_pool_answers(w: &mut World) {
    w.establish(&POOLS);
    wait_for("the fallback pool", Duration::from_secs(15), || {
        www(w) == ["127.0.0.31"]
    });
}

/// The fallback keeps answering once its own origin is down and voted unhealthy: the fallback
/// pool's state is not considered when routing (Cloudflare's fallback pool; docs/design.md).
pub fn the_fallback_pool_answers_whatever_its_health(w: &mut World) {
    w.establish(&ALL);
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
    w.establish(&ALL);
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
