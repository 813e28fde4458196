//! The admin API under attack: changes without the token or from a browser refused (and not
//! applied), a request head that never ends cut at the head timeout, and connections beyond
//! the limit closed and counted.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use test_support::*;

use super::world::{
    call, closed_port_config, closed_within, drained, metric, proxy_with, wait_healthz,
};

pub fn admin_changes_need_the_token_and_never_come_from_a_browser() {
    let (scratch, key) = scratch_dir_with_key("hostile-admin");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    // Without a token: reads open, every change refused.
    let open = free_tcp();
    let _open = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        open,
        free_udp(),
        &[],
    )]);
    wait_healthz(open);
    assert_eq!(call(open, "GET", "/status", &[]), 200);
    assert_eq!(call(open, "POST", "/drain?pool=web&endpoint=a", &[]), 403);
    assert_eq!(call(open, "POST", "/-/reload", &[]), 403);
    assert_eq!(drained(open), 0);
    // With a token: a browser's cross-site form post is refused even carrying it.
    let admin = free_tcp();
    let token = admin_token_args(scratch.path());
    let _guarded = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &token,
    )]);
    wait_healthz(admin);
    let bearer = "Authorization: Bearer secret-token";
    let drain = "/drain?pool=web&endpoint=a";
    for browser in [
        "Origin: https://evil.example",
        "Sec-Fetch-Site: cross-site",
        "Content-Type: application/x-www-form-urlencoded",
        "Content-Type: text/plain",
    ] {
        assert_eq!(
            call(admin, "POST", drain, &[bearer, browser]),
            403,
            "{browser}"
        );
    }
    assert_eq!(call(admin, "POST", drain, &[]), 401);
    assert_eq!(drained(admin), 0, "nothing refused was applied");
    assert_eq!(call(admin, "POST", drain, &[bearer]), 200);
    assert_eq!(drained(admin), 1);
}

pub fn a_request_head_that_never_ends_is_cut_at_the_admin_head_timeout() {
    let (scratch, key) = scratch_dir_with_key("hostile-head");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(&config, closed_port_config()).expect("config");
    let admin = free_tcp();
    let _p = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &["--admin-head-timeout-ms".into(), "500".into()],
    )]);
    wait_healthz(admin);
    let mut s = TcpStream::connect(admin).expect("connect");
    s.write_all(b"GET /status HTTP/1.1\r\nHost: a\r\n")
        .expect("partial head");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let start = Instant::now();
    let mut buf = [0u8; 512];
    // hyper answers 408 or just closes; either way the connection ends, long before 20 s.
    let ended = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    assert!(ended, "the connection was still open after 20 s");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
}

pub fn admin_connections_beyond_the_limit_are_closed_and_counted() {
    let origin = origin();
    let (_p, admin, _proxy) = proxy_with(
        "hostile-admin-conns",
        origin.port,
        &["--admin-max-connections", "2"],
    );
    // Two idle connections fill the admin listener; a third is closed at accept.
    wait_for(
        "a connection over the limit is closed",
        Duration::from_secs(10),
        || {
            let _held: Vec<TcpStream> = (0..2)
                .map(|_| TcpStream::connect(admin).expect("connect"))
                .collect();
            let mut third = TcpStream::connect(admin).expect("connect");
            closed_within(&mut third, Duration::from_millis(500))
                .is_some_and(|(_, got)| got.is_empty())
        },
    );
    // Once they go, the API answers again, and says what it refused.
    wait_for(
        "the admin API answers again",
        Duration::from_secs(10),
        || metric(admin, "meshlb_admin_connections_refused_total") >= 1.0,
    );
}
