//! Evaluation of a parsed [`Expr`] against a [`RuleInput`].
//!
//! Evaluation is total (every tree is well-typed, so there is nothing to
//! fail) and allocation-free except for `matches` on a `lower()`/`upper()`
//! value, where the regex engine needs the transformed text.

use std::net::IpAddr;

use super::ast::{Case, CmpOp, Expr, IpItem, Operand, Source, StrField, Test, Text, Wildcard};
use super::input::RuleInput;

impl Expr {
    pub(crate) fn eval(&self, input: &RuleInput<'_>) -> bool {
        match self {
            Expr::Const(b) => *b,
            Expr::Not(inner) => !inner.eval(input),
            Expr::And(items) => items.iter().all(|e| e.eval(input)),
            Expr::Or(items) => items.iter().any(|e| e.eval(input)),
            // Left-associative xor over a chain is parity of the true items.
            Expr::Xor(items) => items.iter().fold(false, |acc, e| acc ^ e.eval(input)),
            Expr::Truthy(operand) => truth(operand, input) == Some(true),
            Expr::Test(operand, test) => run_test(operand, test, input),
        }
    }
}

fn run_test(operand: &Operand, test: &Test, input: &RuleInput<'_>) -> bool {
    match operand {
        Operand::Text(t) => text(t, input).map_or_else(|| test.absent(), |v| test_str(v, test)),
        Operand::Len(t) => text(t, input).map_or_else(
            || test.absent(),
            |v| test_int(i64::try_from(v.s.len()).unwrap_or(i64::MAX), test),
        ),
        // Dual-stack sockets report IPv4 clients as ::ffff:a.b.c.d; rules are
        // written against the IPv4 form.
        Operand::Ip => input
            .client_ip
            .map_or_else(|| test.absent(), |ip| test_ip(ip.to_canonical(), test)),
        Operand::Ssl | Operand::StartsWith(..) | Operand::EndsWith(..) => {
            truth(operand, input).map_or_else(|| test.absent(), |b| test_bool(b, test))
        }
    }
}

/// The value of a boolean operand, `None` when its input is absent.
fn truth(operand: &Operand, input: &RuleInput<'_>) -> Option<bool> {
    match operand {
        Operand::Ssl => input.tls,
        Operand::StartsWith(t, lit) => text(t, input).map(|v| v.starts_with(lit.as_bytes())),
        Operand::EndsWith(t, lit) => text(t, input).map(|v| v.ends_with(lit.as_bytes())),
        Operand::Text(_) | Operand::Len(_) | Operand::Ip => None,
    }
}

fn text<'a>(t: &Text, input: &RuleInput<'a>) -> Option<Folded<'a>> {
    let s = match &t.source {
        Source::Field(field) => match field {
            StrField::Method => input.method,
            StrField::Host => input.host,
            StrField::Path => input.path,
            StrField::Query => input.query,
            StrField::UserAgent => input.header("user-agent", 0),
            StrField::RawCookie => input.header("cookie", 0),
            StrField::Country => input.country,
            StrField::PopRegion => input.pop_region,
            StrField::LbName => input.lb_name,
            StrField::DnsQname => input.dns_qname,
            StrField::DnsQtype => input.dns_qtype,
        },
        Source::Header { name, index } => input.header(name, *index),
        Source::Cookie { name, index } => input.cookie(name, *index),
    }?;
    Some(Folded { s, case: t.case })
}

fn test_str(v: Folded<'_>, test: &Test) -> bool {
    match test {
        Test::StrCmp(op, lit) => op.holds(v.bytes().cmp(lit.bytes())),
        Test::Contains(lit) => v.contains(lit),
        Test::Matches(re) => match v.case {
            Case::AsIs => re.is_match(v.s),
            Case::Lower => re.is_match(&v.s.to_ascii_lowercase()),
            Case::Upper => re.is_match(&v.s.to_ascii_uppercase()),
        },
        Test::Wildcard(w) => wildcard(w, v),
        Test::StrIn(set) => set
            .binary_search_by(|lit| lit.bytes().cmp(v.bytes()))
            .is_ok(),
        _ => false,
    }
}

fn test_int(n: i64, test: &Test) -> bool {
    match test {
        Test::IntCmp(op, lit) => op.holds(n.cmp(lit)),
        Test::IntIn(ranges) => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&n)),
        _ => false,
    }
}

fn test_ip(ip: IpAddr, test: &Test) -> bool {
    match test {
        // The parser only builds `==` and `!=` for addresses.
        Test::IpCmp(op, lit) => (ip == *lit) == (*op == CmpOp::Eq),
        Test::IpIn(items) => items.iter().any(|item| match item {
            IpItem::Net(net) => net.contains(&ip),
            IpItem::Range(lo, hi) => (*lo..=*hi).contains(&ip),
        }),
        _ => false,
    }
}

fn test_bool(b: bool, test: &Test) -> bool {
    match test {
        Test::BoolCmp(op, lit) => op.holds(b.cmp(lit)),
        _ => false,
    }
}

/// A string seen through an ASCII case mapping, compared byte by byte so
/// that `lower(x) == "..."` needs no lowercase copy of `x`.
#[derive(Clone, Copy)]
struct Folded<'a> {
    s: &'a str,
    case: Case,
}

impl<'a> Folded<'a> {
    fn bytes(self) -> impl Iterator<Item = u8> + 'a {
        let case = self.case;
        self.s.bytes().map(move |b| case.apply(b))
    }

    fn starts_with(self, lit: &[u8]) -> bool {
        let hay = self.s.as_bytes();
        hay.get(..lit.len())
            .is_some_and(|head| same(head, lit, self.case, false))
    }

    fn ends_with(self, lit: &[u8]) -> bool {
        let hay = self.s.as_bytes();
        hay.len()
            .checked_sub(lit.len())
            .and_then(|from| hay.get(from..))
            .is_some_and(|tail| same(tail, lit, self.case, false))
    }

    fn contains(self, lit: &str) -> bool {
        match self.case {
            Case::AsIs => self.s.contains(lit),
            case => find(self.s.as_bytes(), lit.as_bytes(), case, false).is_some(),
        }
    }
}

/// Equal lengths and bytewise equal after `case`; `ci` additionally folds
/// ASCII case on both sides (for the non-strict `wildcard`).
fn same(hay: &[u8], pat: &[u8], case: Case, ci: bool) -> bool {
    hay.len() == pat.len()
        && hay.iter().zip(pat).all(|(&h, &p)| {
            let h = case.apply(h);
            if ci {
                h.eq_ignore_ascii_case(&p)
            } else {
                h == p
            }
        })
}

/// Leftmost occurrence of `needle` in `hay` under [`same`]'s rules.
fn find(hay: &[u8], needle: &[u8], case: Case, ci: bool) -> Option<usize> {
    let last = hay.len().checked_sub(needle.len())?;
    (0..=last).find(|&at| {
        hay.get(at..at + needle.len())
            .is_some_and(|window| same(window, needle, case, ci))
    })
}

/// Anchored glob match where only `*` is special (see [`Wildcard`]).
fn wildcard(w: &Wildcard, v: Folded<'_>) -> bool {
    let (hay, ci) = (v.s.as_bytes(), w.case_insensitive);
    let eq = |part: &[u8], pat: &str| same(part, pat.as_bytes(), v.case, ci);
    let (Some(first), Some(last)) = (w.segments.first(), w.segments.last()) else {
        return false;
    };
    if w.segments.len() == 1 {
        return eq(hay, first);
    }
    let Some(end) = hay.len().checked_sub(last.len()) else {
        return false;
    };
    if end < first.len() {
        return false;
    }
    match (hay.get(..first.len()), hay.get(end..)) {
        (Some(head), Some(tail)) if eq(head, first) && eq(tail, last) => {}
        _ => return false,
    }
    let mut at = first.len();
    let middle = w.segments.get(1..w.segments.len() - 1).unwrap_or_default();
    for segment in middle {
        let Some(window) = hay.get(at..end) else {
            return false;
        };
        match find(window, segment.as_bytes(), v.case, ci) {
            Some(k) => at += k + segment.len(),
            None => return false,
        }
    }
    true
}
