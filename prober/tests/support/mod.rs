//! Test harness: real servers on loopback (a hyper origin over HTTP and HTTPS with test
//! certificates, OpenLDAP slapd, OpenSMTPD) and helpers to probe them with a config written
//! the way an operator would write it.

#![allow(dead_code)]

pub mod origin;
pub mod pki;
pub mod servers;

use lb_core::config::Config;
use lb_core::RegionsTable;
use prober::monitors::{check_for, probe, Dialer, IcmpClients};
use prober::{ProbeResult, ProbeTarget};

/// A fresh directory under the system temp dir, removed when the guard drops.
pub fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("meshlb-{tag}-"))
        .tempdir()
        .expect("create temp dir")
}

/// Parses a config (as an operator writes it) and returns its probe targets.
pub fn targets(toml: &str) -> Vec<ProbeTarget> {
    let regions = RegionsTable::embedded().expect("regions");
    let config =
        Config::parse("test.toml", toml, &regions).unwrap_or_else(|e| panic!("test config:\n{e}"));
    prober::targets(&config, None)
}

/// One monitor, one pool of one endpoint: probes it once (with the monitor's retries).
pub async fn probe_once(monitor: &str, endpoint: &str) -> ProbeResult {
    let toml = format!(
        "[[monitors]]\nname = \"m\"\n{monitor}\n[[pools]]\nname = \"p\"\nmonitor = \"m\"\norigins = [{endpoint}]\n"
    );
    let t = targets(&toml).pop().expect("one target");
    let check =
        check_for(&t.monitor, &IcmpClients::new(), &Dialer::direct()).expect("check builds");
    probe(check.as_ref(), &t).await
}

/// A free TCP port on 127.0.0.1 (bound then released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

#[track_caller]
pub fn assert_pass(r: &ProbeResult) {
    assert!(r.attempt.passed, "expected pass, got {r:?}");
}

#[track_caller]
pub fn assert_fail(r: &ProbeResult, reason: &str) {
    assert!(
        !r.attempt.passed,
        "expected failure ({reason}), got pass: {r:?}"
    );
    let got = r
        .attempt
        .reason
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        got.contains(reason),
        "expected reason containing {reason:?}, got {got:?}"
    );
}
