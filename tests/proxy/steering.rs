//! Origin steering inside a pool: weights, least outstanding requests, hash by client address.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use super::world::World;
use crate::curl;

/// Weights 0.25 / 0.75: over 400 requests (one curl, keep-alive to the proxy) w2 gets 65-85 %.
pub fn weights_share_requests_between_endpoints(w: &mut World) {
    w.wait_steady();
    let urls: Vec<String> = (0..400).map(|_| w.url.clone()).collect();
    let out = Command::new("curl")
        .args(["-s", "-H", "Host: weighted.example.test"])
        .args(&urls)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let w2 = text.lines().filter(|l| *l == "w2").count();
    let w1 = text.lines().filter(|l| *l == "w1").count();
    assert_eq!(w1 + w2, 400);
    let share = w2 as f64 / 400.0;
    assert!((0.65..=0.85).contains(&share), "weight 0.75 got {share}");
}

/// `slow` holds /hold for 5 s, `fast` answers at once. Of 60 requests started 50 ms apart (all
/// within `slow`'s hold), random steering would send about 30 to `slow` (P(<= 17) = 0.05 %);
/// least outstanding requests, weighing `slow` down by its open requests
/// (P(pick slow) = 1 / (open + 2)), sends about 11 (P(> 17) < 0.01 %).
pub fn least_outstanding_requests_spares_the_endpoint_holding_requests(w: &mut World) {
    w.wait_steady();
    let lors_url = format!("http://{}/hold", w.proxy);
    let handles: Vec<_> = (0..60)
        .map(|i| {
            std::thread::sleep(Duration::from_millis(if i == 0 { 0 } else { 50 }));
            let u = lors_url.clone();
            std::thread::spawn(move || curl(&u, "lors.example.test", &[]).origin().to_string())
        })
        .collect();
    let served: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let to_slow = served.iter().filter(|s| *s == "slow").count();
    eprintln!("LORS sent {to_slow} of 60 requests to the endpoint holding them open");
    assert_eq!(
        served.iter().filter(|s| *s == "fast").count() + to_slow,
        60,
        "{served:?}"
    );
    assert!(
        to_slow <= 17,
        "LORS sent {to_slow} of 60 to the endpoint holding requests: {served:?}"
    );
}

/// The endpoints that five requests for `host` from `iface` reached.
fn picks(w: &World, host: &str, iface: &str) -> BTreeSet<String> {
    (0..5)
        .map(|_| {
            curl(&w.url, host, &["--interface", iface])
                .origin()
                .to_string()
        })
        .collect()
}

/// Hash steering: each client address always lands on the same endpoint.
pub fn hash_steering_keeps_a_client_address_on_one_endpoint(w: &mut World) {
    w.wait_steady();
    for c in 2..12 {
        let iface = format!("127.0.2.{c}");
        let picks = picks(w, "hash.example.test", &iface);
        assert_eq!(picks.len(), 1, "client {iface} moved: {picks:?}");
    }
}

/// Hash steering: ten client addresses do not all land on one endpoint.
pub fn hash_steering_spreads_client_addresses(w: &mut World) {
    w.wait_steady();
    let spread: BTreeSet<String> = (2..12)
        .map(|c| {
            curl(
                &w.url,
                "hash.example.test",
                &["--interface", &format!("127.0.2.{c}")],
            )
            .origin()
            .to_string()
        })
        .collect();
    assert!(
        spread.len() >= 2,
        "ten clients all on one endpoint: {spread:?}"
    );
}

/// `ip_cookie` affinity: a cookie is issued, and a client address stays on its endpoint even
/// without sending the cookie back.
pub fn ip_cookie_affinity_keeps_a_client_address_without_its_cookie(w: &mut World) {
    w.wait_steady();
    for c in 2..6 {
        let iface = format!("127.0.3.{c}");
        let first = curl(&w.url, "ipcookie.example.test", &["--interface", &iface]);
        assert!(
            first
                .header("set-cookie")
                .is_some_and(|v| v.starts_with("__meshlb=")),
            "{first:?}"
        );
        for _ in 0..4 {
            let again = curl(&w.url, "ipcookie.example.test", &["--interface", &iface]);
            assert_eq!(again.origin(), first.origin(), "client {iface}");
        }
    }
}
