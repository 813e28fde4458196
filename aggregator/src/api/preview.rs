//! Monitor previews in the API (docs/api.md#previews-run-by-the-mesh): `POST
//! .../monitors/{id}/preview` tries a monitor body on every pool that uses monitor `id`, `POST
//! .../pools/{id}/preview` on pool `id`; the probers of each pool's `check_regions` run it once
//! (`crate::previews`), and `GET .../preview/{preview_id}` answers what they saw in
//! Cloudflare's shape, with each origin's regions and probers beside it. Nothing of the config
//! changes.

use std::collections::{BTreeMap, BTreeSet};

use http::StatusCode;
use lb_core::config::document::{Document, Kind};
use lb_core::Region;
use mesh::preview::{PreviewOutcome, PreviewRequest};
use serde_json::{json, Map, Value};
use toml::{Table, Value as Toml};

use super::envelope::code;
use super::write::{check, refusal};
use crate::previews::{Collected, ProberReport};
use crate::shared::Shared;
use crate::tally::{datacenter_vote, strict_majority};
use meshlb_node::control::writes::Refusal;

/// The name of the previewed monitor in a pool preview's document.
const PREVIEWED: &str = "previewed";

/// The pools a preview of `kind` `id` covers, as they are in `doc`.
fn covered<'a>(doc: &'a Document, kind: Kind, id: &str) -> Result<Vec<&'a Table>, Refusal> {
    let not_found = || {
        refusal(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!("no {} `{id}`", kind.singular()),
        )
    };
    match kind {
        Kind::Pool => Ok(vec![doc.get(Kind::Pool, id).ok_or_else(not_found)?]),
        Kind::Monitor => {
            doc.get(Kind::Monitor, id).ok_or_else(not_found)?;
            let pools: Vec<&Table> = doc
                .list(Kind::Pool)
                .into_iter()
                .filter(|t| {
                    lb_core::config::references::named(Kind::Pool, t)
                        .iter()
                        .any(|(k, n)| *k == Kind::Monitor && Kind::Monitor.same_id(n, id))
                })
                .collect();
            if pools.is_empty() {
                return Err(refusal(
                    StatusCode::BAD_REQUEST,
                    code::INVALID,
                    format!("no pool uses monitor `{id}` as its `monitor`: a monitor preview is tried on those pools"),
                ));
            }
            Ok(pools)
        }
        _ => Err(not_found()),
    }
}

/// The document a preview runs: the previewed `monitor` and the `pools` it is tried on,
/// each enabled, checked by that monitor alone, without notifications.
fn document(monitor: &Table, monitor_id: &str, pools: &[&Table]) -> Document {
    let mut doc = Document::parse("").unwrap_or_else(|_| unreachable!("an empty document parses"));
    let mut monitor = monitor.clone();
    monitor.insert("name".into(), Toml::String(monitor_id.to_string()));
    // An id that exists cannot collide in an empty document.
    let _ = doc.create(Kind::Monitor, monitor, monitor_id);
    for pool in pools {
        let mut pool = (*pool).clone();
        pool.remove("monitor_group");
        pool.remove("notification_email");
        pool.remove("notification_filter");
        pool.insert("monitor".into(), Toml::String(monitor_id.to_string()));
        pool.insert("enabled".into(), Toml::Boolean(true));
        let fresh = pool
            .get("name")
            .and_then(Toml::as_str)
            .unwrap_or("")
            .to_string();
        let _ = doc.create(Kind::Pool, pool, &fresh);
    }
    doc
}

fn pool_id(t: &Table) -> String {
    t.get("name")
        .and_then(Toml::as_str)
        .unwrap_or("")
        .to_string()
}

fn origins(t: &Table) -> Vec<&Table> {
    t.get("origins")
        .or_else(|| t.get("endpoints"))
        .and_then(Toml::as_array)
        .into_iter()
        .flatten()
        .filter_map(Toml::as_table)
        .collect()
}

/// `POST .../{monitors|pools}/{id}/preview` with `monitor` (a monitor body as a config table):
/// the preview started, in Cloudflare's shape (`preview_id`, `pools` id -> name).
pub async fn start(
    shared: &Shared,
    kind: Kind,
    id: &str,
    monitor: Table,
) -> Result<Value, Refusal> {
    let current = Document::parse(&shared.control.document.load().text).map_err(|e| {
        refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::UNAVAILABLE,
            e.to_string(),
        )
    })?;
    let pools = covered(&current, kind, id)?;
    let limits = shared.previews.limits;
    let endpoints: usize = pools.iter().map(|p| origins(p).len()).sum();
    if endpoints > limits.max_origins {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            code::TOO_LARGE,
            format!(
                "the preview would probe {endpoints} origins, more than --api-preview-max-origins ({})",
                limits.max_origins
            ),
        ));
    }
    let monitor_id = if kind == Kind::Monitor { id } else { PREVIEWED };
    let doc = document(&monitor, monitor_id, &pools);
    let text = doc.to_text();
    check(shared, &text, Some((Kind::Monitor, 0)))?;
    let needed = check_regions(shared, &text);
    let live = live_prober_regions(shared);
    if needed.is_disjoint(&live) {
        return Err(refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            format!(
                "no live prober can run this preview: none is in the pools' check regions ({}); \
                 live probers are in: {}",
                codes(&needed),
                if live.is_empty() {
                    "no region".to_string()
                } else {
                    codes(&live)
                }
            ),
        ));
    }
    let listed: Vec<(String, String)> = pools.iter().map(|p| (pool_id(p), pool_id(p))).collect();
    let request = PreviewRequest {
        expires_ms: lb_core::clock::unix_ms() + limits.ttl.as_millis() as u64,
        pools: listed.clone(),
        document: text,
    };
    let preview_id = shared.previews.start(request).await.map_err(|e| {
        refusal(
            StatusCode::TOO_MANY_REQUESTS,
            code::UNAVAILABLE,
            e.to_string(),
        )
    })?;
    let pools: Map<String, Value> = listed
        .into_iter()
        .map(|(id, name)| (id, Value::String(name)))
        .collect();
    Ok(json!({ "preview_id": preview_id, "pools": pools }))
}

/// The regions the pools of a preview document are checked from.
fn check_regions(shared: &Shared, text: &str) -> BTreeSet<Region> {
    lb_core::config::Config::parse("preview", text, &shared.setup.regions)
        .map(|c| {
            c.pools
                .iter()
                .flat_map(|p| p.check_regions.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The regions that hold a live prober now.
fn live_prober_regions(shared: &Shared) -> BTreeSet<Region> {
    shared
        .latest
        .members
        .load()
        .iter()
        .filter(|m| m.role == mesh::Role::Prober && m.alive)
        .filter_map(|m| m.region)
        .collect()
}

fn codes(regions: &BTreeSet<Region>) -> String {
    regions
        .iter()
        .map(|r| r.code())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The check regions of a preview that sent no outcome and hold no live prober now, so never
/// will (its probers died part-way, or left).
pub fn silent_regions(
    needed: &BTreeSet<Region>,
    answered: &BTreeSet<Region>,
    live: &BTreeSet<Region>,
) -> BTreeSet<Region> {
    needed
        .iter()
        .filter(|r| !answered.contains(r) && !live.contains(r))
        .copied()
        .collect()
}

/// `GET .../preview/{preview_id}`: what the probers saw so far, and (as a message of the
/// envelope) the check regions that never answered and no longer can.
pub async fn result(shared: &Shared, preview_id: &str) -> Result<(Value, Vec<String>), Refusal> {
    let collected = shared.previews.collect(preview_id).await.ok_or_else(|| {
        refusal(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!(
                "no preview `{preview_id}` in the mesh: unknown, or expired (previews last {} s)",
                shared.previews.limits.ttl.as_secs()
            ),
        )
    })?;
    let answered: BTreeSet<Region> = collected
        .reports
        .iter()
        .filter(|r| !r.outcomes.is_empty())
        .map(|r| r.region)
        .collect();
    let needed = check_regions(shared, &collected.request.document);
    let silent = silent_regions(&needed, &answered, &live_prober_regions(shared));
    let messages = if silent.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "no answer from {}: no live prober is there now, so none will come",
            codes(&silent)
        )]
    };
    Ok((shape(&collected), messages))
}

/// One prober's outcome for one origin.
struct Seen<'a> {
    report: &'a ProberReport,
    outcome: &'a PreviewOutcome,
}

/// Cloudflare's shape: pool id -> `healthy` and `origins` (a list of address -> `healthy`,
/// `rtt`, `failure_reason`, `response_code`), each origin with `regions` beside: a region's
/// verdict and its probers' outcomes. Verdicts follow the tally's majorities
/// (docs/design.md#majorities): a datacenter's probers, a region's datacenters, an origin's
/// regions; a tie is no verdict (`healthy` absent). A pool is healthy when at least its
/// `minimum_origins` are. Pools no prober has answered yet are left out.
pub fn shape(collected: &Collected) -> Value {
    let doc = Document::parse(&collected.request.document).ok();
    let mut out = Map::new();
    for (pool, _) in &collected.request.pools {
        let table = doc.as_ref().and_then(|d| d.get(Kind::Pool, pool));
        let minimum = table
            .and_then(|t| t.get("minimum_origins"))
            .and_then(Toml::as_integer)
            .unwrap_or(1);
        let names: Vec<(String, String)> = table
            .map(origins)
            .unwrap_or_default()
            .into_iter()
            .map(|o| {
                let get = |k: &str| o.get(k).and_then(Toml::as_str).unwrap_or("").to_string();
                (get("name"), get("address"))
            })
            .collect();
        let mut any = false;
        let mut healthy_origins = 0;
        let mut list = Vec::new();
        for (endpoint, address) in names {
            let seen: Vec<Seen> = collected
                .reports
                .iter()
                .flat_map(|r| {
                    r.outcomes
                        .iter()
                        .filter(|o| o.pool == *pool && o.endpoint == endpoint)
                        .map(move |outcome| Seen { report: r, outcome })
                })
                .collect();
            if seen.is_empty() {
                continue;
            }
            any = true;
            let entry = origin(&seen);
            if entry.get("healthy") == Some(&Value::Bool(true)) {
                healthy_origins += 1;
            }
            list.push(json!({ address: entry }));
        }
        if any {
            out.insert(
                pool.clone(),
                json!({ "healthy": healthy_origins >= minimum, "origins": list }),
            );
        }
    }
    Value::Object(out)
}

/// One origin: its verdict over regions, a representative RTT, code and reason, and the
/// regions' detail.
fn origin(seen: &[Seen]) -> Map<String, Value> {
    let mut by_region: BTreeMap<&str, BTreeMap<&str, Vec<&Seen>>> = BTreeMap::new();
    for s in seen {
        by_region
            .entry(s.report.region.code())
            .or_default()
            .entry(&s.report.dc)
            .or_default()
            .push(s);
    }
    let mut regions = Map::new();
    let (mut up, mut down) = (0, 0);
    for (region, dcs) in &by_region {
        let votes: Vec<Option<bool>> = dcs
            .values()
            .map(|probers| datacenter_vote(probers.iter().map(|s| s.outcome.result.healthy)))
            .collect();
        let h = votes.iter().filter(|v| **v == Some(true)).count() as u32;
        let u = votes.iter().filter(|v| **v == Some(false)).count() as u32;
        let verdict = strict_majority(h, u);
        match verdict {
            Some(true) => up += 1,
            Some(false) => down += 1,
            None => {}
        }
        let probers: Vec<Value> = dcs
            .values()
            .flatten()
            .map(|s| {
                let r = &s.outcome.result;
                json!({
                    "node": s.report.node,
                    "dc": s.report.dc,
                    "healthy": r.healthy,
                    "rtt_ms": r.rtt_ms,
                    "response_code": r.code,
                    "failure_reason": r.reason,
                })
            })
            .collect();
        let mut entry = Map::new();
        if let Some(v) = verdict {
            entry.insert("healthy".into(), Value::Bool(v));
        }
        entry.insert("probers".into(), Value::Array(probers));
        regions.insert((*region).to_string(), Value::Object(entry));
    }
    let verdict = strict_majority(up, down);
    let mut entry = Map::new();
    if let Some(v) = verdict {
        entry.insert("healthy".into(), Value::Bool(v));
    }
    // The RTT shown is the median of the healthy outcomes'; the code and reason, those of the
    // first outcome that agrees with the verdict.
    let mut rtts: Vec<f64> = seen
        .iter()
        .filter_map(|s| s.outcome.result.rtt_ms)
        .collect();
    rtts.sort_by(f64::total_cmp);
    if let Some(rtt) = rtts.get(rtts.len() / 2) {
        entry.insert(
            "rtt".into(),
            Value::String(format!("{}ms", rtt.round() as u64)),
        );
    }
    let agreeing = seen
        .iter()
        .find(|s| verdict.is_none_or(|v| s.outcome.result.healthy == v))
        .map(|s| &s.outcome.result);
    if let Some(r) = agreeing {
        if let Some(c) = r.code {
            entry.insert("response_code".into(), json!(c));
        }
        if let Some(reason) = &r.reason {
            entry.insert("failure_reason".into(), Value::String(reason.clone()));
        }
    }
    entry.insert("regions".into(), Value::Object(regions));
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::Region;
    use mesh::keys::EndpointResult;

    fn report(node: &str, region: Region, dc: &str, healthy: &[(&str, bool)]) -> ProberReport {
        ProberReport {
            node: node.into(),
            region,
            dc: dc.into(),
            outcomes: healthy
                .iter()
                .map(|(e, h)| PreviewOutcome {
                    pool: "eu".into(),
                    endpoint: (*e).into(),
                    address: format!("{e}.example"),
                    result: EndpointResult {
                        healthy: *h,
                        rtt_ms: h.then_some(12.4),
                        code: Some(if *h { 200 } else { 404 }),
                        reason: (!h).then(|| "HTTP 404".to_string()),
                    },
                })
                .collect(),
        }
    }

    fn collected(reports: Vec<ProberReport>) -> Collected {
        Collected {
            request: PreviewRequest {
                expires_ms: u64::MAX,
                pools: vec![("eu".into(), "eu".into())],
                document: "[[pools]]\nname = \"eu\"\nminimum_origins = 1\norigins = [{ name = \"a\", address = \"a.example\" }, { name = \"b\", address = \"b.example\" }]\n".into(),
            },
            reports,
        }
    }

    #[test]
    fn a_region_without_an_answer_or_a_live_prober_is_silent() {
        let set = |r: &[Region]| r.iter().copied().collect::<BTreeSet<_>>();
        let needed = set(&[Region::Weu, Region::Enam, Region::Neas]);
        // WEU answered; ENAM has not yet but a prober lives there; NEAS's died before answering.
        let silent = silent_regions(&needed, &set(&[Region::Weu]), &set(&[Region::Enam]));
        assert_eq!(silent, set(&[Region::Neas]));
        assert!(silent_regions(&needed, &needed, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn nothing_answered_is_an_empty_result() {
        assert_eq!(shape(&collected(vec![])), json!({}));
    }

    #[test]
    fn an_origin_failing_everywhere_is_unhealthy_with_its_reason_and_code() {
        let v = shape(&collected(vec![
            report("p0", Region::Weu, "ams", &[("a", true), ("b", false)]),
            report("p1", Region::Weu, "fra", &[("a", true), ("b", false)]),
        ]));
        let origins = &v["eu"]["origins"];
        assert_eq!(v["eu"]["healthy"], json!(true), "{v:#}");
        assert_eq!(origins[0]["a.example"]["healthy"], json!(true), "{v:#}");
        assert_eq!(origins[0]["a.example"]["rtt"], json!("12ms"), "{v:#}");
        let b = &origins[1]["b.example"];
        assert_eq!(b["healthy"], json!(false), "{v:#}");
        assert_eq!(b["failure_reason"], json!("HTTP 404"), "{v:#}");
        assert_eq!(b["response_code"], json!(404), "{v:#}");
        assert_eq!(
            b["regions"]["WEU"]["probers"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn a_tie_of_datacenters_is_no_verdict() {
        let v = shape(&collected(vec![
            report("p0", Region::Weu, "ams", &[("a", true)]),
            report("p1", Region::Weu, "fra", &[("a", false)]),
        ]));
        let a = &v["eu"]["origins"][0]["a.example"];
        assert_eq!(a.get("healthy"), None, "{v:#}");
        assert_eq!(v["eu"]["healthy"], json!(false), "{v:#}");
    }

    #[test]
    fn regions_count_as_one_vote_each() {
        let v = shape(&collected(vec![
            report("p0", Region::Weu, "ams", &[("a", false)]),
            report("p1", Region::Enam, "ewr", &[("a", true)]),
            report("p2", Region::Wnam, "sjc", &[("a", true)]),
        ]));
        assert_eq!(
            v["eu"]["origins"][0]["a.example"]["healthy"],
            json!(true),
            "{v:#}"
        );
        assert_eq!(
            v["eu"]["origins"][0]["a.example"]["regions"]["WEU"]["healthy"],
            json!(false)
        );
    }
}
