//! Unit tests: examples, every operator, precedence, absence, errors.

use super::*;

/// Owns the header/cookie vectors a [`RuleInput`] borrows.
struct Fixture {
    headers: Vec<(String, String)>,
    cookies: Vec<(String, String)>,
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            headers: pairs(&[
                ("x-canary", "1"),
                ("user-agent", "Mozilla/5.0 (compatible; GoogleBot/2.1)"),
                ("cookie", "beta=yes; session=abc"),
                ("x-multi", "first"),
                ("x-multi", "second"),
            ]),
            cookies: pairs(&[("beta", "yes"), ("session", "abc")]),
        }
    }

    fn input(&self) -> RuleInput<'_> {
        RuleInput {
            method: Some("POST"),
            host: Some("api.Example.com"),
            path: Some("/api/v2/users"),
            query: Some("page=2"),
            headers: &self.headers,
            cookies: &self.cookies,
            tls: Some(true),
            client_ip: "10.1.2.3".parse().ok(),
            country: Some("DE"),
            pop_region: Some("WEU"),
            lb_name: Some("www-lb"),
            dns_qname: Some("www.example.com"),
            dns_qtype: Some("AAAA"),
        }
    }
}

fn cond(src: &str) -> Condition {
    match Condition::parse(src) {
        Ok(c) => c,
        Err(e) => panic!("`{src}` should parse: {e}"),
    }
}

fn eval(src: &str) -> bool {
    cond(src).matches(&Fixture::new().input())
}

fn eval_empty(src: &str) -> bool {
    cond(src).matches(&RuleInput::default())
}

fn assert_all(cases: &[(&str, bool)]) {
    for (src, want) in cases {
        assert_eq!(eval(src), *want, "`{src}`");
    }
}

#[test]
fn brief_examples() {
    assert_all(&[
        (
            r#"http.request.method == "POST" and starts_with(http.request.uri.path, "/api")"#,
            true,
        ),
        ("ip.src in 10.0.0.0/8", true),
        ("ip.src in {192.0.2.0/24 2001:db8::/32 198.51.100.7}", false),
        (r#"pop.region == "WEU""#, true),
        (r#"cf.load_balancer.region in {"WEU" "EEU"}"#, true),
        (
            r#"http.request.headers["X-Canary"] == "1" or http.request.cookies["beta"] eq "yes""#,
            true,
        ),
        (r#"not (http.host contains "internal") && ssl"#, true),
        (r#"http.request.uri.path matches "^/v[0-9]+/""#, false),
        (
            r#"lower(http.request.headers["user-agent"]) contains "bot""#,
            true,
        ),
        (r#"http.host wildcard "*.example.com""#, true),
        (r#"dns.qry.type == "AAAA""#, true),
        (r#"ip.src.country in {"DE" "FR"}"#, true),
    ]);
    let c = cond(r#"http.request.uri.path matches "^/v[0-9]+/""#);
    let input = RuleInput {
        path: Some("/v12/items"),
        ..RuleInput::default()
    };
    assert!(c.matches(&input));
}

#[test]
fn equality_and_ordering() {
    assert_all(&[
        (r#"http.request.method == "POST""#, true),
        (r#"http.request.method eq "GET""#, false),
        (r#"http.request.method != "GET""#, true),
        (r#"http.request.method ne "POST""#, false),
        (r#"http.request.uri.query < "page=3""#, true),
        (r#"http.request.uri.query lt "page=2""#, false),
        (r#"http.request.uri.query <= "page=2""#, true),
        (r#"http.request.uri.query le "page=1""#, false),
        (r#"http.request.uri.query > "page=10""#, true),
        (r#"http.request.uri.query gt "page=2""#, false),
        (r#"http.request.uri.query >= "page=2""#, true),
        (r#"http.request.uri.query ge "page=3""#, false),
        ("len(http.request.uri.path) == 13", true),
        ("len(http.request.uri.path) != 13", false),
        ("len(http.request.uri.path) < 100", true),
        ("len(http.request.uri.path) lt 13", false),
        ("len(http.request.uri.path) le 13", true),
        ("len(http.request.uri.path) > 100", false),
        ("len(http.request.uri.path) gt 9", true),
        ("len(http.request.uri.path) >= 14", false),
        ("len(http.request.uri.path) in {1..5 10..20}", true),
        ("len(http.request.uri.path) in {1 2 3}", false),
        ("ssl == true", true),
        ("ssl eq false", false),
        ("ssl != false", true),
        ("ssl ne true", false),
        ("ip.src == 10.1.2.3", true),
        ("ip.src != 10.1.2.3", false),
        ("ip.src eq 10.1.2.4", false),
    ]);
}

#[test]
fn string_operators() {
    assert_all(&[
        (r#"http.host contains "Example""#, true),
        (r#"http.host contains "example""#, false),
        (r#"http.host contains """#, true),
        (r#"http.request.uri.path matches "^/api/v[0-9]+/""#, true),
        (r#"http.request.uri.path ~ "users$""#, true),
        (r#"http.request.uri.path ~ r"^/API""#, false),
        (r##"http.request.uri.path matches r#"^/api/"v"#"##, false),
        (r#"http.host in {"a.com" "api.Example.com"}"#, true),
        (r#"http.host in {"api.example.com"}"#, false),
        (r#"http.host wildcard "API.EXAMPLE.*""#, true),
        (r#"http.host wildcard "*.example.org""#, false),
        (r#"http.host strict wildcard "*.example.com""#, false),
        (r#"http.host strict wildcard "*.Example.com""#, true),
        (r#"http.host wildcard "*""#, true),
        (r#"http.host wildcard "api*example*com""#, true),
        (r#"http.host wildcard "api*com*com""#, false),
        (r#"http.host wildcard "api.Example.com""#, true),
        (r#"http.request.uri.path wildcard "/api/*/users""#, true),
        (r#"http.request.method strict wildcard r"P\*ST""#, false),
        (r#"http.request.method == "PO\"ST""#, false),
        (r#"http.request.method == "\\""#, false),
    ]);
    let input = RuleInput {
        path: Some(r"/a*b\c"),
        ..RuleInput::default()
    };
    let c = cond(r#"http.request.uri.path strict wildcard r"/a\*b\\*""#);
    assert!(c.matches(&input));
    let c = cond(r#"http.request.uri.path == "/a*b\\c""#);
    assert!(c.matches(&input));
}

#[test]
fn functions() {
    assert_all(&[
        (r#"lower(http.host) == "api.example.com""#, true),
        (r#"upper(http.host) == "API.EXAMPLE.COM""#, true),
        (r#"upper(lower(http.host)) == "API.EXAMPLE.COM""#, true),
        (r#"lower(http.host) in {"api.example.com"}"#, true),
        (r#"lower(http.host) matches "^api\\.example""#, true),
        (r#"lower(http.host) wildcard "API.*""#, true),
        (r#"lower(http.host) strict wildcard "API.*""#, false),
        (r#"lower(http.host) < "b""#, true),
        (r#"starts_with(http.request.uri.path, "/api")"#, true),
        (r#"starts_with(lower(http.host), "API")"#, false),
        (r#"ends_with(http.request.uri.path, "users")"#, true),
        (r#"ends_with(upper(http.request.uri.path), "USERS")"#, true),
        (
            r#"ends_with(http.request.uri.path, "/api/v2/users/")"#,
            false,
        ),
        (
            r#"starts_with(http.request.uri.path, "/api") == true"#,
            true,
        ),
        (r#"not starts_with(http.host, "www")"#, true),
        ("len(lower(http.host)) == 15", true),
        ("len( http.request.headers[\"x-canary\"] ) == 1", true),
    ]);
    // lower()/upper() only map ASCII, like Cloudflare.
    let input = RuleInput {
        host: Some("ÄB.example"),
        ..RuleInput::default()
    };
    assert!(cond(r#"lower(http.host) == "Äb.example""#).matches(&input));
}

#[test]
fn ip_operators() {
    let mut input = RuleInput {
        client_ip: "2001:db8::5".parse().ok(),
        ..RuleInput::default()
    };
    let ok = |src: &str, input: &RuleInput<'_>| cond(src).matches(input);
    assert!(ok("ip.src in {192.0.2.0/24 2001:db8::/32}", &input));
    assert!(ok("ip.src in 2001:db8::/32", &input));
    assert!(ok("ip.src in {2001:db8::1..2001:db8::9}", &input));
    assert!(!ok("ip.src in {2001:db8::6..2001:db8::9}", &input));
    assert!(ok("ip.src == 2001:db8::5", &input));
    assert!(!ok("ip.src in 10.0.0.0/8", &input));
    input.client_ip = "::ffff:10.0.0.7".parse().ok();
    assert!(ok("ip.src in 10.0.0.0/8", &input));
    assert!(ok("ip.src == 10.0.0.7", &input));
    assert!(ok("ip.src in {10.0.0.1..10.0.0.9}", &input));
    assert!(ok("ip.src in 10.0.0.7", &input));
    assert!(!ok("ip.src in {10.0.0.8..10.0.0.9 192.168.0.0/16}", &input));
    // Host bits in a CIDR are ignored, as in Cloudflare.
    assert!(ok("ip.src in {10.0.0.99/24}", &input));
}

#[test]
fn maps_and_derived_fields() {
    assert_all(&[
        (r#"http.request.headers["X-CANARY"] == "1""#, true),
        (r#"http.request.headers["x-multi"] == "first""#, true),
        (r#"http.request.headers["x-multi"][0] == "first""#, true),
        (r#"http.request.headers["x-multi"][1] == "second""#, true),
        (r#"http.request.headers["x-multi"][2] == "second""#, false),
        (r#"http.request.headers["x-multi"][2] != "second""#, true),
        (r#"http.request.cookies["session"] == "abc""#, true),
        (r#"http.request.cookies["Session"] == "abc""#, false),
        (r#"http.user_agent contains "GoogleBot""#, true),
        (r#"http.cookie contains "session=abc""#, true),
        (r#"cf.load_balancer.name == "www-lb""#, true),
        (r#"ip.geoip.country == "DE""#, true),
        (r#"dns.qry.name == "www.example.com""#, true),
    ]);
}

#[test]
fn precedence() {
    assert_all(&[
        // or is looser than and: true or (false and false)
        ("true or false and false", true),
        ("true || false && false", true),
        // not is tighter than and: (not false) and false
        ("not false and false", false),
        ("!false && false", false),
        // xor sits between and and or
        ("true xor true and false", true),
        ("true ^^ true && false", true),
        ("true or true xor true", true),
        ("true || true ^^ true", true),
        ("(true or false) and false", false),
        ("true xor true xor true", true),
        ("not not true", true),
        (
            r#"http.host == "x" or ssl and http.request.method == "POST""#,
            true,
        ),
        (
            r#"(http.host == "x" or ssl) and http.request.method == "GET""#,
            false,
        ),
        ("ssl\n\tand\r\n( ip.src in 10.0.0.0/8 )", true),
        ("ssl and false or true", true),
        ("ssl and (false or true)", true),
        ("false", false),
    ]);
}

#[test]
fn absent_fields() {
    for (src, want) in [
        (r#"http.host == "a""#, false),
        (r#"http.host != "a""#, true),
        (r#"http.host contains """#, false),
        (r#"http.host matches ".*""#, false),
        (r#"http.host wildcard "*""#, false),
        (r#"http.host in {"a"}"#, false),
        (r#"http.host < "zzz""#, false),
        (r#"not (http.host == "a")"#, true),
        (r#"http.request.headers["x"] != "1""#, true),
        (r#"http.request.cookies["x"] == "1""#, false),
        (r#"http.user_agent contains "bot""#, false),
        ("ip.src in 0.0.0.0/0", false),
        ("ip.src != 1.2.3.4", true),
        ("ip.src == 1.2.3.4", false),
        ("ssl", false),
        ("not ssl", true),
        ("ssl == false", false),
        ("ssl != true", true),
        ("len(http.host) >= 0", false),
        ("len(http.host) != 0", true),
        (r#"starts_with(http.host, "")"#, false),
        (r#"not ends_with(http.host, "")"#, true),
        (r#"starts_with(http.host, "") != true"#, true),
        (r#"dns.qry.type == "A""#, false),
    ] {
        assert_eq!(eval_empty(src), want, "`{src}`");
    }
}
