//! The typed syntax tree produced by the parser.
//!
//! Type checking happens while parsing, so every tree that exists is
//! well-typed: evaluation never has to report an error, it only answers
//! `true` or `false`.

use std::net::IpAddr;

use ipnet::IpNet;
use regex::Regex;

/// A plain string field of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StrField {
    Method,
    Host,
    Path,
    Query,
    UserAgent,
    RawCookie,
    Country,
    PopRegion,
    LbName,
    DnsQname,
    DnsQtype,
}

/// What a field name resolves to before any `[...]` access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldKind {
    Str(StrField),
    Ip,
    Ssl,
    HeaderMap,
    CookieMap,
}

/// Resolves a field name (including aliases) to its kind.
pub(crate) fn lookup_field(name: &str) -> Option<FieldKind> {
    use FieldKind::{CookieMap, HeaderMap, Ip, Ssl, Str};
    Some(match name {
        "http.request.method" => Str(StrField::Method),
        "http.host" => Str(StrField::Host),
        "http.request.uri.path" => Str(StrField::Path),
        "http.request.uri.query" => Str(StrField::Query),
        "http.user_agent" => Str(StrField::UserAgent),
        "http.cookie" => Str(StrField::RawCookie),
        "http.request.headers" => HeaderMap,
        "http.request.cookies" => CookieMap,
        "ssl" => Ssl,
        "ip.src" => Ip,
        "ip.src.country" | "ip.geoip.country" => Str(StrField::Country),
        "pop.region" | "cf.load_balancer.region" => Str(StrField::PopRegion),
        "cf.load_balancer.name" => Str(StrField::LbName),
        "dns.qry.name" => Str(StrField::DnsQname),
        "dns.qry.type" => Str(StrField::DnsQtype),
        _ => return None,
    })
}

/// Where a string value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    Field(StrField),
    /// `http.request.headers["name"][index]`; `name` is stored lowercase.
    Header {
        name: String,
        index: usize,
    },
    /// `http.request.cookies["name"][index]`.
    Cookie {
        name: String,
        index: usize,
    },
}

/// ASCII case mapping applied by `lower()` / `upper()`.
///
/// Cloudflare's `lower`/`upper` only map ASCII letters, which keeps byte
/// lengths unchanged; that lets us apply the mapping byte by byte while
/// comparing instead of allocating a transformed copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Case {
    #[default]
    AsIs,
    Lower,
    Upper,
}

impl Case {
    pub(crate) fn apply(self, b: u8) -> u8 {
        match self {
            Case::AsIs => b,
            Case::Lower => b.to_ascii_lowercase(),
            Case::Upper => b.to_ascii_uppercase(),
        }
    }
}

/// A string-typed value: a source plus the outermost case mapping.
///
/// `lower(upper(x))` collapses to `Case::Lower`, since only the outermost
/// mapping is observable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Text {
    pub source: Source,
    pub case: Case,
}

/// The left-hand side of a test: a field or a function call.
///
/// The five supported functions cannot nest arbitrarily (only `lower`/`upper`
/// return strings), so this flat shape covers every well-typed call.
#[derive(Debug, Clone)]
pub(crate) enum Operand {
    Text(Text),
    Ip,
    Ssl,
    Len(Text),
    StartsWith(Text, String),
    EndsWith(Text, String),
}

/// The type of an operand, used for type checking and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Str,
    Int,
    Ip,
    Bool,
}

impl Ty {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "an integer",
            Ty::Ip => "an IP address",
            Ty::Bool => "a boolean",
        }
    }
}

impl Operand {
    pub(crate) fn ty(&self) -> Ty {
        match self {
            Operand::Text(_) => Ty::Str,
            Operand::Ip => Ty::Ip,
            Operand::Len(_) => Ty::Int,
            Operand::Ssl | Operand::StartsWith(..) | Operand::EndsWith(..) => Ty::Bool,
        }
    }
}

/// Equality and ordering operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    /// Applies the operator to an already computed ordering.
    pub(crate) fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            CmpOp::Eq => ord == Equal,
            CmpOp::Ne => ord != Equal,
            CmpOp::Lt => ord == Less,
            CmpOp::Le => ord != Greater,
            CmpOp::Gt => ord == Greater,
            CmpOp::Ge => ord != Less,
        }
    }
}

/// One element of an IP set: a network (a plain address is a /32 or /128)
/// or an inclusive range of the same address family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IpItem {
    Net(IpNet),
    Range(IpAddr, IpAddr),
}

/// A `wildcard` / `strict wildcard` pattern, pre-split at its `*`s.
///
/// `segments` has one more element than the pattern has stars; the first
/// and last are anchored at the ends of the value, the ones in between are
/// found left to right, which is exact for `*`-only globs and linear-ish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wildcard {
    pub segments: Vec<String>,
    pub case_insensitive: bool,
}

/// A pattern of `matches` or `wildcard` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PatternError {
    #[error("`**` is not allowed in a wildcard pattern")]
    DoubleStar,
    #[error("a backslash in a wildcard pattern must be followed by `*` or `\\`")]
    LoneBackslash,
    #[error("regular expression is too large")]
    RegexTooLarge,
    /// The regex crate's diagnostic, condensed to its last line.
    #[error("invalid regular expression: {0}")]
    Regex(String),
}

impl Wildcard {
    /// Splits a pattern, honouring `\*` (literal star) and `\\` (literal
    /// backslash). Like Cloudflare, `**` and any other backslash are errors,
    /// so a pattern we accept means the same thing there.
    pub(crate) fn new(pattern: &str, case_insensitive: bool) -> Result<Self, PatternError> {
        let mut segments = vec![String::new()];
        let mut chars = pattern.chars();
        let mut prev_star = false;
        while let Some(c) = chars.next() {
            let star = c == '*';
            match c {
                '*' if prev_star => return Err(PatternError::DoubleStar),
                '*' => segments.push(String::new()),
                '\\' => match chars.next() {
                    Some(e @ ('*' | '\\')) => push(&mut segments, e),
                    _ => return Err(PatternError::LoneBackslash),
                },
                other => push(&mut segments, other),
            }
            prev_star = star;
        }
        Ok(Wildcard {
            segments,
            case_insensitive,
        })
    }
}

fn push(segments: &mut [String], c: char) {
    if let Some(last) = segments.last_mut() {
        last.push(c);
    }
}

/// The right-hand side of a comparison, already checked against the
/// operand's type.
#[derive(Debug, Clone)]
pub(crate) enum Test {
    StrCmp(CmpOp, String),
    Contains(String),
    Matches(Regex),
    Wildcard(Wildcard),
    /// Sorted and deduplicated so membership is a binary search.
    StrIn(Vec<String>),
    IntCmp(CmpOp, i64),
    /// Inclusive ranges; a single integer `n` is `(n, n)`.
    IntIn(Vec<(i64, i64)>),
    IpCmp(CmpOp, IpAddr),
    IpIn(Vec<IpItem>),
    BoolCmp(CmpOp, bool),
}

impl Test {
    /// The result when the operand's value is absent: only `!=` holds.
    pub(crate) fn absent(&self) -> bool {
        matches!(
            self,
            Test::StrCmp(CmpOp::Ne, _)
                | Test::IntCmp(CmpOp::Ne, _)
                | Test::IpCmp(CmpOp::Ne, _)
                | Test::BoolCmp(CmpOp::Ne, _)
        )
    }
}

/// A boolean expression.
///
/// `and`/`or`/`xor` chains are n-ary rather than binary so that a long flat
/// chain (`a or b or c ...`) does not turn into a deep tree whose evaluation
/// or drop could exhaust the stack; only parentheses, `not` and function
/// calls add depth, and the parser caps that.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Const(bool),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Xor(Vec<Expr>),
    Or(Vec<Expr>),
    /// A bare boolean operand used as a condition (`ssl`, `starts_with(..)`).
    Truthy(Operand),
    Test(Operand, Test),
}
