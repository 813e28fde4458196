//! Property tests: parsing and matching never panic, whatever the input.

use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use proptest::sample::Index;

use super::*;

/// Valid conditions covering every operator, used as seeds for mutation.
const EXAMPLES: &[&str] = &[
    r#"http.request.method == "POST" and starts_with(http.request.uri.path, "/api")"#,
    "ip.src in 10.0.0.0/8",
    "ip.src in {192.0.2.0/24 2001:db8::/32 198.51.100.7}",
    r#"pop.region == "WEU""#,
    r#"cf.load_balancer.region in {"WEU" "EEU"}"#,
    r#"http.request.headers["X-Canary"] == "1" or http.request.cookies["beta"] eq "yes""#,
    r#"not (http.host contains "internal") && ssl"#,
    r#"http.request.uri.path matches "^/v[0-9]+/""#,
    r#"lower(http.request.headers["user-agent"]) contains "bot""#,
    r#"http.host wildcard "*.example.com""#,
    r#"dns.qry.type == "AAAA""#,
    r#"ip.src.country in {"DE" "FR"}"#,
    r#"lower(http.host) wildcard "*.EXAMPLE.*" ^^ ssl"#,
    "len(http.request.uri.query) in {0..3 10} || len(http.host) >= 4",
    r#"ends_with(upper(http.cookie), "ABC") xor !ssl"#,
    r#"http.request.headers["x-canary"][1] != "1""#,
    r#"http.user_agent strict wildcard "*Bot*\\*""#,
    "ip.src in {::/0 0.0.0.0..255.255.255.255} and ip.src != ::ffff:1.2.3.4",
    r#"http.request.uri.query ge "a" or http.request.uri.query lt "b""#,
    r##"dns.qry.name ~ r#"\.example\.com$"#"##,
    r#"ssl != false and true or (false xor upper(dns.qry.name) le "Z")"#,
    r#"http.request.cookies["session"] in {"a" "b"} or cf.load_balancer.name gt "m""#,
];

/// Fragments spliced into examples to reach error paths.
const PIECES: &[&str] = &[
    "\"",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    " ",
    "*",
    "\\",
    "r#\"",
    "\"#",
    "..",
    "/",
    "::",
    "not ",
    " and ",
    " or ",
    "==",
    "!",
    "0",
    "99999999999999999999999",
    "ü",
    "\n",
    "http.host",
    "ip.src",
    "lower(",
    ",",
    " in ",
    "~",
    "#",
    "1.2.3.4/",
    "strict ",
    "**",
    "[0]",
    "len(",
    "ssl",
];

/// Owned request data for [`RuleInput`] to borrow.
#[derive(Debug, Clone)]
struct Req {
    strs: [Option<String>; 9],
    headers: Vec<(String, String)>,
    cookies: Vec<(String, String)>,
    tls: Option<bool>,
    ip: Option<IpAddr>,
}

impl Req {
    fn input(&self) -> RuleInput<'_> {
        let s = |n: usize| self.strs.get(n).and_then(|v| v.as_deref());
        RuleInput {
            method: s(0),
            host: s(1),
            path: s(2),
            query: s(3),
            headers: &self.headers,
            cookies: &self.cookies,
            tls: self.tls,
            client_ip: self.ip,
            country: s(4),
            pop_region: s(5),
            lb_name: s(6),
            dns_qname: s(7),
            dns_qtype: s(8),
        }
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9./*:\\\\-]{0,12}", any::<String>()]
}

fn pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = prop_oneof![
        Just("user-agent".to_owned()),
        Just("cookie".to_owned()),
        Just("x-canary".to_owned()),
        Just("session".to_owned()),
        "[A-Za-z-]{1,8}",
    ];
    prop::collection::vec((name, text()), 0..5)
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u16; 8]>().prop_map(IpAddr::from),
        any::<[u8; 4]>().prop_map(|o| IpAddr::V6(Ipv4Addr::from(o).to_ipv6_mapped())),
    ]
}

fn req() -> impl Strategy<Value = Req> {
    let strs = prop::array::uniform9(prop::option::of(text()));
    let rest = (
        pairs(),
        pairs(),
        prop::option::of(any::<bool>()),
        prop::option::of(ip()),
    );
    (strs, rest).prop_map(|(strs, (headers, cookies, tls, ip))| Req {
        strs,
        headers,
        cookies,
        tls,
        ip,
    })
}

/// Checks the error contract: a column inside (or just past) the source.
fn check_parse(src: &str) -> Option<Condition> {
    match Condition::parse(src) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                e.column >= 1 && e.column <= src.chars().count() + 1,
                "{src:?}: {e}"
            );
            assert!(!e.message.is_empty());
            None
        }
    }
}

#[test]
fn examples_parse() {
    for src in EXAMPLES {
        assert!(
            Condition::parse(src).is_ok(),
            "{src}: {:?}",
            Condition::parse(src).err()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_any_string(src in any::<String>()) {
        check_parse(&src);
    }

    #[test]
    fn parse_never_panics_on_token_soup(
        src in "([a-z_.()\\[\\]{}\"#r*\\\\=!<>~&|^0-9:/, \n-]|and|or|not|in|ip\\.src|http\\.host){0,40}"
    ) {
        check_parse(&src);
    }

    #[test]
    fn mutated_examples_never_panic(
        seed in 0..EXAMPLES.len(),
        edits in prop::collection::vec((any::<Index>(), 0u8..3, prop::sample::select(PIECES)), 1..4),
        request in req(),
    ) {
        let mut chars: Vec<char> = EXAMPLES.get(seed).copied().unwrap_or("").chars().collect();
        for (at, kind, piece) in edits {
            let at = at.index(chars.len() + 1);
            match kind {
                0 => { chars.splice(at..at, piece.chars()); }
                1 => { if at < chars.len() { chars.remove(at); } }
                _ => { let end = (at + 1).min(chars.len()); chars.splice(at..end, piece.chars()); }
            }
        }
        let src: String = chars.into_iter().collect();
        if let Some(c) = check_parse(&src) {
            let _ = c.matches(&request.input());
            let _ = c.matches(&RuleInput::default());
        }
    }

    #[test]
    fn matching_never_panics_and_not_negates(request in req()) {
        let input = request.input();
        for src in EXAMPLES {
            let (Ok(c), Ok(n)) = (Condition::parse(src), Condition::parse(&format!("not ({src})")))
            else {
                return Err(TestCaseError::fail(format!("example does not parse: {src}")));
            };
            prop_assert_eq!(n.matches(&input), !c.matches(&input), "{}", src);
        }
    }
}
