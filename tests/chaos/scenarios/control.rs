//! The control plane: one write to the primary's API reaches all 41 nodes, under load, and the
//! follower aggregator's traffic follows each write.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::build::{config, Variant};
use crate::mesh::Mesh;
use crate::report::Outcome;
use crate::streams::Stream;

const POOLS: &str = "/client/v4/accounts/chaos/load_balancers/pools";
const WWW: &str = "/client/v4/zones/chaos.test/load_balancers/www.chaos.test";

/// The TTLs of agg1's answer records for fo.chaos.test.
fn answer_ttls(m: &Mesh) -> Vec<String> {
    m.world
        .exec(
            "client",
            &[
                "dig",
                &format!("@{}", m.agg[0]),
                "fo.chaos.test",
                "A",
                "+tries=1",
                "+time=2",
                "+noall",
                "+answer",
            ],
        )
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

/// One PUT of a changed document (eu-2's weight, fo.chaos.test's TTL) to the primary's API
/// while clients stream requests through both aggregators: both aggregators and 39 probers run
/// the new generation (one config hash everywhere), no health change, no failed request, and
/// the answers carry the new TTL. The original document is written back at the end.
pub fn a_config_write_reaches_every_node_under_load_without_a_false_change_or_failed_request(
    m: &mut Mesh,
) -> Outcome {
    m.wait_all_live(Duration::from_secs(60));
    let before = m.all_changes();
    let generations = m.generations();
    let changed = config(&m.addr, Variant::Changed);
    let streams = [0, 1].map(|a| Stream::requests(m, a, Duration::from_secs(6)));
    // Write once requests flow through both aggregators.
    test_support::wait_for(
        "the client's first requests",
        Duration::from_secs(4),
        || streams.iter().all(|s| s.sent_at_least(5)),
    );
    let sent_at = Instant::now();
    let (status, etag, reply) =
        m.world
            .call("client", m.admin(0), "PUT", "/config/document", &changed);
    assert_eq!(status, 200, "the primary takes the document: {reply}");
    let mesh_generation: u64 = etag.parse().expect("generation");
    let converged = test_support::wait_until(Duration::from_secs(30), || {
        m.mesh_at(mesh_generation) && m.generations() == generations.map(|g| g + 1)
    });
    let (mut sent, mut failed) = (0, 0);
    for s in streams {
        let (a, b) = s.join();
        sent += a;
        failed += b;
    }
    let c = m.all_changes() - before;
    // The new config serves: its TTL on the answer's records.
    let ttl = answer_ttls(m);
    let new_ttl = !ttl.is_empty() && ttl.iter().all(|t| t == "6");
    let original = config(&m.addr, Variant::Original);
    let (status, _, reply) =
        m.world
            .call("client", m.admin(0), "PUT", "/config/document", &original);
    assert_eq!(status, 200, "the primary takes the original back: {reply}");
    test_support::wait_for(
        "the original document on every node",
        Duration::from_secs(30),
        || m.generations() == generations.map(|g| g + 2),
    );
    Outcome::new(
        "change the whole mesh's config (one PUT to the primary's API: both aggregators and 39 probers follow) under client load",
        "zero false changes, zero failed requests; every node on the new generation",
        format!(
            "{sent} requests, {failed} failed; {c} changes; one config everywhere {}; answer TTLs {ttl:?}",
            converged.map_or("never (30 s)".to_string(), |d| format!(
                "{:.1} s after the write",
                d.as_secs_f64()
            ))
        ),
        c == 0 && failed == 0 && sent > 0 && converged.is_some() && new_ttl,
    )
    .false_changes(c)
    .failed_requests(failed)
    .detection(converged.unwrap_or(sent_at.elapsed()))
}

/// Writes `body` to the primary's API and waits until all 41 nodes run the generation it made:
/// how long that took, or what went wrong.
fn write(m: &Mesh, method: &str, path: &str, body: serde_json::Value) -> Result<Duration, String> {
    let start = Instant::now();
    let (status, etag, reply) = m
        .world
        .call("client", m.admin(0), method, path, &body.to_string());
    etag.parse::<u64>()
        .ok()
        .filter(|_| status == 200)
        .and_then(|g| {
            test_support::wait_until(Duration::from_secs(30), || m.mesh_at(g))
                .map(|_| start.elapsed())
        })
        .ok_or_else(|| format!("{status} {reply} — not on every node in 30 s"))
}

/// Writes in order, stopping at the first that fails: (all written, a step per write, the
/// slowest write's time to reach every node).
fn writes(
    m: &Mesh,
    list: &[(&str, &str, &str, serde_json::Value)],
) -> (bool, Vec<String>, Duration) {
    let (mut steps, mut slowest) = (Vec::new(), Duration::ZERO);
    for (what, method, path, body) in list {
        match write(m, method, path, body.clone()) {
            Ok(d) => {
                slowest = slowest.max(d);
                steps.push(format!(
                    "{what}: on all 41 nodes in {:.2} s",
                    d.as_secs_f64()
                ));
            }
            Err(e) => {
                steps.push(format!("{what}: {e}"));
                return (false, steps, slowest);
            }
        }
    }
    (true, steps, slowest)
}

/// An origin of the API's pools, at its chaos address.
fn origin(m: &Mesh, name: &str, weight: f64) -> serde_json::Value {
    json!({ "name": name, "address": m.addr[name].to_string(), "port": 8001, "weight": weight })
}

/// Which origin answered each of `n` requests through agg2's proxy: origin -> count.
fn split(m: &Mesh, n: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        *counts.entry(m.proxy(1).1).or_insert(0) += 1;
    }
    counts
}

/// PATCH of eu's weights on the primary (agg1): eu-1 0.1, eu-2 1. Through agg2's proxy, eu-2
/// then takes about 91 % of 200 requests (at least 150). eu's origins are written back at the
/// end.
pub fn a_weight_written_on_the_primary_moves_the_follower_s_traffic_split(m: &mut Mesh) -> Outcome {
    m.wait_healthy(Duration::from_secs(30));
    let body = json!({ "origins": [origin(m, "eu-1", 0.1), origin(m, "eu-2", 1.0)] });
    let (ok, mut steps, slowest) = writes(
        m,
        &[(
            "eu's weights to eu-1 0.1, eu-2 1",
            "PATCH",
            &format!("{POOLS}/eu"),
            body,
        )],
    );
    let counts = split(m, 200);
    let eu2 = counts.get("eu-2").copied().unwrap_or(0);
    steps.push(format!("200 requests: {counts:?} (eu-2 expected ~91 %)"));
    let (back, back_steps) = eu_origins_back(m);
    steps.extend(back_steps);
    Outcome::new(
        "API write on the primary (agg1): eu's weights; traffic through agg2's proxy",
        "the write on all 41 nodes within a few gossip rounds and one fetch; the split shows in agg2's traffic",
        steps.join("; "),
        ok && eu2 >= 150 && back,
    )
    .detection(slowest)
}

/// POST of a new pool us1-only on the primary, and www's default pools led by it: once it is
/// probed, every request through agg2's proxy goes to us-1. www's default pools are written
/// back (eu, us, ap) and the new pool deleted at the end, whatever happened.
pub fn a_pool_written_on_the_primary_takes_the_follower_s_traffic_once_probed(
    m: &mut Mesh,
) -> Outcome {
    m.wait_healthy(Duration::from_secs(30));
    let pool =
        json!({ "name": "us1-only", "monitor": "http", "origins": [origin(m, "us-1", 1.0)] });
    let (ok, mut steps, slowest) = writes(
        m,
        &[
            ("a new pool us1-only", "POST", POOLS, pool),
            (
                "www's default pools led by us1-only",
                "PATCH",
                WWW,
                json!({ "default_pools": ["us1-only", "eu", "us", "ap"] }),
            ),
        ],
    );
    let took = test_support::wait_until(Duration::from_secs(20), || {
        split(m, 10).keys().eq(["us-1"].iter())
    });
    let counts = split(m, 100);
    let moved = took.is_some() && counts.keys().eq(["us-1"].iter());
    steps.push(format!(
        "the new pool takes the traffic once probed: {counts:?}"
    ));
    let (back, back_steps, _) = writes(
        m,
        &[
            (
                "www's default pools back",
                "PATCH",
                WWW,
                json!({ "default_pools": ["eu", "us", "ap"] }),
            ),
            (
                "the pool us1-only deleted",
                "DELETE",
                &format!("{POOLS}/us1-only"),
                json!({}),
            ),
        ],
    );
    steps.extend(back_steps);
    Outcome::new(
        "API writes on the primary (agg1): a new pool leading www's pools; traffic through agg2's proxy",
        "every write on all 41 nodes within a few gossip rounds and one fetch; the new pool takes agg2's traffic",
        steps.join("; "),
        ok && moved && back,
    )
    .detection(slowest)
}

/// PATCH of eu's origins on the primary without eu-2: every request through agg2's proxy then
/// goes to eu-1. eu's origins are written back at the end, whatever happened.
pub fn an_endpoint_deleted_on_the_primary_takes_none_of_the_follower_s_traffic(
    m: &mut Mesh,
) -> Outcome {
    m.wait_healthy(Duration::from_secs(30));
    let body = json!({ "origins": [origin(m, "eu-1", 1.0)] });
    let (ok, mut steps, slowest) = writes(
        m,
        &[(
            "eu-2 deleted from eu",
            "PATCH",
            &format!("{POOLS}/eu"),
            body,
        )],
    );
    let counts = split(m, 100);
    steps.push(format!("after the deletion: {counts:?}"));
    let (back, back_steps) = eu_origins_back(m);
    steps.extend(back_steps);
    Outcome::new(
        "API write on the primary (agg1): an endpoint deleted; traffic through agg2's proxy",
        "the write on all 41 nodes within a few gossip rounds and one fetch; the deleted endpoint takes none of agg2's traffic",
        steps.join("; "),
        ok && counts.keys().eq(["eu-1"].iter()) && back,
    )
    .detection(slowest)
}

/// eu's origins as the world starts them (both at weight 1), written back; then every endpoint
/// healthy again: (written, its steps).
fn eu_origins_back(m: &Mesh) -> (bool, Vec<String>) {
    let body = json!({ "origins": [origin(m, "eu-1", 1.0), origin(m, "eu-2", 1.0)] });
    let (ok, steps, _) = writes(
        m,
        &[("eu's origins back", "PATCH", &format!("{POOLS}/eu"), body)],
    );
    m.wait_healthy(Duration::from_secs(30));
    (ok, steps)
}
