//! Losing an aggregator: the other serves on; back, it is ready before it answers.

use std::time::Duration;

use super::ip_of;
use crate::mesh::Mesh;
use crate::report::Outcome;
use crate::streams::Stream;

/// kill -9 agg1 while a client streams requests through agg2's proxy: none fails. Starts agg1
/// again and waits until it is ready.
pub fn killing_an_aggregator_fails_no_request_through_the_other(m: &mut Mesh) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let stream = Stream::requests(m, 1, Duration::from_secs(4));
    // Kill agg1 once the stream is flowing.
    test_support::wait_for(
        "the client's first requests",
        Duration::from_secs(4),
        || stream.sent_at_least(5),
    );
    m.world.node("agg1").kill();
    let (sent, failed) = stream.join();
    m.world.node("agg1").start();
    test_support::wait_for("agg1 ready again", Duration::from_secs(30), || {
        m.world.admin_get("client", m.admin(0), "/readyz").0 == 200
    });
    Outcome::new(
        "kill an aggregator (agg1) while a client streams requests through the other",
        "no lost requests",
        format!("{sent} requests, {failed} failed"),
        failed == 0 && sent > 0,
    )
    .failed_requests(failed)
}

/// agg1 killed and started again: it says ready (GET /readyz) once it has a verdict for every endpoint, and from then on
/// answers from the primary pool (eu), not the fallback its Unknown pools would give; it
/// counts all 39 probers again.
pub fn a_restarted_aggregator_is_ready_and_answers_from_the_primary_pool(m: &mut Mesh) -> Outcome {
    m.world.node("agg1").kill();
    m.world.node("agg1").start();
    let ready = test_support::wait_for("agg1 ready", Duration::from_secs(30), || {
        m.world.admin_get("client", m.admin(0), "/readyz").0 == 200
    });
    let answer = m.dig(0, "fo.chaos.test").1;
    let eu_ips = ip_of(m, &["eu-1", "eu-2"]);
    let primary = !answer.is_empty() && answer.iter().all(|a| eu_ips.contains(a));
    test_support::wait_for("agg1 back", Duration::from_secs(30), || {
        m.live_probers(0) == 39
    });
    Outcome::new(
        "restart the killed aggregator (agg1)",
        "once ready again, it answers from the primary pool",
        format!(
            "ready {:.1} s after its start, then answered {answer:?}",
            ready.as_secs_f64()
        ),
        primary,
    )
}
