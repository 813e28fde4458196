//! A node's admin API and metrics, as the tests read them, and the admin token they send.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// The admin token `get` sends and `admin_token_args` gives a node.
const TOKEN: &str = "secret-token";

/// The Prometheus text `/metrics` serves at `addr` (no token needed); empty while nothing
/// answers there (a node still starting).
pub fn scrape(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let mut text = String::new();
    if write!(s, "GET /metrics HTTP/1.0\r\n\r\n").is_err() || s.read_to_string(&mut text).is_err() {
        return String::new();
    }
    text
}

/// `GET path` on the admin API at `admin` with the admin token: the JSON body, or `None` when
/// nothing answered or the body is not JSON.
pub fn get(admin: SocketAddr, path: &str) -> Option<Value> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let json = body.split_once("\r\n\r\n")?.1;
    serde_json::from_str(json).ok()
}

/// Arguments that give an aggregator (or a prober's metrics listener) the admin token `get`
/// sends, `secret-token`, written to a file in `dir`.
pub fn admin_token_args(dir: &std::path::Path) -> Vec<String> {
    let file = dir.join("admin-token");
    std::fs::write(&file, TOKEN).expect("token file");
    // Its owner's alone, as the binary expects of a token file (it warns otherwise).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    vec!["--admin-token-file".into(), file.display().to_string()]
}

/// Each live member's config generation in a `GET /members` answer, by node id.
pub fn live_generations(members: &Value) -> Vec<(String, u64)> {
    members
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["alive"] == serde_json::json!(true))
        .map(|m| {
            (
                m["node_id"].as_str().unwrap_or_default().to_string(),
                m["config_generation"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}
