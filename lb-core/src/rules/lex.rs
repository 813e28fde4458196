//! Tokens and literals for the condition grammar, plus the error type.
//!
//! Kept apart from `parse.rs` (the expression grammar) so each file stays
//! small. Every failure that can reach the user is a "cut" [`Failure`]
//! carrying its own byte offset and message; backtracking errors only steer
//! `opt`/`alt`.

use std::net::IpAddr;

use ipnet::IpNet;
use regex::{Regex, RegexBuilder};
use winnow::ascii::{digit1, multispace0};
use winnow::combinator::{alt, delimited, not, opt, terminated};
use winnow::error::{ErrMode, ModalResult, ParserError};
use winnow::stream::{LocatingSlice, Location};
use winnow::token::{any, literal, one_of, take_till, take_until, take_while};
use winnow::Parser;

use super::ast::{IpItem, PatternError};
use super::parse::MAX_DEPTH;

/// Compiled-size limit for one regex, so a hostile pattern cannot eat memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub(super) type In<'a> = LocatingSlice<&'a str>;
pub(super) type PResult<T> = ModalResult<T, Failure>;

/// A parse error: byte offset into the source plus a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub offset: usize,
    pub message: Option<String>,
}

impl<'a> ParserError<In<'a>> for Failure {
    type Inner = Self;

    fn from_input(input: &In<'a>) -> Self {
        Failure {
            offset: input.current_token_start(),
            message: None,
        }
    }

    /// winnow's default panics in debug builds; input is untrusted, so never.
    fn assert(input: &In<'a>, _message: &'static str) -> Self {
        Self::from_input(input)
    }

    /// Keep the error that got furthest, preferring one with a message.
    fn or(self, other: Self) -> Self {
        let better =
            other.offset > self.offset || (other.offset == self.offset && self.message.is_none());
        if better {
            other
        } else {
            self
        }
    }

    fn into_inner(self) -> Result<Self, Self> {
        Ok(self)
    }
}

pub(super) fn fail<T>(offset: usize, message: impl Into<String>) -> PResult<T> {
    Err(ErrMode::Cut(Failure {
        offset,
        message: Some(message.into()),
    }))
}

pub(super) fn pos(i: &In<'_>) -> usize {
    i.current_token_start()
}

/// Any whitespace, newlines included, so conditions can be wrapped over
/// several lines in YAML/TOML configuration.
pub(super) fn ws(i: &mut In<'_>) -> PResult<()> {
    multispace0.void().parse_next(i)
}

pub(super) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A keyword that must not run on into a longer identifier (`in` ≠ `index`).
pub(super) fn kw<'a>(word: &'static str) -> impl Parser<In<'a>, (), ErrMode<Failure>> {
    terminated(
        literal(word),
        not(one_of(|c: char| is_ident_char(c) || c == '.')),
    )
    .void()
}

pub(super) fn ident<'a>(i: &mut In<'a>) -> PResult<&'a str> {
    (
        one_of(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(0.., |c: char| is_ident_char(c) || c == '.'),
    )
        .take()
        .parse_next(i)
}

/// Describes the next token for "expected X, found Y" messages.
pub(super) fn found(i: &In<'_>) -> String {
    let rest: &str = i;
    if rest.is_empty() {
        return "end of input".into();
    }
    let token: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace())
        .take(24)
        .collect();
    format!("`{token}`")
}

/// Text consumed since `before` was taken from the stream.
pub(super) fn taken<'a>(before: &'a str, i: &In<'a>) -> &'a str {
    let used = before.len().saturating_sub(i.len());
    before.get(..used).unwrap_or("")
}

/// Enters one more nesting level (parenthesis, `not`, function call), or
/// fails once [`MAX_DEPTH`] is reached so recursion stays bounded.
pub(super) fn nest(offset: usize, depth: usize) -> PResult<usize> {
    if depth >= MAX_DEPTH {
        fail(
            offset,
            format!("condition is nested more than {MAX_DEPTH} levels deep"),
        )
    } else {
        Ok(depth + 1)
    }
}

/// Runs a value parser, turning "nothing there" into a typed message.
pub(super) fn want<'a, T>(
    i: &mut In<'a>,
    mut value: impl Parser<In<'a>, T, ErrMode<Failure>>,
    what: &str,
    label: &str,
) -> PResult<T> {
    match opt(|i: &mut In<'a>| value.parse_next(i)).parse_next(i)? {
        Some(v) => Ok(v),
        None => {
            let msg = format!(
                "expected {what} to compare with {label}, found {}",
                found(i)
            );
            fail(pos(i), msg)
        }
    }
}

/// `{ item item ... }`, whitespace separated, at least one item.
pub(super) fn set<'a, T>(
    i: &mut In<'a>,
    mut item: impl Parser<In<'a>, T, ErrMode<Failure>>,
    what: &str,
) -> PResult<Vec<T>> {
    let open = pos(i);
    if opt('{').parse_next(i)?.is_none() {
        let msg = format!("expected a set `{{...}}` after `in`, found {}", found(i));
        return fail(open, msg);
    }
    let mut items = Vec::new();
    loop {
        ws(i)?;
        if opt('}').parse_next(i)?.is_some() {
            break;
        }
        if i.is_empty() {
            return fail(open, "unterminated set; expected `}`");
        }
        match opt(|i: &mut In<'a>| item.parse_next(i)).parse_next(i)? {
            Some(v) => items.push(v),
            None => {
                let msg = format!("expected {what} or `}}` in set, found {}", found(i));
                return fail(pos(i), msg);
            }
        }
    }
    if items.is_empty() {
        return fail(open, "a set must contain at least one value");
    }
    Ok(items)
}

/// `"..."` (escapes `\"` and `\\`) or a raw string `r"..."` / `r#"..."#`.
pub(super) fn string_lit(i: &mut In<'_>) -> PResult<String> {
    alt((quoted, raw)).parse_next(i)
}

fn quoted(i: &mut In<'_>) -> PResult<String> {
    let start = pos(i);
    '"'.parse_next(i)?;
    let mut out = String::new();
    loop {
        out.push_str(take_till(0.., ['"', '\\']).parse_next(i)?);
        let at = pos(i);
        match opt(any).parse_next(i)? {
            Some('"') => return Ok(out),
            None => return fail(start, "unterminated string"),
            Some(_) => match opt(any).parse_next(i)? {
                Some(c @ ('"' | '\\')) => out.push(c),
                Some(c) => {
                    let hint = "only `\\\"` and `\\\\` are allowed; use r\"...\" for regexes";
                    return fail(at, format!("invalid escape `\\{c}`; {hint}"));
                }
                None => return fail(start, "unterminated string"),
            },
        }
    }
}

fn raw(i: &mut In<'_>) -> PResult<String> {
    let start = pos(i);
    let hashes = delimited('r', take_while(0.., '#'), '"').parse_next(i)?;
    let close = format!("\"{hashes}");
    let body = opt(terminated(take_until(0.., close.as_str()), close.as_str())).parse_next(i)?;
    match body {
        Some(body) => Ok(body.to_owned()),
        None => fail(start, "unterminated raw string"),
    }
}

pub(super) fn int_lit(i: &mut In<'_>) -> PResult<i64> {
    let start = pos(i);
    let digits = digit1.parse_next(i)?;
    digits
        .parse()
        .or_else(|_| fail(start, "integer is out of range"))
}

pub(super) fn int_item(i: &mut In<'_>) -> PResult<(i64, i64)> {
    let start = pos(i);
    let lo = int_lit(i)?;
    if opt("..").parse_next(i)?.is_none() {
        return Ok((lo, lo));
    }
    let Some(hi) = opt(int_lit).parse_next(i)? else {
        return fail(pos(i), "expected an integer after `..`");
    };
    if lo > hi {
        return fail(start, "range start is greater than its end");
    }
    Ok((lo, hi))
}

pub(super) fn bool_lit(i: &mut In<'_>) -> PResult<bool> {
    alt((kw("true").value(true), kw("false").value(false))).parse_next(i)
}

/// An address, `addr/len` CIDR, or `lo..hi` range (all unquoted).
pub(super) fn ip_item(i: &mut In<'_>) -> PResult<IpItem> {
    let start = pos(i);
    let token =
        take_while(1.., |c: char| c.is_ascii_hexdigit() || c == ':' || c == '.').parse_next(i)?;
    if let Some((lo, hi)) = token.split_once("..") {
        let lo = parse_ip(lo, start)?.to_canonical();
        let hi = parse_ip(hi, start)?.to_canonical();
        if lo.is_ipv4() != hi.is_ipv4() {
            return fail(start, "both ends of an IP range must be the same family");
        }
        if lo > hi {
            return fail(start, "range start is greater than its end");
        }
        return Ok(IpItem::Range(lo, hi));
    }
    let addr = parse_ip(token, start)?;
    if opt('/').parse_next(i)?.is_none() {
        return Ok(IpItem::Net(IpNet::from(addr.to_canonical())));
    }
    let len_at = pos(i);
    let len = opt(digit1)
        .parse_next(i)?
        .and_then(|d| d.parse::<u8>().ok());
    match len.map(|len| IpNet::new(addr, len)) {
        Some(Ok(net)) => Ok(IpItem::Net(net.trunc())),
        _ => fail(len_at, format!("invalid prefix length for `{addr}`")),
    }
}

fn parse_ip(text: &str, offset: usize) -> PResult<IpAddr> {
    match text.parse::<IpAddr>() {
        Ok(addr) => Ok(addr),
        Err(_) => fail(offset, format!("invalid IP address `{text}`")),
    }
}

/// Compiles a `matches` pattern with size limits, condensing the regex
/// crate's multi-line diagnostics into one line.
pub(super) fn compile_regex(pattern: &str) -> Result<Regex, PatternError> {
    let built = RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(2 * REGEX_SIZE_LIMIT)
        .nest_limit(64)
        .build();
    built.map_err(|e| match e {
        regex::Error::CompiledTooBig(_) => PatternError::RegexTooLarge,
        other => {
            let text = other.to_string();
            let detail = text
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("syntax error");
            PatternError::Regex(detail.trim_start_matches("error: ").to_string())
        }
    })
}
