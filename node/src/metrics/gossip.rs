//! The gossip transport's counters, copied into the recorder once a second by every node.

use std::sync::atomic::Ordering;

use mesh::TransportStats;

/// Copies the transport's counters (and vendored chitchat's malformed-delta count) into the
/// recorder.
pub fn record_gossip(stats: &TransportStats) {
    metrics::counter!("meshlb_gossip_sent_bytes_total")
        .absolute(stats.bytes_sent.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_received_bytes_total")
        .absolute(stats.bytes_received.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_sent_datagrams_total")
        .absolute(stats.datagrams_sent.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_received_datagrams_total")
        .absolute(stats.datagrams_received.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_rejected_packets_total")
        .absolute(stats.rejected.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_fragmented_messages_total")
        .absolute(stats.fragmented.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_replayed_datagrams_total")
        .absolute(stats.replayed.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_misaddressed_datagrams_total")
        .absolute(stats.misaddressed.load(Ordering::Relaxed));
    metrics::counter!("meshlb_gossip_malformed_deltas_total")
        .absolute(chitchat::MALFORMED_DELTAS.load(Ordering::Relaxed));
}
