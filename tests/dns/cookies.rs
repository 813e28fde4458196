//! DNS cookies (RFC 7873, RFC 9018) on a real aggregator, as `dig` and Knot's `kdig` see
//! them: a server cookie given to a client cookie and accepted back; response-rate limiting
//! (1 answer a second per address here, each over it slipped) letting a proven client
//! through and answering BADCOOKIE to a client cookie alone, which dig retries with the cookie;
//! NSID through kdig.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use test_support::config::{Config, Lb, Pool, Zone};
use test_support::*;

pub struct CookieWorld {
    pub dns: SocketAddr,
    _procs: Procs,
    _origin: Origin,
    _scratch: tempfile::TempDir,
}

impl CookieWorld {
    pub fn start() -> CookieWorld {
        let (scratch, key) = scratch_dir_with_key("dns-cookies");
        let origin = origin_on("127.0.0.11");
        let config = Config::new()
            .pool(Pool::new("web").origin("w1", ("127.0.0.11", origin.port)))
            .zone(Zone::new("example.test").nameservers(&["ns1.example.test"]))
            .load_balancer(Lb::new("www.example.test").pools(&["web"]))
            .render();
        let file = scratch.path().join("meshlb.toml");
        std::fs::write(&file, config).expect("config");
        let (admin, dns, gossip) = (free_tcp(), free_tcp_and_udp(), free_udp());
        let extra: Vec<String> = [
            "--dns",
            &dns.to_string(),
            "--dns-rrl-rate",
            "1",
            "--dns-rrl-slip",
            "1",
            "--dns-rrl-ipv4-prefix",
            "32",
        ]
        .map(String::from)
        .to_vec();
        let procs = Procs(vec![start_aggregator(
            &file, &key, "WEU", admin, gossip, &extra,
        )]);
        let world = CookieWorld {
            dns,
            _procs: procs,
            _origin: origin,
            _scratch: scratch,
        };
        wait_for("DNS answers", Duration::from_secs(30), || {
            dig(&world, "127.0.0.100", &["+nocookie"]).contains("status: NOERROR")
        });
        world
    }
}

/// `dig` for www.example.test A from `source`, with `args`: its whole output.
fn dig(w: &CookieWorld, source: &str, args: &[&str]) -> String {
    let out = Command::new("dig")
        .arg(format!("@{}", w.dns.ip()))
        .args(["-p", &w.dns.port().to_string(), "-b", source])
        .args(["+tries=1", "+time=1", "+ignore"])
        .args(args)
        .args(["www.example.test", "A"])
        .output()
        .expect("dig runs (bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The COOKIE dig printed (`; COOKIE: HEX (good)`), in hex.
fn cookie_in(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("; COOKIE: "))?;
    Some(
        line.trim_start_matches("; COOKIE: ")
            .split(' ')
            .next()?
            .to_string(),
    )
}

/// A full cookie (client and server) learned by `source`.
fn learn(w: &CookieWorld, source: &str) -> String {
    let text = dig(w, source, &["+cookie"]);
    let cookie = cookie_in(&text).unwrap_or_else(|| panic!("no cookie in {text}"));
    assert_eq!(cookie.len(), 48, "client 8 bytes, server 16: {text}");
    assert!(text.contains("(good)"), "{text}");
    cookie
}

pub fn dig_gets_a_server_cookie_that_a_second_query_returns(w: &mut CookieWorld) {
    let source = "127.0.0.101";
    let cookie = learn(w, source);
    let again = dig(w, source, &[&format!("+cookie={cookie}")]);
    assert!(again.contains("status: NOERROR"), "{again}");
    let fresh = cookie_in(&again).expect("a cookie");
    assert_eq!(fresh[..16], cookie[..16], "the client cookie is echoed");
    assert!(again.contains("(good)"), "{again}");
}

pub fn a_query_with_a_valid_server_cookie_passes_rate_limiting(w: &mut CookieWorld) {
    let source = "127.0.0.102";
    let cookie = learn(w, source);
    // Twenty queries at once: at one answer a second, nineteen would be slipped.
    let batch = "www.example.test A\n".repeat(20);
    let file = std::env::temp_dir().join(format!("meshlb-cookie-batch-{}", std::process::id()));
    std::fs::write(&file, batch).expect("batch");
    let text = dig(
        w,
        source,
        &[
            &format!("+cookie={cookie}"),
            "-f",
            &file.display().to_string(),
        ],
    );
    let _ = std::fs::remove_file(&file);
    let answered = text.matches("status: NOERROR").count();
    let truncated = text.matches(" tc ").count() + text.matches(" tc;").count();
    // dig asks the command line's query, then the file's twenty.
    assert_eq!((answered, truncated), (21, 0), "{text}");
    // The same from an address without a cookie is limited: most are slipped (TC=1).
    let limited: usize = (0..5)
        .map(|_| dig(w, "127.0.0.103", &["+nocookie"]))
        .filter(|t| t.contains(" tc "))
        .count();
    assert!(limited >= 3, "{limited} of 5 truncated");
}

pub fn a_client_cookie_alone_over_the_rate_gets_badcookie(w: &mut CookieWorld) {
    let source = "127.0.0.104";
    // dig retries a BADCOOKIE at once with the cookie it carried (`;; BADCOOKIE,
    // retrying.`), and that retry is answered: the client proved its address.
    let runs: Vec<String> = (0..5).map(|_| dig(w, source, &["+cookie"])).collect();
    let badcookies = runs
        .iter()
        .filter(|t| t.contains(";; BADCOOKIE, retrying."))
        .count();
    assert!(badcookies >= 3, "{badcookies} of 5: {runs:#?}");
    for text in &runs {
        assert!(text.contains("status: NOERROR"), "{text}");
    }
}

/// `kdig` (Knot) for www.example.test A from `source`, with `args`.
fn kdig(w: &CookieWorld, source: &str, args: &[&str]) -> String {
    let out = Command::new("kdig")
        .arg(format!("@{}", w.dns.ip()))
        .args(["-p", &w.dns.port().to_string(), "-b", source])
        .args(["+retry=0", "+timeout=1"])
        .args(args)
        .args(["www.example.test", "A"])
        .output()
        .expect("kdig runs (knot-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn kdig_gets_a_cookie_accepted_back_and_the_nsid(w: &mut CookieWorld) {
    let source = "127.0.0.105";
    let first = kdig(w, source, &["+cookie", "+nsid"]);
    let line = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.starts_with(key))
            .map(|l| l.trim_start_matches(key).trim().to_string())
    };
    let cookie = line(&first, ";; COOKIE:").unwrap_or_else(|| panic!("no cookie: {first}"));
    let cookie: String = cookie.split_whitespace().next().unwrap_or_default().into();
    assert_eq!(cookie.len(), 48, "{first}");
    let nsid = line(&first, ";; NSID:").unwrap_or_else(|| panic!("no NSID: {first}"));
    assert!(nsid.contains("aggregator-"), "{nsid}");
    let again = kdig(w, source, &[&format!("+cookie={cookie}")]);
    assert!(again.contains("NOERROR"), "{again}");
    let echoed = line(&again, ";; COOKIE:").unwrap_or_else(|| panic!("no cookie: {again}"));
    assert!(echoed.starts_with(&cookie[..16]), "{echoed} / {cookie}");
}
