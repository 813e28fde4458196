//! Cookie session affinity: the cookie pins the endpoint, its attributes, a rule's TTL
//! override, a forged cookie, and a session that outlives another endpoint's failure.

use std::collections::BTreeSet;
use std::time::Duration;

use super::world::World;
use crate::{curl, Reply};
use test_support::{wait_for, Stopped};

const HOST: &str = "sticky.example.test";

/// A first request without a cookie: the answer, and the affinity cookie (`name=value`).
fn new_session(w: &World) -> (Reply, String) {
    w.wait_steady();
    let first = curl(&w.url, HOST, &[]);
    let cookie = first
        .header("set-cookie")
        .and_then(|v| v.split(';').next())
        .expect("an affinity cookie")
        .to_string();
    (first, cookie)
}

fn with_cookie(url: &str, cookie: &str) -> Reply {
    curl(url, HOST, &["-H", &format!("Cookie: {cookie}")])
}

/// Requests with the cookie reach the endpoint that issued it, and the cookie is not issued
/// again.
pub fn a_cookie_pins_the_client_to_its_endpoint(w: &mut World) {
    let (first, cookie) = new_session(w);
    for _ in 0..10 {
        let r = with_cookie(&w.url, &cookie);
        assert_eq!(r.origin(), first.origin());
        assert!(r.header("set-cookie").is_none(), "never extended elsewhere");
    }
}

pub fn the_affinity_cookie_is_httponly_samesite_lax_with_the_ttl(w: &mut World) {
    let (first, _) = new_session(w);
    let set_cookie = first.header("set-cookie").unwrap().to_ascii_lowercase();
    assert!(
        set_cookie.contains("httponly") && set_cookie.contains("samesite=lax"),
        "{set_cookie}"
    );
    assert!(set_cookie.contains("max-age=1800"), "{set_cookie}");
}

/// A rule that sets the affinity TTL for /checkout resets the session there (Cloudflare's
/// rule overrides; docs/design.md): the same endpoint, a new cookie with the rule's TTL, which
/// is then followed.
pub fn a_rules_ttl_override_reissues_the_cookie_on_the_same_endpoint(w: &mut World) {
    let (first, cookie) = new_session(w);
    let bound = first.origin();
    let r = with_cookie(&format!("{}checkout", w.url), &cookie);
    assert_eq!(r.origin(), bound);
    let reset = r
        .header("set-cookie")
        .expect("the session is reset on /checkout");
    assert!(
        reset.to_ascii_lowercase().contains("max-age=7200"),
        "{reset}"
    );
    let reset = reset.split(';').next().expect("value").to_string();
    assert_ne!(reset, cookie, "a new cookie");
    let r = with_cookie(&w.url, &reset);
    assert_eq!(r.origin(), bound, "the reset session is followed");
}

/// A cookie whose signature does not match is ignored: a fresh cookie each time, and the
/// requests spread over the endpoints.
pub fn a_tampered_cookie_is_ignored_and_replaced(w: &mut World) {
    let (_, cookie) = new_session(w);
    let mut tampered = cookie.into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let spread: BTreeSet<String> = (0..30)
        .map(|_| {
            let r = with_cookie(&w.url, &tampered);
            assert!(
                r.header("set-cookie").is_some(),
                "a forged cookie gets a fresh one"
            );
            r.origin().to_string()
        })
        .collect();
    assert!(
        spread.len() >= 2,
        "a tampered cookie was followed: {spread:?}"
    );
}

/// Another endpoint of the pool fails: the session stays where it is.
pub fn a_session_survives_another_endpoints_failure(w: &mut World) {
    let (first, cookie) = new_session(w);
    let bound = first.origin().to_string();
    let other = ["h1", "h2", "h3"]
        .into_iter()
        .find(|n| *n != bound)
        .unwrap();
    {
        let _stopped = Stopped::new([&w.origins[other]]);
        wait_for(
            "the unrelated endpoint is out",
            Duration::from_secs(15),
            || (0..20).all(|_| curl(&w.url, HOST, &[]).origin() != other),
        );
        for _ in 0..10 {
            let r = with_cookie(&w.url, &cookie);
            assert_eq!(r.origin(), bound, "the session survived {other}'s failure");
        }
    }
    w.wait_steady();
}
