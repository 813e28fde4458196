//! What a primary takes: request bodies bounded in size and in time, and the mesh's document
//! served only to members of the cluster.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;
use test_support::{admin_token_args, free_tcp, scrape, scratch_dir_with_key};

use super::world::start_primary;
use crate::{call, POOLS, WRITE};

pub fn request_bodies_are_bounded_in_size_and_time_and_fetches_need_the_cluster_key() {
    let (dir, key) = scratch_dir_with_key("api-limits");
    let config = dir.path().join("meshlb.toml");
    let admin = free_tcp();
    let mut args = admin_token_args(dir.path());
    args.extend(
        [
            "--config-max-bytes",
            "2000",
            "--admin-body-timeout-ms",
            "300",
        ]
        .map(String::from),
    );
    let _procs = start_primary(&config, &key, admin, args);
    let big = format!(r#"{{"name": "p", "description": "{}"}}"#, "x".repeat(4000));
    let (status, _, e) = call(admin, WRITE, "POST", POOLS, Some(&big), &[]);
    assert_eq!(
        (status, e["errors"][0]["code"].clone()),
        (413, json!(1008)),
        "{e:#}"
    );
    // A body that stops short of its Content-Length is cut after the body timeout.
    let mut s = TcpStream::connect(admin).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        s,
        "POST {POOLS} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer secret-token\r\nContent-Length: 100\r\n\r\n{{\"name\""
    )
    .expect("write");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // The mesh's document is for members of the cluster only.
    let (status, _, e) = call(admin, None, "GET", "/-/config/document", None, &[]);
    assert_eq!(status, 401, "{e:#}");
    let (status, _, _) = call(
        admin,
        None,
        "GET",
        "/-/config/document",
        None,
        &[
            ("X-Meshlb-Node", "intruder"),
            ("X-Meshlb-Time", &lb_now().to_string()),
            ("Authorization", "Meshlb-Cluster 00"),
        ],
    );
    assert_eq!(status, 401);
    let metrics = scrape(admin);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("meshlb_config_fetches_refused_total") && l.ends_with(" 2")),
        "{metrics}"
    );
}

pub fn lb_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
