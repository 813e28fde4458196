//! Custom-rule conditions: a subset of Cloudflare's Rules language.
//!
//! Load-balancer rules select pools or override steering based on a
//! condition such as
//!
//! ```text
//! http.request.method == "POST" and starts_with(http.request.uri.path, "/api")
//! ```
//!
//! The syntax is a strict subset of Cloudflare's Rules language (wirefilter)
//! so that conditions copied from a Cloudflare load balancer parse unchanged
//! and mean the same thing; the few meshlb extensions are listed below.
//! Conditions are parsed and type-checked once, when configuration is loaded,
//! so that [`Condition::matches`] on the request path cannot fail, never
//! panics, and allocates nothing in the common case.
//!
//! # Grammar
//!
//! * **Fields** (see [`FIELDS`]): string fields `http.request.method`,
//!   `http.host`, `http.request.uri.path`, `http.request.uri.query`,
//!   `http.user_agent`, `http.cookie`, `ip.src.country`, `pop.region`
//!   (alias `cf.load_balancer.region`), `cf.load_balancer.name`,
//!   `dns.qry.name`, `dns.qry.type`; maps `http.request.headers["name"]` and
//!   `http.request.cookies["name"]` (first value, or `[N]` for the N-th);
//!   `ip.src` (IP address); `ssl` (boolean).
//! * **Literals**: `"quoted"` strings (escapes `\"` and `\\` only), raw
//!   strings `r"..."` / `r#"..."#`, integers, `true`/`false`, and unquoted
//!   IPv4/IPv6 addresses, CIDRs (`10.0.0.0/8`) and ranges
//!   (`10.0.0.1..10.0.0.9`).
//! * **Comparisons**: `==`/`eq`, `!=`/`ne`, `<`/`lt`, `<=`/`le`, `>`/`gt`,
//!   `>=`/`ge` (strings byte-wise, integers numerically), `contains`,
//!   `matches`/`~` (Rust `regex` syntax), `wildcard` (ASCII
//!   case-insensitive glob, `*` only) and `strict wildcard` (case-sensitive),
//!   `in { ... }` over strings, integers/ranges, or IPs/CIDRs/ranges.
//!   Sets are whitespace separated.
//! * **Functions**: `lower(s)`, `upper(s)` (ASCII only, as in Cloudflare),
//!   `len(s)` (byte length), `starts_with(s, "x")`, `ends_with(s, "x")`.
//! * **Logic**, tightest first: `not`/`!`, `and`/`&&`, `xor`/`^^`, `or`/`||`;
//!   parentheses group. A bare boolean (`ssl`, `starts_with(...)`, `true`)
//!   is a condition.
//!
//! Types are checked at parse time: `ip.src == "1.2.3.4"`, `ip.src contains
//! "1"` or `ssl > true` are errors pointing at the offending token.
//!
//! An absent value (a missing header, `ip.src` on a request without a known
//! client, ...) makes every test false except `!=`, which is true.
//!
//! meshlb extensions: `ip.src in 10.0.0.0/8` (a single CIDR, address or
//! range without braces), case-insensitive header names in
//! `http.request.headers[...]`, and IPv4-mapped IPv6 clients matching IPv4
//! rules.
//!
//! Limits: conditions up to 16 KiB, nesting (parentheses, `not`, function
//! calls) up to 32 levels, regexes up to 1 MiB compiled.

mod ast;
mod eval;
mod input;
mod lex;
mod parse;

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

pub use input::RuleInput;

/// A parsed, type-checked condition.
///
/// Cheap to clone (regexes are reference counted) and `Send + Sync`, so one
/// parsed configuration can be shared by all worker threads.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    expr: ast::Expr,
}

impl Condition {
    /// Parses and type-checks `src`.
    ///
    /// Errors carry the 1-based column (in characters) of the offending
    /// token, so configuration errors can be reported precisely.
    pub fn parse(src: &str) -> Result<Condition, RuleParseError> {
        match parse::parse(src) {
            Ok(expr) => Ok(Condition {
                source: src.to_owned(),
                expr,
            }),
            Err(failure) => Err(RuleParseError {
                column: column_of(src, failure.offset),
                message: failure
                    .message
                    .unwrap_or_else(|| "unexpected input".to_owned()),
            }),
        }
    }

    /// Evaluates the condition against one request.
    ///
    /// Never panics; a missing field compares as absent (`==` is false,
    /// `!=` is true).
    pub fn matches(&self, input: &RuleInput<'_>) -> bool {
        self.expr.eval(input)
    }

    /// The text the condition was parsed from, for logs and round-tripping
    /// configuration.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl FromStr for Condition {
    type Err = RuleParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Condition::parse(s)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Why a condition was rejected, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct RuleParseError {
    /// 1-based column of the offending token, counted in characters (not
    /// bytes) so it lines up with what an editor shows.
    pub column: usize,
    /// What was wrong, phrased for the person who wrote the condition.
    pub message: String,
}

/// The list of field names, for docs and for error hints.
///
/// Each entry is `(name, type, description)`.
pub const FIELDS: &[(&str, &str, &str)] = &[
    ("http.request.method", "String", "HTTP method, e.g. \"GET\""),
    ("http.host", "String", "Host header as sent by the client"),
    ("http.request.uri.path", "String", "URI path, e.g. \"/api/v1\""),
    ("http.request.uri.query", "String", "query string without the leading '?'"),
    ("http.user_agent", "String", "the User-Agent header"),
    ("http.cookie", "String", "the raw Cookie header"),
    ("http.request.headers", "Map<String>", "request header by name, e.g. http.request.headers[\"x-canary\"]; names are case-insensitive"),
    ("http.request.cookies", "Map<String>", "cookie by name, e.g. http.request.cookies[\"session\"]"),
    ("ssl", "Boolean", "whether the client connection uses TLS"),
    ("ip.src", "IP address", "client IP address"),
    ("ip.src.country", "String", "client country, ISO 3166-1 alpha-2 uppercase, e.g. \"DE\""),
    ("ip.geoip.country", "String", "alias of ip.src.country"),
    ("pop.region", "String", "region of the point of presence handling the request, e.g. \"WEU\""),
    ("cf.load_balancer.region", "String", "alias of pop.region"),
    ("cf.load_balancer.name", "String", "name of the load balancer evaluating the rule"),
    ("dns.qry.name", "String", "queried DNS name"),
    ("dns.qry.type", "String", "queried DNS record type, e.g. \"AAAA\""),
];

/// Converts a byte offset into a 1-based character column. Robust to
/// offsets past the end or inside a character, so it can never panic.
fn column_of(src: &str, offset: usize) -> usize {
    src.char_indices().take_while(|(i, _)| *i < offset).count() + 1
}

/// "unknown field" message with the closest known names as hints.
fn unknown_field_message(name: &str) -> String {
    // Allow roughly one typo per three characters, at most three, so that
    // short names like `host` do not "match" unrelated short fields.
    let limit = (name.chars().count() / 3).clamp(1, 3);
    let mut close: Vec<(usize, &str)> = FIELDS
        .iter()
        .map(|(field, _, _)| (edit_distance(name, field), *field))
        .filter(|(d, field)| *d <= limit || field.ends_with(&format!(".{name}")))
        .collect();
    close.sort();
    let names: Vec<String> = close
        .iter()
        .take(3)
        .map(|(_, f)| format!("`{f}`"))
        .collect();
    match names.as_slice() {
        [] => {
            let all: Vec<&str> = FIELDS.iter().map(|(f, _, _)| *f).collect();
            format!(
                "unknown field `{name}`; supported fields: {}",
                all.join(", ")
            )
        }
        [one] => format!("unknown field `{name}`; did you mean {one}?"),
        many => format!(
            "unknown field `{name}`; did you mean one of {}?",
            many.join(", ")
        ),
    }
}

/// Levenshtein distance over characters (parse-time only).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let left = row.get(j).copied().unwrap_or(usize::MAX);
            let value = (diag + usize::from(ca != *cb))
                .min(up.saturating_add(1))
                .min(left.saturating_add(1));
            diag = up;
            if let Some(cell) = row.get_mut(j + 1) {
                *cell = value;
            }
        }
    }
    row.last().copied().unwrap_or(0)
}
