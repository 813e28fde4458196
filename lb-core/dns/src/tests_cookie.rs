//! DNS cookies through the responder (`cookie.rs`): wire bytes in, wire bytes out.

use std::net::SocketAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption};
use hickory_proto::rr::{Name, RecordType};
use lb_core::config::Config;
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::regions_table::RegionsTable;

use super::cookie::{CookieSecret, Cookies, Presented, COOKIE_OPTION};
use super::test_responder::responder_for;
use super::Responder;

const FROM: &str = "192.0.2.9:5300";

fn responder(cookies: bool) -> Responder {
    let regions = RegionsTable::embedded().expect("regions");
    let text = r#"
[[pools]]
name = "eu"
origins = [{ name = "eu", address = "198.51.100.1" }]
[[zones]]
name = "example.test"
[[load_balancers]]
name = "www.example.test"
default_pools = ["eu"]
"#;
    let config = Config::parse("t.toml", text, &regions).expect("config");
    let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
    let cookies = cookies.then(|| Cookies {
        current: CookieSecret::derive(b"cluster key"),
        previous: None,
    });
    responder_for(config, snapshot).with_cookies(cookies)
}

fn query(cookie: &[u8]) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(7)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .add_query(Query::query(
            Name::from_ascii("www.example.test.").expect("name"),
            RecordType::A,
        ));
    let mut edns = Edns::new();
    edns.options_mut()
        .insert(EdnsOption::Unknown(COOKIE_OPTION, cookie.to_vec()));
    m.set_edns(edns);
    m.to_vec().expect("query")
}

fn ask(r: &Responder, bytes: &[u8]) -> Message {
    let mut out = Vec::new();
    let src: SocketAddr = FROM.parse().expect("addr");
    assert!(r.answer_datagram(bytes, src, &mut out), "no answer");
    Message::from_vec(&out).expect("our answer parses")
}

fn cookie_of(m: &Message) -> Option<Vec<u8>> {
    match m.extensions().as_ref()?.option(EdnsCode::Cookie)? {
        EdnsOption::Unknown(_, data) => Some(data.clone()),
        _ => None,
    }
}

fn ip() -> std::net::IpAddr {
    FROM.parse::<SocketAddr>().expect("addr").ip()
}

#[test]
fn a_client_cookie_gets_the_answer_and_a_server_cookie_that_checks_out() {
    let r = responder(true);
    let answer = ask(&r, &query(&[1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(answer.response_code(), ResponseCode::NoError);
    assert_eq!(answer.answers().len(), 1);
    let cookie = cookie_of(&answer).expect("a cookie");
    assert_eq!(cookie.len(), 24);
    assert_eq!(cookie[..8], [1, 2, 3, 4, 5, 6, 7, 8], "the client's echoed");
    let cookies = r.cookies.expect("cookies");
    assert_eq!(
        cookies.check(&cookie, ip(), super::cookie::now()),
        Presented::Client {
            client: [1, 2, 3, 4, 5, 6, 7, 8],
            proven: true
        }
    );
    // Sent back, it is proven, as the rate limiter sees it.
    assert!(matches!(
        r.cookie_of(&query(&cookie), ip()),
        Some(Presented::Client { proven: true, .. })
    ));
    assert!(matches!(
        r.cookie_of(&query(&[1; 8]), ip()),
        Some(Presented::Client { proven: false, .. })
    ));
}

#[test]
fn a_malformed_cookie_gets_formerr() {
    let r = responder(true);
    for len in [3, 12, 41] {
        let answer = ask(&r, &query(&vec![9; len]));
        assert_eq!(answer.response_code(), ResponseCode::FormErr, "{len}");
        assert!(answer.answers().is_empty());
    }
}

#[test]
fn badcookie_carries_a_fresh_server_cookie() {
    let r = responder(true);
    let mut out = Vec::new();
    assert!(r.badcookie_datagram(&query(&[5; 8]), ip(), [5; 8], &mut out));
    let m = Message::from_vec(&out).expect("parses");
    assert_eq!(m.response_code(), ResponseCode::BADCOOKIE);
    assert!(m.answers().is_empty());
    let cookie = cookie_of(&m).expect("a cookie");
    assert!(matches!(
        r.cookies
            .expect("cookies")
            .check(&cookie, ip(), super::cookie::now()),
        Presented::Client { proven: true, .. }
    ));
}

#[test]
fn without_cookies_the_option_is_ignored() {
    let r = responder(false);
    let answer = ask(&r, &query(&[1; 8]));
    assert_eq!(answer.response_code(), ResponseCode::NoError);
    assert_eq!(cookie_of(&answer), None);
    assert_eq!(r.cookie_of(&query(&[1; 8]), ip()), None);
}
