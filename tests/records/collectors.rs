//! dnstap read back by BIND's `dnstap-read` from meshlb's file and from `fstrm_capture`'s, a
//! collector that never reads, and the process log as JSON.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::{scrape, wait_for};

use super::world::{Combined, Stalled, World};

/// `dig` for `name` at `server`; its status line.
fn dig(server: std::net::SocketAddr, name: &str) -> String {
    let out = Command::new("dig")
        .args([
            &format!("@{}", server.ip()),
            "-p",
            &server.port().to_string(),
        ])
        .args(["+tries=1", "+time=2", name, "A"])
        .output()
        .expect("dig runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("status:"))
        .unwrap_or_default()
        .to_string()
}

/// What `dnstap-read` makes of `file` (`-y`: every field, as YAML).
fn dnstap_read(file: &Path, yaml: bool) -> String {
    let mut cmd = Command::new("dnstap-read");
    if yaml {
        cmd.arg("-y");
    }
    let out = cmd
        .arg(file)
        .output()
        .expect("dnstap-read (bind9-dnsutils) runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn dnstap_read_shows_a_query_and_its_answer_from_the_file(w: &mut World) {
    assert!(dig(w.node.dns, "dns.example.test").contains("NOERROR"));
    // The file ends with a STOP frame only when closed; dnstap-read takes the frames so far.
    let mut text = String::new();
    wait_for(
        "the query in the dnstap file",
        Duration::from_secs(10),
        || {
            text = dnstap_read(&w.dnstap, false);
            text.lines()
                .any(|l| l.contains(" AQ ") && l.contains("dns.example.test/IN/A"))
                && text
                    .lines()
                    .any(|l| l.contains(" AR ") && l.contains("dns.example.test/IN/A"))
        },
    );
    let yaml = dnstap_read(&w.dnstap, true);
    assert!(
        yaml.contains("AUTH_RESPONSE") && yaml.contains("AUTH_QUERY"),
        "{yaml}"
    );
    assert!(yaml.contains("dns.example.test"), "{yaml}");
}

pub fn json_process_logs_carry_a_reloads_fields(w: &mut World) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            "Authorization: Bearer secret-token",
        ])
        .arg(format!("http://{}/-/reload", w.node.admin))
        .output()
        .expect("curl");
    assert!(out.status.success());
    let mut line = None;
    wait_for("the reload's log line", Duration::from_secs(10), || {
        line = std::fs::read_to_string(&w.node.stderr)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["fields"]["why"] == "POST /-/reload");
        line.is_some()
    });
    let v = line.expect("line");
    assert_eq!(v["level"], "INFO", "{v}");
    assert!(v["timestamp"].is_string(), "{v}");
    assert!(
        v["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("config reload")),
        "{v}"
    );
}

/// The sum of a metric's series whose labels contain every one of `labels`.
fn metric(admin: std::net::SocketAddr, name: &str, labels: &[&str]) -> f64 {
    scrape(admin)
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn dnstap_written(w: &Combined) -> f64 {
    metric(
        w.node.admin,
        "meshlb_log_records_written_total",
        &["log=\"dnstap\""],
    )
}

/// Every query and its answer in a dnstap file, as `dnstap-read` shows them.
fn assert_query_and_answer(file: &Path) {
    let text = dnstap_read(file, false);
    for kind in [" AQ ", " AR "] {
        assert!(
            text.lines()
                .any(|l| l.contains(kind) && l.contains("dns.example.test/IN/A")),
            "{kind} in {text}"
        );
    }
}

/// Each trial leaves a collector running, as the world starts with one.
pub fn fstrm_capture_collects_dnstap_over_the_socket(w: &mut Combined) {
    let before = dnstap_written(w);
    wait_for(
        "a query written to the collector",
        Duration::from_secs(10),
        || {
            assert!(dig(w.node.dns, "dns.example.test").contains("NOERROR"));
            dnstap_written(w) > before
        },
    );
    // fstrm_capture buffers its file; stopped (SIGINT), it writes out what it holds.
    let file = w.stop_capture();
    w.start_capture();
    assert_query_and_answer(&file);
}

pub fn a_collector_that_comes_back_is_reconnected(w: &mut Combined) {
    w.stop_capture();
    // With no collector, records are counted as unwritten once the writer finds it gone.
    let unwritten = |w: &Combined| {
        metric(
            w.node.admin,
            "meshlb_log_records_dropped_total",
            &["log=\"dnstap\"", "reason=\"unwritten\""],
        )
    };
    let lost = unwritten(w);
    wait_for(
        "records lost while the collector is away",
        Duration::from_secs(10),
        || {
            assert!(dig(w.node.dns, "dns.example.test").contains("NOERROR"));
            unwritten(w) > lost
        },
    );
    w.start_capture();
    let before = dnstap_written(w);
    wait_for(
        "the writer back on the new collector",
        Duration::from_secs(40),
        || {
            assert!(dig(w.node.dns, "dns.example.test").contains("NOERROR"));
            dnstap_written(w) > before
        },
    );
    let file = w.stop_capture();
    w.start_capture();
    assert_query_and_answer(&file);
}

pub fn a_collector_that_never_reads_costs_dropped_records_not_answers(w: &mut Stalled) {
    let start = Instant::now();
    for i in 0..40 {
        let status = dig(w.node.dns, "dns.example.test");
        assert!(
            status.contains("NOERROR"),
            "query {i} unanswered: {status:?}"
        );
    }
    println!(
        "40 queries answered in {:?} with the collector stalled",
        start.elapsed()
    );
    let dropped = || {
        metric(
            w.node.admin,
            "meshlb_log_records_dropped_total",
            &["log=\"dnstap\"", "reason=\"queue_full\""],
        )
    };
    wait_for("drops counted", Duration::from_secs(10), || {
        dropped() >= 20.0
    });
}
