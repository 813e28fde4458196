//! The request-side data a condition is evaluated against.

use std::net::IpAddr;

/// Everything a condition can look at.
///
/// Every field borrows from the request (or from data the caller already
/// owns) so that building a `RuleInput` and evaluating a condition against it
/// allocates nothing on the hot path. Each `Option` models a value that may
/// legitimately be missing (e.g. `dns_qname` on an HTTP request); a missing
/// value "compares as absent": `==` and every other test is false, `!=` is
/// true.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuleInput<'a> {
    /// `http.request.method`, e.g. `"GET"`.
    pub method: Option<&'a str>,
    /// `http.host`: the Host header / `:authority`, as sent.
    pub host: Option<&'a str>,
    /// `http.request.uri.path`, e.g. `"/api/v1/users"`.
    pub path: Option<&'a str>,
    /// `http.request.uri.query`, without the leading `?`.
    pub query: Option<&'a str>,
    /// Request headers in arrival order; names should be lowercase.
    ///
    /// Used by `http.request.headers["name"]` (name matched
    /// case-insensitively, first value wins unless an index is given),
    /// `http.user_agent` (the `user-agent` header) and `http.cookie` (the raw
    /// `cookie` header). `http.cookie` reads the header instead of re-joining
    /// `cookies`, because joining would allocate on every evaluation.
    pub headers: &'a [(String, String)],
    /// Parsed request cookies in arrival order, for
    /// `http.request.cookies["name"]` (name matched case-sensitively, as
    /// cookie names are).
    pub cookies: &'a [(String, String)],
    /// `ssl`: whether the client connection is encrypted.
    pub tls: Option<bool>,
    /// `ip.src`: the client address. IPv4-mapped IPv6 addresses are treated
    /// as IPv4, so dual-stack listeners match IPv4 rules.
    pub client_ip: Option<IpAddr>,
    /// `ip.src.country`: ISO 3166-1 alpha-2 code, uppercase (e.g. `"DE"`).
    pub country: Option<&'a str>,
    /// `pop.region` (alias `cf.load_balancer.region`), e.g. `"WEU"`.
    pub pop_region: Option<&'a str>,
    /// `cf.load_balancer.name`: the load balancer evaluating the rule.
    pub lb_name: Option<&'a str>,
    /// `dns.qry.name`: the queried name, for DNS-steered load balancers.
    pub dns_qname: Option<&'a str>,
    /// `dns.qry.type`: the query type mnemonic, e.g. `"A"` or `"AAAA"`.
    pub dns_qtype: Option<&'a str>,
}

impl<'a> RuleInput<'a> {
    /// The `index`-th value of header `name` (ASCII case-insensitive).
    pub(crate) fn header(&self, name: &str, index: usize) -> Option<&'a str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .nth(index)
            .map(|(_, v)| v.as_str())
    }

    /// The `index`-th value of cookie `name` (case-sensitive).
    pub(crate) fn cookie(&self, name: &str, index: usize) -> Option<&'a str> {
        self.cookies
            .iter()
            .filter(|(k, _)| k == name)
            .nth(index)
            .map(|(_, v)| v.as_str())
    }
}
