//! The admin API and the commands that read it: `meshlb explain`, `meshlb status` (one config
//! in the whole mesh, no drift), and the token it wants.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

use super::world::World;

/// `meshlb <command> --admin ADMIN --token-file TOKEN <args>`.
fn meshlb(w: &World, command: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args([command, "--admin", &w.admin.to_string()])
        .args(["--token-file", w.token.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("meshlb {command}: {e}"))
}

pub fn meshlb_explain_reads_the_admin_api(w: &mut World) {
    w.wait_whole();
    let out = meshlb(w, "explain", &["--lb", "www.example.test", "--pop", "ENAM"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("www.example.test from ENAM (dns): answer web/one, web/two"),
        "{text}"
    );
}

pub fn meshlb_status_reads_the_admin_api(w: &mut World) {
    w.wait_whole();
    let out = meshlb(w, "status", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("www.example.test") && text.contains("healthy"),
        "{text}"
    );
}

/// One config in the whole mesh, run by the aggregator and its live probers, no drift.
pub fn the_whole_mesh_runs_one_config_without_drift(w: &mut World) {
    w.wait_whole();
    let out = meshlb(w, "status", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let configs: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("CONFIG"))
        .skip(1)
        .collect();
    assert!(
        configs.len() == 1 && configs[0].contains("(1 aggregator, ") && !text.contains("DRIFT"),
        "{text}"
    );
}

pub fn the_admin_api_wants_its_token(w: &mut World) {
    let mut s = TcpStream::connect(w.admin).expect("admin");
    write!(s, "GET /status HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(
        body.starts_with("HTTP/1.0 401") || body.starts_with("HTTP/1.1 401"),
        "{body}"
    );
}
