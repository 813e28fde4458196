//! Unit tests for parse errors: every message with its column, limits,
//! and the public error/API surface.

use super::*;

/// Asserts an error at `column` whose message contains `needle`.
fn assert_err(src: &str, column: usize, needle: &str) {
    match Condition::parse(src) {
        Ok(_) => panic!("`{src}` should not parse"),
        Err(e) => {
            assert!(e.message.contains(needle), "`{src}`: {e}");
            assert_eq!(e.column, column, "`{src}`: {e}");
        }
    }
}

/// Column (1-based) of the first occurrence of `needle` in ASCII `src`.
fn col(src: &str, needle: &str) -> usize {
    src.find(needle).map_or(0, |i| i + 1)
}

#[test]
fn error_messages_and_columns() {
    let s = r#"http.host "a""#;
    assert_err(s, 11, "expected operator after field `http.host`");
    let s = r#"http.reqest.method == "GET""#;
    let e = Condition::parse(s).err();
    let want = "unknown field `http.reqest.method`; did you mean `http.request.method`?";
    assert_eq!(e.map(|e| (e.column, e.message)), Some((1, want.to_owned())));
    assert_err(r#"http.host == "abc"#, 14, "unterminated string");
    assert_err(r#"http.host == r#"abc""#, 14, "unterminated raw string");
    assert_err(r#"http.host == "a" "b""#, 18, "unexpected trailing input");
    assert_err("ssl )", 5, "unexpected trailing input");
    // Columns count characters, not bytes.
    assert_err(r#"http.host == "ü" "b""#, 18, "unexpected trailing input");
    assert_err("", 1, "expected a condition, found end of input");
    assert_err("ssl and", 8, "expected a condition");
    assert_err("(ssl", 5, "expected `)`");
    assert_err(r#"host == "x""#, 1, "did you mean `http.host`?");
    assert_err("zzzzzzzzzzzzzz", 1, "supported fields: http.request.method");
    let s = r#"ip.src == "1.2.3.4""#;
    assert_err(
        s,
        11,
        "expected an IP address to compare with field `ip.src`",
    );
    let s = r#"ip.src contains "1""#;
    assert_err(
        s,
        8,
        "operator `contains` cannot be used with field `ip.src`",
    );
    assert_err(
        "ssl < true",
        5,
        "operator `<` cannot be used with field `ssl`, which is a boolean",
    );
    assert_err("ip.src ge 1.2.3.4", 8, "operator `ge` cannot be used");
    assert_err("len(http.host) contains \"1\"", 16, "which is an integer");
    assert_err("ssl == 1", 8, "expected `true` or `false`");
    assert_err(
        "http.host == foo",
        14,
        "expected a string to compare with field `http.host`, found `foo`",
    );
    let s = r#"http.request.uri.path matches "(a""#;
    assert_err(
        s,
        col(s, "\"("),
        "invalid regular expression: unclosed group",
    );
    let s = r#"http.host matches "(a{1000}){1000}""#;
    assert_err(s, col(s, "\"("), "regular expression is too large");
    assert_err(r#"foo(http.host) == "a""#, 1, "unknown function `foo`");
    assert_err(
        r#"lower(ip.src) == "a""#,
        7,
        "`lower` expects a string, but field `ip.src` is an IP address",
    );
    assert_err(
        r#"lower() == "a""#,
        7,
        "expected a field as the argument of `lower`",
    );
    assert_err(
        "starts_with(http.host)",
        22,
        "expected `,` and a second argument",
    );
    assert_err(
        "starts_with(http.host, 1)",
        24,
        "expected a string as the second argument",
    );
    assert_err(
        r#"lower(http.host, "x") == "a""#,
        16,
        "expected `)` to close `lower(`",
    );
    assert_err(
        r#"lower(http.host) "a""#,
        18,
        "expected operator after `lower(http.host)`",
    );
    assert_err(r#"http.request.headers == "a""#, 22, "is a map");
    assert_err(
        "http.request.headers[x] == \"a\"",
        22,
        "expected a quoted name",
    );
    assert_err(r#"http.request.headers["a" == "b""#, 26, "expected `]`");
    assert_err(
        r#"http.request.headers["a"][*] == "b""#,
        26,
        "only a numeric index",
    );
    assert_err(r#"http.host == "a\n""#, 16, "invalid escape `\\n`");
    assert_err(r#"http.host = "a""#, 11, "use `==` or `eq`");
    assert_err(
        r#"http.host strict "a""#,
        17,
        "expected `wildcard` after `strict`",
    );
    assert_err(r#"http.host wildcard "a**""#, 20, "`**` is not allowed");
    assert_err(
        r#"http.host wildcard "a\\b""#,
        20,
        "backslash in a wildcard",
    );
    assert_err("http.host in {}", 14, "at least one value");
    assert_err(r#"http.host in {"a""#, 14, "unterminated set");
    assert_err(
        r#"http.host in {"a" 1}"#,
        19,
        "expected a string or `}` in set, found `1}`",
    );
    assert_err(
        r#"http.host in "a""#,
        14,
        "expected a set `{...}` after `in`",
    );
    assert_err(
        "ip.src in {10.0.0.1..10.0.0}",
        12,
        "invalid IP address `10.0.0`",
    );
    assert_err(
        "ip.src in {10.0.0.9..10.0.0.1}",
        12,
        "range start is greater",
    );
    assert_err("ip.src in {10.0.0.1..::1}", 12, "same family");
    assert_err("ip.src in {10.0.0.0/33}", 21, "invalid prefix length");
    assert_err("ip.src in {10.0.0.0/}", 21, "invalid prefix length");
    assert_err("ip.src == 10.0.0.0/8", 11, "needs `in`");
    assert_err("ip.src in \"x\"", 11, "expected an IP set, CIDR or address");
    assert_err(
        "len(http.host) > 99999999999999999999",
        18,
        "integer is out of range",
    );
    assert_err("len(http.host) in {5..1}", 20, "range start is greater");
    assert_err(
        "len(http.host) in {5..}",
        23,
        "expected an integer after `..`",
    );
    let deep = format!("{}ssl{}", "(".repeat(40), ")".repeat(40));
    assert_err(&deep, 33, "nested more than 32 levels");
    let deep = format!("{}ssl", "not ".repeat(40));
    assert_err(&deep, 129, "nested more than 32 levels");
    let long = "ssl or ".repeat(3000) + "ssl";
    assert_err(&long, parse::MAX_SOURCE_LEN + 1, "longer than 16384 bytes");
}

#[test]
fn error_display_and_api() {
    let e = Condition::parse("ssl )").err();
    let text = e.map(|e| e.to_string());
    assert_eq!(text.as_deref(), Some("column 5: unexpected trailing input"));
    let c: Result<Condition, _> = "ssl and true".parse();
    assert_eq!(
        c.map(|c| (c.source().to_owned(), c.to_string())).ok(),
        Some(("ssl and true".into(), "ssl and true".into()))
    );
    fn send_sync<T: Send + Sync + Clone>() {}
    send_sync::<Condition>();
}

#[test]
fn fields_table_matches_parser() {
    for (name, ty, _) in FIELDS {
        let kind = ast::lookup_field(name);
        assert!(kind.is_some(), "{name} is listed but not parsed");
        let expected = match kind {
            Some(ast::FieldKind::Str(_)) => "String",
            Some(ast::FieldKind::Ip) => "IP address",
            Some(ast::FieldKind::Ssl) => "Boolean",
            Some(ast::FieldKind::HeaderMap | ast::FieldKind::CookieMap) => "Map<String>",
            None => "",
        };
        assert_eq!(*ty, expected, "{name}");
    }
}

#[test]
fn max_depth_fits_a_small_stack() {
    // Worker threads may have small stacks; the nesting limit must keep the
    // recursive parser and evaluator well inside them. Measured need at the
    // limit: ~256 KiB in debug builds, under 64 KiB in release.
    let nested = |levels: usize| {
        format!(
            "{}lower(upper(http.host)) == \"a\" or ssl{}",
            "not (".repeat(levels),
            ")".repeat(levels)
        )
    };
    // 15 * 2 levels for `not (` plus 2 for the calls: exactly the limit.
    let deepest = nested((parse::MAX_DEPTH - 2) / 2);
    let too_deep = nested(parse::MAX_DEPTH);
    let handle = std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(move || {
            let ok = Condition::parse(&deepest).map(|c| c.matches(&RuleInput::default()));
            let err = Condition::parse(&too_deep)
                .map(|_| ())
                .map_err(|e| e.message);
            (ok.ok(), err.err())
        });
    let (ok, err) = handle.ok().and_then(|h| h.join().ok()).unwrap_or_default();
    assert_eq!(ok, Some(true));
    assert!(err.is_some_and(|m| m.contains("nested more than")));
}
