//! An endpoint a reload disables drains its cookie sessions for `drain_duration` (no new client
//! lands there), and a reload that makes the pool critical is notified as news.

use std::time::Duration;

use test_support::config::{Config, Endpoint, Lb, Monitor, Pool};
use test_support::*;

use super::clients::exchange_with;
use crate::{post_reload, TOKEN};

/// A config with cookie affinity over `a` and `b` (`b_enabled` or not), `drain_duration = 10`:
/// long enough for the checks made within it on a loaded machine.
pub fn drain_config(b_enabled: bool, a: u16, b: u16) -> Config {
    let web = Pool::new("web")
        .monitor("http")
        .regions(&["WEU"])
        .origin("a", ("127.0.0.1", a))
        .endpoint(Endpoint::new("b", ("127.0.0.1", b)).enabled(b_enabled));
    drain_config_with(web)
}

/// `drain_config` with pool `web` as given.
pub fn drain_config_with(web: Pool) -> Config {
    Config::new()
        .monitor(Monitor::http("http").path("/").interval(1).timeout(1))
        .pool(web)
        .load_balancer(
            Lb::new("www.reload.test")
                .proxied()
                .pools(&["web"])
                .affinity("cookie")
                .drain_duration(10),
        )
}

/// Who answered, and the affinity cookie it set (name=value), when it set one.
pub fn with_cookie(
    proxy: std::net::SocketAddr,
    cookie: Option<&str>,
) -> Option<(String, Option<String>)> {
    let mut s = std::net::TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let extra = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    let (status, fields, body) = exchange_with(&mut s, "www.reload.test", "/", &extra)?;
    if status != 200 {
        return None;
    }
    let set = fields
        .iter()
        .find(|(k, _)| k == "set-cookie")
        .and_then(|(_, v)| v.split(';').next())
        .map(str::to_string);
    Some((
        String::from_utf8_lossy(&body).lines().next()?.to_string(),
        set,
    ))
}

pub fn an_endpoint_disabled_by_a_reload_drains_its_sessions_for_drain_duration() {
    let (a, b) = (
        named_origin("127.0.0.1", "a", Duration::ZERO),
        named_origin("127.0.0.1", "b", Duration::ZERO),
    );
    let (dir, key) = scratch_dir_with_key("live-config-drain");
    let agg = dir.path().join("aggregator.toml");
    let probers = dir.path().join("probers.toml");
    drain_config(true, a.port, b.port).write(&agg);
    drain_config(true, a.port, b.port).write(&probers);
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let (admin, proxy) = (free_tcp(), free_tcp());
    let extra: Vec<String> = [
        "--admin-token-file",
        token.to_str().unwrap(),
        "--proxy",
        &proxy.to_string(),
        "--proxy-workers",
        "1",
    ]
    .map(String::from)
    .to_vec();
    let (_mesh, _) = start_mesh_split(&agg, &probers, &key, admin, &extra);
    wait_for("both endpoints healthy", Duration::from_secs(40), || {
        get(admin, "/status").is_some_and(|s| {
            s["pools"][0]["endpoints"]
                .as_array()
                .is_some_and(|e| e.iter().all(|e| e["verdict"] == "healthy"))
        })
    });
    // A session bound to b.
    let mut cookie = None;
    wait_for(
        "a session on b",
        Duration::from_secs(20),
        || match with_cookie(proxy, None) {
            Some((by, Some(c))) if by == "b" => {
                cookie = Some(c);
                true
            }
            _ => false,
        },
    );
    let cookie = cookie.expect("cookie");
    assert_eq!(with_cookie(proxy, Some(&cookie)).expect("answer").0, "b");

    // b disabled by a reload: its session stays for drain_duration; no new client lands there.
    drain_config(false, a.port, b.port).write(&agg);
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    let disabled = std::time::Instant::now();
    let drain = get(admin, "/status").expect("status")["pools"][0]["endpoints"][1]["drain"].clone();
    assert_eq!(drain["by"], serde_json::json!(["config"]), "{drain}");
    assert_eq!(drain["drain_duration"], 10, "{drain}");
    let left = drain["seconds_left"].as_u64().expect("seconds left");
    assert!((8..=10).contains(&left), "{drain}");
    for _ in 0..20 {
        let (by, _) = with_cookie(proxy, None).expect("a new client");
        assert_eq!(by, "a", "a new client landed on the draining endpoint");
    }
    assert_eq!(
        with_cookie(proxy, Some(&cookie)).expect("the session").0,
        "b",
        "the session stays on b while it drains"
    );
    // Then it moves (the promise: about drain_duration; asserted with a margin).
    wait_for("the session moved", Duration::from_secs(25), || {
        with_cookie(proxy, Some(&cookie)).is_some_and(|(by, _)| by == "a")
    });
    let moved_after = disabled.elapsed();
    assert!(
        moved_after >= Duration::from_secs(8),
        "the session left b after {moved_after:?}, before its drain_duration"
    );
    let after = get(admin, "/status").expect("status")["pools"][0]["endpoints"][1]["drain"].clone();
    assert_eq!(after["seconds_left"], 0, "{after}");

    // A reload that makes the pool critical (minimum_origins 2, one endpoint enabled) is news,
    // not a first verdict: its event is not marked initial, so it is notified.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0));
    let web = Pool::new("web")
        .monitor("http")
        .regions(&["WEU"])
        .minimum_origins(2)
        .origin("a", ("127.0.0.1", a.port))
        .endpoint(Endpoint::new("b", ("127.0.0.1", b.port)).enabled(false));
    drain_config_with(web).write(&agg);
    let (status, answer) = post_reload(admin, Some(TOKEN));
    assert_eq!(status, 200, "{answer}");
    let mut event = None;
    wait_for("the pool's critical event", Duration::from_secs(20), || {
        event = get(admin, &format!("/events?pool=web&since={since}"))
            .and_then(|v| v.as_array().cloned())
            .and_then(|list| {
                list.into_iter()
                    .find(|e| e["kind"] == "pool" && e["to"] == "critical")
            });
        event.is_some()
    });
    let event = event.expect("event");
    assert_eq!(event["from"], "healthy", "{event}");
    assert!(
        event.get("initial").is_none(),
        "not a first verdict: {event}"
    );
}
