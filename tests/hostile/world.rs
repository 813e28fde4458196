//! What the trials attack and attack with: the configs, an aggregator serving a proxied load
//! balancer (`proxy_with`), its admin API and metrics, and reading until a peer closes.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use test_support::config::{Config, Lb, Pool};
use test_support::*;

/// Pool `web` of one endpoint `a` at `at`, behind `lb`.
pub fn one_pool(at: impl test_support::config::Address, lb: Lb) -> Config {
    Config::new()
        .pool(Pool::new("web").origin("a", at))
        .load_balancer(lb.pools(&["web"]))
}

/// Pool `web` of endpoints `a` and `b` at addresses (no ports), behind DNS load balancer `lb`.
pub fn two_endpoints(a: &str, b: &str, lb: &str) -> String {
    Config::new()
        .pool(Pool::new("web").origin("a", a).origin("b", b))
        .load_balancer(Lb::new(lb).pools(&["web"]))
        .render()
}

/// A proxied `www.hostile.test` in front of a closed port.
pub fn closed_port_config() -> String {
    one_pool(("127.0.0.1", 9), Lb::new("www.hostile.test").proxied()).render()
}

/// `curl -X method` on the admin API with `headers`: the status code.
pub fn call(admin: SocketAddr, method: &str, path: &str, headers: &[&str]) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .arg(format!("http://{admin}{path}"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

pub fn drained(admin: SocketAddr) -> usize {
    get(admin, "/drain")
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(usize::MAX)
}

pub fn wait_healthz(admin: SocketAddr) {
    wait_for("the admin API", Duration::from_secs(20), || {
        call(admin, "GET", "/healthz", &[]) == 200
    });
}

/// A proxied load balancer in front of `port` on 127.0.0.1, served by an aggregator with
/// `extra` proxy flags: (procs, admin, proxy address).
pub fn proxy_with(name: &str, port: u16, extra: &[&str]) -> (Procs, SocketAddr, SocketAddr) {
    let (scratch, key) = scratch_dir_with_key(name);
    let config = scratch.path().join("meshlb.toml");
    one_pool(("127.0.0.1", port), Lb::new("www.hostile.test").proxied()).write(&config);
    let (admin, proxy) = (free_tcp(), free_tcp());
    let mut args: Vec<String> = vec!["--proxy".into(), proxy.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let procs = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_healthz(admin);
    wait_for("the proxy", Duration::from_secs(20), || {
        TcpStream::connect(proxy).is_ok()
    });
    // The scratch directory lives as long as the test binary (the config is read at start).
    std::mem::forget(scratch);
    (procs, admin, proxy)
}

/// The value of the first series of `name` on the admin listener's /metrics (0 if none).
pub fn metric(admin: SocketAddr, name: &str) -> f64 {
    scrape(admin)
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Reads until the peer closes (or `within` passes); how long that took, `None` if still open.
pub fn closed_within(s: &mut TcpStream, within: Duration) -> Option<(Duration, Vec<u8>)> {
    s.set_read_timeout(Some(within)).expect("timeout");
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some((start.elapsed(), got)),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some((start.elapsed(), got))
            }
            Err(_) => return None,
        }
        if start.elapsed() > within {
            return None;
        }
    }
}
