//! The `winnow` grammar: text to a type-checked [`Expr`].
//!
//! The grammar is type-directed: once the left-hand side of a comparison is
//! known, only values of its type are accepted on the right, so type errors
//! point at the offending token. Precedence climbing is spelled out as one
//! function per level (`or` < `xor` < `and` < `not`), matching Cloudflare.

use winnow::ascii::digit1;
use winnow::combinator::{alt, delimited, not, opt, peek, preceded, terminated};
use winnow::error::ErrMode;
use winnow::stream::{LocatingSlice, Location, Stream};
use winnow::token::{literal, take_while};
use winnow::Parser;

use super::ast::{
    lookup_field, Case, CmpOp, Expr, FieldKind, IpItem, Operand, Source, Test, Text, Ty, Wildcard,
};
use super::lex::{
    bool_lit, compile_regex, fail, found, ident, int_item, int_lit, ip_item, is_ident_char, kw,
    nest, pos, set, string_lit, taken, want, ws, Failure, In, PResult,
};

/// Longest accepted condition, in bytes. Cloudflare caps expressions at 4096
/// characters; we allow more for long IP sets but still bound parse work.
pub(crate) const MAX_SOURCE_LEN: usize = 16 * 1024;
/// Deepest nesting of parentheses, `not` and function calls. Bounding it
/// keeps the recursive-descent parser and the evaluator off the stack limit.
pub(crate) const MAX_DEPTH: usize = 32;

/// Parses a whole condition; `Err` carries the byte offset of the problem.
pub(crate) fn parse(src: &str) -> Result<Expr, Failure> {
    if src.len() > MAX_SOURCE_LEN {
        return Err(Failure {
            offset: MAX_SOURCE_LEN,
            message: Some(format!("condition is longer than {MAX_SOURCE_LEN} bytes")),
        });
    }
    let mut input = LocatingSlice::new(src);
    let top = |i: &mut In<'_>| -> PResult<Expr> {
        ws(i)?;
        let expr = or_expr(i, 0)?;
        ws(i)?;
        Ok(expr)
    };
    match top(&mut input) {
        Ok(expr) if input.is_empty() => Ok(expr),
        Ok(_) => Err(Failure {
            offset: input.current_token_start(),
            message: Some("unexpected trailing input".into()),
        }),
        Err(ErrMode::Backtrack(f) | ErrMode::Cut(f)) => Err(Failure {
            message: Some(f.message.unwrap_or_else(|| "unexpected input".into())),
            ..f
        }),
        Err(ErrMode::Incomplete(_)) => Err(Failure {
            offset: src.len(),
            message: Some("unexpected end of input".into()),
        }),
    }
}

type Level = for<'a> fn(&mut In<'a>, usize) -> PResult<Expr>;

/// One precedence level: `next (op next)*`, collected into an n-ary node.
fn chain(
    i: &mut In<'_>,
    depth: usize,
    (sym, word): (&'static str, &'static str),
    next: Level,
    make: fn(Vec<Expr>) -> Expr,
) -> PResult<Expr> {
    let first = next(i, depth)?;
    let mut items = Vec::new();
    while opt(preceded(ws, alt((literal(sym).void(), kw(word)))))
        .parse_next(i)?
        .is_some()
    {
        ws(i)?;
        items.push(next(i, depth)?);
    }
    if items.is_empty() {
        return Ok(first);
    }
    items.insert(0, first);
    Ok(make(items))
}

// Precedence, loosest first: or, xor, and, not.
fn or_expr(i: &mut In<'_>, depth: usize) -> PResult<Expr> {
    chain(i, depth, ("||", "or"), xor_expr, Expr::Or)
}

fn xor_expr(i: &mut In<'_>, depth: usize) -> PResult<Expr> {
    chain(i, depth, ("^^", "xor"), and_expr, Expr::Xor)
}

fn and_expr(i: &mut In<'_>, depth: usize) -> PResult<Expr> {
    chain(i, depth, ("&&", "and"), unary, Expr::And)
}

fn unary(i: &mut In<'_>, depth: usize) -> PResult<Expr> {
    ws(i)?;
    let start = pos(i);
    let bang = terminated("!", not("=")).void();
    if opt(alt((kw("not"), bang))).parse_next(i)?.is_some() {
        let depth = nest(start, depth)?;
        ws(i)?;
        return Ok(Expr::Not(Box::new(unary(i, depth)?)));
    }
    primary(i, depth)
}

fn primary(i: &mut In<'_>, depth: usize) -> PResult<Expr> {
    let start = pos(i);
    if opt('(').parse_next(i)?.is_some() {
        let depth = nest(start, depth)?;
        ws(i)?;
        let expr = or_expr(i, depth)?;
        ws(i)?;
        if opt(')').parse_next(i)?.is_none() {
            return fail(pos(i), format!("expected `)`, found {}", found(i)));
        }
        return Ok(expr);
    }
    if opt(kw("true")).parse_next(i)?.is_some() {
        return Ok(Expr::Const(true));
    }
    if opt(kw("false")).parse_next(i)?.is_some() {
        return Ok(Expr::Const(false));
    }
    match operand(i, depth)? {
        Some((operand, label)) => comparison(i, operand, &label),
        None => fail(start, format!("expected a condition, found {}", found(i))),
    }
}

/// A field or function call, with a label such as "field `http.host`".
fn operand(i: &mut In<'_>, depth: usize) -> PResult<Option<(Operand, String)>> {
    let start = pos(i);
    let before: &str = i;
    let Some(name) = opt(ident).parse_next(i)? else {
        return Ok(None);
    };
    let is_call = opt(peek(preceded(ws, '('))).parse_next(i)?.is_some();
    let operand = if is_call {
        call(i, name, start, depth)?
    } else {
        field(i, name, start)?
    };
    let text = taken(before, i);
    let label = if is_call {
        format!("`{text}`")
    } else {
        format!("field `{text}`")
    };
    Ok(Some((operand, label)))
}

const FUNCTIONS: &str = "lower, upper, len, starts_with, ends_with";

fn call(i: &mut In<'_>, name: &str, start: usize, depth: usize) -> PResult<Operand> {
    if !matches!(
        name,
        "lower" | "upper" | "len" | "starts_with" | "ends_with"
    ) {
        let msg = format!("unknown function `{name}`; supported functions: {FUNCTIONS}");
        return fail(start, msg);
    }
    let depth = nest(start, depth)?;
    (ws, '(', ws).parse_next(i)?;
    let arg_start = pos(i);
    let Some((arg, arg_label)) = operand(i, depth)? else {
        let msg = format!(
            "expected a field as the argument of `{name}`, found {}",
            found(i)
        );
        return fail(arg_start, msg);
    };
    let Operand::Text(text) = arg else {
        let ty = arg.ty().describe();
        let msg = format!("`{name}` expects a string, but {arg_label} is {ty}");
        return fail(arg_start, msg);
    };
    ws(i)?;
    let result = match name {
        "lower" => Operand::Text(Text {
            case: Case::Lower,
            ..text
        }),
        "upper" => Operand::Text(Text {
            case: Case::Upper,
            ..text
        }),
        "len" => Operand::Len(text),
        _ => {
            if opt(',').parse_next(i)?.is_none() {
                let msg = format!("expected `,` and a second argument to `{name}`");
                return fail(pos(i), format!("{msg}, found {}", found(i)));
            }
            ws(i)?;
            let Some(lit) = opt(string_lit).parse_next(i)? else {
                let msg = format!("expected a string as the second argument of `{name}`");
                return fail(pos(i), format!("{msg}, found {}", found(i)));
            };
            ws(i)?;
            if name == "starts_with" {
                Operand::StartsWith(text, lit)
            } else {
                Operand::EndsWith(text, lit)
            }
        }
    };
    if opt(')').parse_next(i)?.is_none() {
        let msg = format!("expected `)` to close `{name}(`, found {}", found(i));
        return fail(pos(i), msg);
    }
    Ok(result)
}

fn field(i: &mut In<'_>, name: &str, start: usize) -> PResult<Operand> {
    let Some(kind) = lookup_field(name) else {
        return fail(start, super::unknown_field_message(name));
    };
    let text = |source| {
        Operand::Text(Text {
            source,
            case: Case::AsIs,
        })
    };
    Ok(match kind {
        FieldKind::Str(f) => text(Source::Field(f)),
        FieldKind::Ip => Operand::Ip,
        FieldKind::Ssl => Operand::Ssl,
        FieldKind::HeaderMap | FieldKind::CookieMap => {
            ws(i)?;
            if opt('[').parse_next(i)?.is_none() {
                let msg = format!("`{name}` is a map; write `{name}[\"name\"]`");
                return fail(pos(i), msg);
            }
            ws(i)?;
            let Some(key) = opt(string_lit).parse_next(i)? else {
                let msg = format!(
                    "expected a quoted name in `{name}[...]`, found {}",
                    found(i)
                );
                return fail(pos(i), msg);
            };
            ws(i)?;
            if opt(']').parse_next(i)?.is_none() {
                return fail(pos(i), format!("expected `]`, found {}", found(i)));
            }
            let index = array_index(i)?;
            if kind == FieldKind::HeaderMap {
                text(Source::Header {
                    name: key.to_ascii_lowercase(),
                    index,
                })
            } else {
                text(Source::Cookie { name: key, index })
            }
        }
    })
}

/// The optional `[N]` after a map lookup (Cloudflare maps hold arrays).
fn array_index(i: &mut In<'_>) -> PResult<usize> {
    let start = pos(i);
    if opt('[').parse_next(i)?.is_none() {
        return Ok(0);
    }
    let index = delimited(ws, opt(digit1), ws).parse_next(i)?;
    match (index.map(str::parse::<usize>), opt(']').parse_next(i)?) {
        (Some(Ok(n)), Some(_)) => Ok(n),
        _ => fail(
            start,
            "only a numeric index such as `[0]` is supported here",
        ),
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Cmp(CmpOp),
    Contains,
    Matches,
    In,
    Wildcard { strict: bool },
}

fn operator(i: &mut In<'_>) -> PResult<Option<Op>> {
    let symbol = alt((
        "==".value(Op::Cmp(CmpOp::Eq)),
        "!=".value(Op::Cmp(CmpOp::Ne)),
        "<=".value(Op::Cmp(CmpOp::Le)),
        ">=".value(Op::Cmp(CmpOp::Ge)),
        "<".value(Op::Cmp(CmpOp::Lt)),
        ">".value(Op::Cmp(CmpOp::Gt)),
        "~".value(Op::Matches),
    ));
    if let Some(op) = opt(symbol).parse_next(i)? {
        return Ok(Some(op));
    }
    let checkpoint = i.checkpoint();
    let word = opt(take_while(1.., is_ident_char)).parse_next(i)?;
    let op = match word.unwrap_or("") {
        "eq" => Op::Cmp(CmpOp::Eq),
        "ne" => Op::Cmp(CmpOp::Ne),
        "lt" => Op::Cmp(CmpOp::Lt),
        "le" => Op::Cmp(CmpOp::Le),
        "gt" => Op::Cmp(CmpOp::Gt),
        "ge" => Op::Cmp(CmpOp::Ge),
        "contains" => Op::Contains,
        "matches" => Op::Matches,
        "in" => Op::In,
        "wildcard" => Op::Wildcard { strict: false },
        "strict" => {
            if opt(preceded(ws, kw("wildcard"))).parse_next(i)?.is_none() {
                return fail(pos(i), "expected `wildcard` after `strict`");
            }
            Op::Wildcard { strict: true }
        }
        _ => {
            i.reset(&checkpoint);
            return Ok(None);
        }
    };
    Ok(Some(op))
}

fn comparison(i: &mut In<'_>, operand: Operand, label: &str) -> PResult<Expr> {
    ws(i)?;
    let op_start = pos(i);
    let before: &str = i;
    let Some(op) = operator(i)? else {
        if operand.ty() == Ty::Bool {
            return Ok(Expr::Truthy(operand));
        }
        let mut msg = format!("expected operator after {label}");
        if before.starts_with('=') {
            msg.push_str("; use `==` or `eq` for equality");
        }
        return fail(op_start, msg);
    };
    let op_text = taken(before, i);
    ws(i)?;
    let at = pos(i);
    let test = match (operand.ty(), op) {
        (Ty::Str, Op::Cmp(c)) => Test::StrCmp(c, want(i, string_lit, "a string", label)?),
        (Ty::Str, Op::Contains) => Test::Contains(want(i, string_lit, "a string", label)?),
        (Ty::Str, Op::Matches) => {
            let pattern = want(i, string_lit, "a regular expression string", label)?;
            Test::Matches(compile_regex(&pattern).or_else(|m| fail(at, m.to_string()))?)
        }
        (Ty::Str, Op::Wildcard { strict }) => {
            let pattern = want(i, string_lit, "a wildcard pattern string", label)?;
            Test::Wildcard(Wildcard::new(&pattern, !strict).or_else(|m| fail(at, m.to_string()))?)
        }
        (Ty::Str, Op::In) => {
            let mut set = set(i, string_lit, "a string")?;
            set.sort_unstable();
            set.dedup();
            Test::StrIn(set)
        }
        (Ty::Int, Op::Cmp(c)) => Test::IntCmp(c, want(i, int_lit, "an integer", label)?),
        (Ty::Int, Op::In) => Test::IntIn(set(i, int_item, "an integer or range")?),
        (Ty::Ip, Op::Cmp(c @ (CmpOp::Eq | CmpOp::Ne))) => {
            let item = want(i, ip_item, "an IP address", label)?;
            match item {
                IpItem::Net(net) if net.prefix_len() == net.max_prefix_len() => {
                    Test::IpCmp(c, net.addr().to_canonical())
                }
                _ => return fail(at, "a CIDR or range needs `in`, not `==`/`!=`"),
            }
        }
        (Ty::Ip, Op::In) if !i.starts_with('{') => {
            Test::IpIn(vec![want(i, ip_item, "an IP set, CIDR or address", label)?])
        }
        (Ty::Ip, Op::In) => Test::IpIn(set(i, ip_item, "an IP address, CIDR or range")?),
        (Ty::Bool, Op::Cmp(c @ (CmpOp::Eq | CmpOp::Ne))) => {
            Test::BoolCmp(c, want(i, bool_lit, "`true` or `false`", label)?)
        }
        (ty, _) => {
            let ty = ty.describe();
            let msg = format!("operator `{op_text}` cannot be used with {label}, which is {ty}");
            return fail(op_start, msg);
        }
    };
    Ok(Expr::Test(operand, test))
}
