//! A real DNS resolver and client: Unbound and dig.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// A real Unbound on `listen` (127.0.0.1 only, no IPv6, in the foreground, everything in
/// `dir`), with `server` lines added to its `server:` clause and `rest` after it.
pub fn unbound(dir: &std::path::Path, listen: SocketAddr, server: &str, rest: &str) -> Child {
    let conf = dir.join("unbound.conf");
    std::fs::write(
        &conf,
        format!(
            r#"server:
  interface: {ip}@{port}
  port: {port}
  do-daemonize: no
  use-syslog: no
  logfile: "{dir}/unbound.log"
  chroot: ""
  username: ""
  directory: "{dir}"
  pidfile: "{dir}/unbound.pid"
  num-threads: 1
  do-ip6: no
  access-control: 127.0.0.0/8 allow
{server}{rest}"#,
            ip = listen.ip(),
            port = listen.port(),
            dir = dir.display(),
        ),
    )
    .expect("unbound.conf");
    Command::new("unbound")
        .args(["-d", "-c"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("unbound (package unbound)")
}

/// `dig +short` for `name`'s A records at `dns` (one try, 2 s), in answer order.
pub fn dig_short(dns: SocketAddr, name: &str) -> Vec<String> {
    let out = Command::new("dig")
        .arg(format!("@{}", dns.ip()))
        .args([
            "-p",
            &dns.port().to_string(),
            name,
            "A",
            "+short",
            "+tries=1",
            "+time=2",
        ])
        .output()
        .expect("dig (package bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
