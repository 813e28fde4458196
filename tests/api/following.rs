//! Nodes following the primary: a write reaches every node at its generation and a follower
//! serves it; a write on a follower is refused 421; a paused prober catches up; a document one
//! node cannot validate is refused there and reported; without the primary a follower keeps
//! serving and writes wait.

use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use test_support::{get, wait_for, wait_until};

use super::mesh_world::{dig, members_at, node, primary_args, Mesh};
use crate::{call, call_with_head, LBS, POOLS, WRITE};

pub fn a_write_reaches_every_node_at_its_generation(w: &mut Mesh) {
    let path = format!("{POOLS}/eu");
    let patch = json!({ "description": format!("written at {:?}", std::time::SystemTime::now()) });
    let generation = w.write("PATCH", &path, &patch.to_string());
    w.wait_everywhere(generation, "every node at the new generation");
}

pub fn a_follower_aggregator_serves_what_the_primary_wrote(w: &mut Mesh) {
    // Both endpoints, once the probers' votes are in.
    w.serve_both();
}

pub fn a_write_on_a_follower_is_refused_421_naming_the_primary(w: &mut Mesh) {
    let path = format!("{POOLS}/eu");
    let (status, _, e) = call(w.secondary, WRITE, "DELETE", &path, None, &[]);
    assert_eq!(status, 421, "{e:#}");
    let message = e["errors"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("aggregator-weu-pop"), "{e:#}");
}

/// Sends `signal` (`STOP`, `CONT`) to a process.
pub fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// Continues a stopped process when dropped, so a failing trial leaves none stopped.
pub struct Paused(u32);

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

pub fn a_paused_prober_catches_up_on_a_write_it_missed(w: &mut Mesh) {
    w.serve_both();
    let paused = Paused(w.procs.0[2].id());
    signal(paused.0, "STOP");
    let generation = w.write_origins(false);
    wait_for(
        "DNS drops the deleted endpoint",
        Duration::from_secs(30),
        || dig(w.dns, "www.example.com") == vec!["127.0.0.2".to_string()],
    );
    drop(paused);
    w.wait_everywhere(
        generation,
        "every node, the paused one too, at the generation",
    );
}

pub fn a_document_one_node_cannot_validate_is_refused_there_and_reported(w: &mut Mesh) {
    let before = w.generation();
    w.wait_everywhere(before, "every node at the generation in force");
    let path = format!("{LBS}/www.example.com");
    let (status, _, lb) = call(w.primary, WRITE, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{lb:#}");
    let france = r#"{"country_pools": {"FR": ["eu"]}}"#;
    let (status, etag, e) = call(w.primary, WRITE, "PATCH", &path, Some(france), &[]);
    assert_eq!(status, 200, "{e:#}");
    let refused_at: u64 = etag.parse().expect("generation");
    wait_for(
        "five nodes take it and one refuses it",
        Duration::from_secs(60),
        || {
            let members = get(w.primary, "/members")
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default();
            let took = members
                .iter()
                .filter(|m| m["config_generation"] == json!(refused_at))
                .count();
            let refused = members.iter().find(|m| m["node_id"] == json!("prober-3"));
            took == 5
                && refused.is_some_and(|m| {
                    m["config_generation"] == json!(before)
                        && m["config_refused"]
                            .as_str()
                            .unwrap_or("")
                            .starts_with(&refused_at.to_string())
                })
        },
    );
    // The load balancer as it was, which every node takes.
    let generation = w.write("PUT", &path, &lb["result"].to_string());
    w.wait_everywhere(generation, "every node at the generation without France");
}

pub fn without_the_primary_a_follower_keeps_serving_and_writes_wait(w: &mut Mesh) {
    w.serve_both();
    let generation = w.generation();
    let served = dig(w.dns, "www.example.com");
    let mut primary = w.procs.0.remove(0);
    let _ = primary.kill();
    let _ = primary.wait();
    // Started again when the trial ends, passed or failed.
    let restart = primary_args(w.dir.path(), &w.key, w.primary, w.seed);
    let back = Restart(w, restart);
    let m = &back.0;
    wait_for(
        "the follower sees no primary",
        Duration::from_secs(60),
        || call(m.secondary, WRITE, "GET", "/config", None, &[]).2["result"]["primary"].is_null(),
    );
    let (_, _, state) = call(m.secondary, WRITE, "GET", "/config", None, &[]);
    assert_eq!(
        state["result"]["generation"],
        json!(generation),
        "{state:#}"
    );
    assert_eq!(dig(m.dns, "www.example.com"), served);
    let (status, _, e, head) = call_with_head(m.secondary, WRITE, "POST", POOLS, Some("{}"), &[]);
    assert_eq!(status, 503, "{e:#}");
    assert!(
        head.contains("\r\nretry-after: 5"),
        "says when to try again: {head}"
    );
}

/// Starts the primary again (with `args`) when dropped, and waits (without failing: the trial
/// that dropped it says what broke) for the follower and every node to see it.
pub struct Restart<'a>(&'a mut Mesh, Vec<String>);

impl Drop for Restart<'_> {
    fn drop(&mut self) {
        let m = &mut self.0;
        m.procs.0.insert(0, node(&self.1));
        let within = Duration::from_secs(60);
        wait_until(within, || TcpStream::connect(m.primary).is_ok());
        wait_until(within, || {
            !call(m.secondary, WRITE, "GET", "/config", None, &[]).2["result"]["primary"].is_null()
        });
        let (_, _, state) = call(m.primary, WRITE, "GET", "/config", None, &[]);
        let generation = state["result"]["generation"].as_u64().unwrap_or(0);
        wait_until(within, || members_at(m.primary, generation) == (6, 6));
    }
}
