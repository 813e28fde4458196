//! What the fifty reloads kept for traffic: each answered with the next generation, requests
//! begun after one never reached the endpoint it removed and one it added took traffic, the
//! WebSocket and the streaming download lived through them all, traffic flowed between two
//! reloads, and no request or query failed.

use super::world::Fifty;

/// The endpoint reload `reload` (1 to 50) removed: `b` by the odd ones, `c` by the even ones.
pub fn removed_by(reload: usize) -> &'static str {
    if reload % 2 == 1 {
        "b"
    } else {
        "c"
    }
}

pub fn every_reload_answers_that_it_reloaded_with_the_next_generation(w: &mut Fifty) {
    for (i, r) in w.reloads.iter().enumerate() {
        let (status, answer) = &r.answer;
        assert_eq!(*status, 200, "reload {}: {answer}", i + 1);
        assert_eq!(answer["reloaded"], true, "reload {}: {answer}", i + 1);
        assert_eq!(answer["generation"], i + 2, "reload {}: {answer}", i + 1);
    }
}

pub fn requests_begun_after_a_reload_are_answered_and_never_by_the_endpoint_it_removed(
    w: &mut Fifty,
) {
    for (i, r) in w.reloads.iter().enumerate() {
        for by in &r.answered_by {
            let by = by
                .as_deref()
                .unwrap_or_else(|| panic!("reload {}: a request failed", i + 1));
            assert_ne!(
                by,
                removed_by(i + 1),
                "reload {}: the removed endpoint answered",
                i + 1
            );
        }
    }
}

pub fn an_endpoint_a_reload_adds_takes_traffic_once_voted(w: &mut Fifty) {
    let saw_c = w
        .reloads
        .iter()
        .flat_map(|r| &r.answered_by)
        .filter(|by| by.as_deref() == Some("c"))
        .count();
    assert!(
        saw_c > 0,
        "c never answered after the reloads that added it"
    );
}

pub fn a_websocket_stays_open_through_every_reload(w: &mut Fifty) {
    for (i, r) in w.reloads.iter().enumerate() {
        assert_eq!(r.echo, Ok(()), "the WebSocket after reload {}", i + 1);
    }
}

pub fn traffic_flows_between_two_reloads(w: &mut Fifty) {
    let stalled: Vec<usize> = (1..=50)
        .filter(|i| !w.reloads[i - 1].traffic_after)
        .collect();
    assert!(
        stalled.is_empty(),
        "no traffic for 10 s after reloads {stalled:?}"
    );
}

pub fn a_streaming_download_begun_before_the_reloads_completes(w: &mut Fifty) {
    let download = w.download.expect("the download broke off");
    assert_eq!(
        download,
        (200, 80 * 1024),
        "the streaming download completes"
    );
}

pub fn no_request_or_query_fails_while_the_aggregator_reloads(w: &mut Fifty) {
    let failures = &w.failures;
    assert!(
        failures.is_empty(),
        "{} failures: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
    assert!(w.served > 100, "traffic flowed: {}", w.served);
    assert!(w.queries > 20, "queries flowed: {}", w.queries);
}
