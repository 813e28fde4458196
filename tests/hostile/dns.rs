//! The DNS server under attack: TCP connections capped and idle ones closed, and answers over
//! the response rate slipping to TCP (truncated) or dropped, `dig` then answered over TCP.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use test_support::config::Lb;
use test_support::*;

use super::world::{closed_within, metric, one_pool, two_endpoints, wait_healthz};

/// A DNS query for `name` A with id `id`, as bytes.
pub fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::new();
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // no RD; one question
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, type A, class IN
    q
}

/// An aggregator serving DNS with `config` and `extra` flags: (processes, admin, DNS).
pub fn dns_aggregator(name: &str, config: &str, extra: &[&str]) -> (Procs, SocketAddr, SocketAddr) {
    let (scratch, key) = scratch_dir_with_key(name);
    let path = scratch.path().join("meshlb.toml");
    std::fs::write(&path, config).expect("config");
    let (admin, dns) = (free_tcp(), free_tcp_and_udp());
    let mut args = vec!["--dns".to_string(), dns.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let procs = Procs(vec![start_aggregator(
        &path,
        &key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_healthz(admin);
    // The scratch directory lives as long as the test binary (the config is read at start).
    std::mem::forget(scratch);
    (procs, admin, dns)
}

/// Reads one length-framed DNS message from a TCP connection (RFC 1035 section 4.2.2).
pub fn tcp_dns_answer(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut length = [0u8; 2];
    s.read_exact(&mut length).ok()?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(length))];
    s.read_exact(&mut answer).ok()?;
    Some(answer)
}

pub fn tcp_dns_query(id: u16, name: &str) -> Vec<u8> {
    let q = dns_query(id, name);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    framed
}

pub fn dns_tcp_connections_are_capped_and_idle_ones_closed() {
    let (_p, admin, dns) = dns_aggregator(
        "hostile-dns-tcp",
        &one_pool("192.0.2.10", Lb::new("dns.hostile.test")).render(),
        &[
            "--dns-tcp-max-connections",
            "2",
            "--dns-tcp-idle-timeout-ms",
            "1000",
        ],
    );
    let answered = |s: &mut TcpStream, id: u16| {
        tcp_dns_answer(s).is_some_and(|a| a.len() > 12 && a[..2] == id.to_be_bytes() && a[7] == 1)
    };
    wait_for("the DNS server over TCP", Duration::from_secs(20), || {
        TcpStream::connect(dns).is_ok_and(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(2))).is_ok()
                && s.write_all(&tcp_dns_query(1, "dns.hostile.test")).is_ok()
                && answered(&mut s, 1)
        })
    });
    // Two clients hold the two connections; each pipelines two queries in one write and gets
    // both answers, in order. (A connection the server has not yet seen the probe above let
    // go of may be closed at accept: tried again.)
    let mut held: Vec<TcpStream> = Vec::new();
    for id in [10u16, 20] {
        wait_for(
            "a connection with pipelined answers",
            Duration::from_secs(10),
            || {
                let Ok(mut s) = TcpStream::connect(dns) else {
                    return false;
                };
                let mut two = tcp_dns_query(id, "dns.hostile.test");
                two.extend(tcp_dns_query(id + 1, "dns.hostile.test"));
                let ok = s.set_read_timeout(Some(Duration::from_secs(5))).is_ok()
                    && s.write_all(&two).is_ok()
                    && answered(&mut s, id)
                    && answered(&mut s, id + 1);
                if ok {
                    held.push(s);
                }
                ok
            },
        );
    }
    // A third is closed at accept, and counted.
    let mut third = TcpStream::connect(dns).expect("connect");
    let (_, got) = closed_within(&mut third, Duration::from_secs(2)).expect("closed at accept");
    assert!(got.is_empty());
    assert!(metric(admin, "meshlb_dns_tcp_refused_total") >= 1.0);
    // The held ones, silent, are closed at the idle timeout, which frees their places.
    for s in &mut held {
        assert!(
            closed_within(s, Duration::from_secs(10)).is_some(),
            "an idle DNS TCP connection was held"
        );
    }
    let out = Command::new("dig")
        .args(["+tcp", "+short", "+tries=1", "+time=3", "-p"])
        .arg(dns.port().to_string())
        .args(["@127.0.0.1", "dns.hostile.test", "A"])
        .output()
        .expect("dig");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "192.0.2.10");
}

pub fn dns_answers_over_the_rate_slip_to_tcp_or_are_dropped() {
    let (_p, admin, dns) = dns_aggregator(
        "hostile-rrl",
        &two_endpoints("192.0.2.10", "192.0.2.11", "dns.hostile.test"),
        &[
            "--dns-sockets",
            "1",
            "--dns-rrl-rate",
            "5",
            // Every answer over the rate slips (the drop rhythm is in lb-core/dns/src/rrl.rs).
            "--dns-rrl-slip",
            "1",
        ],
    );
    // dig asks from 127.0.0.1: this socket shares its /24.
    let local = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    local
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    wait_for("the DNS server", Duration::from_secs(20), || {
        local
            .send_to(&dns_query(1, "dns.hostile.test"), dns)
            .is_ok()
            && local.recv(&mut [0u8; 512]).is_ok()
    });
    // 60 queries at once from another /24, whose bucket is still full (5 per second).
    let sock = std::net::UdpSocket::bind("127.0.1.1:0").expect("udp");
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    for id in 0..60u16 {
        sock.send_to(&dns_query(100 + id, "dns.hostile.test"), dns)
            .expect("send");
    }
    let (mut full, mut truncated) = (0, 0);
    let mut buf = [0u8; 512];
    while let Ok(n) = sock.recv(&mut buf) {
        let ancount = u16::from_be_bytes([buf[6], buf[7]]);
        if buf[2] & 0x02 != 0 {
            assert_eq!(ancount, 0, "a slipped answer is empty");
            truncated += 1;
        } else if n > 12 && ancount > 0 {
            full += 1;
        }
    }
    assert!((5..=7).contains(&full), "full answers: {full}");
    assert!((53..=55).contains(&truncated), "truncated: {truncated}");
    // Empty dig's /24's bucket, then a real resolver's query without DNS cookies (with one, it
    // would get BADCOOKIE and retry over UDP with the cookie: tests/dns/cookies.rs): dig gets
    // the truncated answer and retries over TCP, which is never limited. The bucket refills at 5 per second, so it is
    // kept empty until dig is done, however long dig takes to start: one query at a time from
    // this /24, each sent once the last one's (truncated) answer is back.
    let drain = |id: u16| {
        local
            .send_to(&dns_query(id, "dns.hostile.test"), dns)
            .expect("send");
        let _ = local.recv(&mut [0u8; 512]);
    };
    (200..210).for_each(drain);
    let mut dig = Command::new("dig")
        .args([&format!("@{}", dns.ip()), "-p", &dns.port().to_string()])
        .args([
            "+norec",
            "+nocookie",
            "+tries=1",
            "+time=2",
            "dns.hostile.test",
            "A",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("dig");
    // dig gives up after +time=2 and a TCP retry: bounded by a deadline and a count.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for id in (0..u16::MAX).cycle().take(1_000_000) {
        if dig.try_wait().expect("dig").is_some() || std::time::Instant::now() > deadline {
            break;
        }
        drain(id);
    }
    let out = dig.wait_with_output().expect("dig");
    let dig = String::from_utf8_lossy(&out.stdout);
    assert!(
        dig.contains("Truncated, retrying in TCP mode") && dig.contains("192.0.2.10"),
        "{dig}"
    );
    let text = scrape(admin);
    let slipped = text
        .lines()
        .find(|l| l.starts_with("meshlb_dns_rrl_total") && l.contains("action=\"slipped\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(slipped >= 53.0, "slipped {slipped}");
}
