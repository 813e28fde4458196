//! A config file's text cut at its top-level table headers: one section per resource
//! (`[[pools]]` with the `[pools.…]` tables under it, `[[monitors]]`, …) and the rest (root keys,
//! `[geolocation]`, `[notifications]`), for [`super::incremental`] to re-parse only the
//! resources whose text changed.
//!
//! The cut is exact or not made: the scanner follows TOML's strings, comments and bracket depth
//! (TOML 1.0, §Table: a header is a line whose first token is `[` outside any value), and
//! gives up — `None`, so the whole text is parsed as one — on anything it does not model:
//! multi-line strings, quoted or spaced header keys, a dotted header under a resource kind that
//! is not the section's own, a string or array left open.

/// The top-level arrays of tables that hold one resource per element.
pub const RESOURCE_KEYS: [&str; 5] = [
    "monitors",
    "monitor_groups",
    "pools",
    "load_balancers",
    "zones",
];

/// One piece of the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section<'a> {
    /// One element of a resource array: its `[[key]]` header line and every line up to the
    /// next top-level header.
    Resource { key: &'static str, text: &'a str },
    /// Root keys and the other tables, in the file's order.
    Rest(&'a str),
}

/// The sections of `text` in the file's order, or `None` when it cannot be cut exactly.
pub fn split(text: &str) -> Option<Vec<Section<'_>>> {
    let bytes = text.as_bytes();
    let mut sections = Vec::new();
    // The section being read: where it starts and, for a resource, its key.
    let mut start = 0;
    let mut current: Option<&'static str> = None;
    let mut depth = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        let line = at;
        let first = at
            + bytes[at..]
                .iter()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count();
        if depth == 0 && bytes.get(first) == Some(&b'[') {
            let end = line_end(bytes, first);
            let header = Header::parse(&text[first..end])?;
            let root = header.name.split('.').next().unwrap_or_default();
            let resource = RESOURCE_KEYS.iter().copied().find(|k| *k == root);
            let next = match (resource, header.array, header.name.contains('.')) {
                // `[[pools]]`: a new resource.
                (Some(key), true, false) => Some(Some(key)),
                // `[pools.origin_steering]`, `[[pools.origins]]` under its own `[[pools]]`.
                (Some(key), _, true) if current == Some(key) => None,
                // `[pools]`, or a table of another kind's last element.
                (Some(_), _, _) => return None,
                // `[geolocation]`, `[[notifications.email]]`, …
                (None, _, _) => Some(None),
            };
            if let Some(next) = next {
                push(&mut sections, current, &text[start..line]);
                start = line;
                current = next;
            }
            at = end;
            continue;
        }
        (at, depth) = scan_value_line(bytes, first, depth)?;
    }
    if depth != 0 {
        return None;
    }
    push(&mut sections, current, &text[start..]);
    Some(sections)
}

/// Where the line holding `at` ends: past its newline, or the end of the text.
fn line_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| at + n + 1)
}

fn push<'a>(sections: &mut Vec<Section<'a>>, key: Option<&'static str>, text: &'a str) {
    match key {
        Some(key) => sections.push(Section::Resource { key, text }),
        None if text.trim().is_empty() => {}
        None => sections.push(Section::Rest(text)),
    }
}

/// A table header line: `[a.b]` or `[[a.b]]`, bare keys only, an optional comment after.
struct Header<'a> {
    name: &'a str,
    array: bool,
}

impl<'a> Header<'a> {
    fn parse(line: &'a str) -> Option<Header<'a>> {
        let (array, inner) = match line.strip_prefix("[[") {
            Some(inner) => (true, inner),
            None => (false, &line[1..]),
        };
        let close = if array { "]]" } else { "]" };
        let end = inner.find(']')?;
        let name = &inner[..end];
        let after = inner[end..].strip_prefix(close)?;
        let after = after.trim_start_matches([' ', '\t']);
        let ends = after.is_empty() || after.starts_with('#') || after == "\n" || after == "\r\n";
        let bare = !name.is_empty()
            && name.split('.').all(|k| {
                !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
        (ends && bare).then_some(Header { name, array })
    }
}

/// Reads the line that is not a header from `at`: where the next line starts and the bracket
/// depth after it, from `depth` (`[`/`{` open, `]`/`}` close, outside strings and comments).
/// `None` for a multi-line string, a string left open at the end of the line, or a bracket
/// closed that was never opened.
fn scan_value_line(bytes: &[u8], mut at: usize, mut depth: usize) -> Option<(usize, usize)> {
    while let Some(&b) = bytes.get(at) {
        at += 1;
        match b {
            b'\n' => return Some((at, depth)),
            b'#' => return Some((line_end(bytes, at), depth)),
            b'"' | b'\'' => {
                if bytes.get(at..at + 2) == Some(&[b, b][..]) {
                    return None;
                }
                loop {
                    match *bytes.get(at)? {
                        b'\\' if b == b'"' => at += 1,
                        b'\n' => return None,
                        c if c == b => break,
                        _ => {}
                    }
                    at += 1;
                }
                at += 1;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.checked_sub(1)?,
            _ => {}
        }
    }
    Some((at, depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Option<Vec<String>> {
        split(text).map(|s| {
            s.iter()
                .map(|s| match s {
                    Section::Resource { key, .. } => key.to_string(),
                    Section::Rest(_) => "rest".to_string(),
                })
                .collect()
        })
    }

    #[test]
    fn sections_concatenate_to_the_text() {
        let text = "a = 1\n[[pools]]\nname = \"p\"\n[pools.load_shedding]\nx = 1\n[[pools.origins]]\nname = \"o\"\n[geolocation]\n[[monitors]]\nname = \"m\"\n";
        let sections = split(text).expect("cut");
        let joined: String = sections
            .iter()
            .map(|s| match s {
                Section::Resource { text, .. } | Section::Rest(text) => *text,
            })
            .collect();
        assert_eq!(joined, text);
        assert_eq!(
            keys(text).expect("cut"),
            ["rest", "pools", "rest", "monitors"]
        );
    }

    #[test]
    fn a_subtable_stays_with_its_resource() {
        let text =
            "[[pools]]\nname = \"p\"\n[[pools.origins]]\nname = \"o\"\n[[pools]]\nname = \"q\"\n";
        let sections = split(text).expect("cut");
        assert_eq!(
            sections[0],
            Section::Resource {
                key: "pools",
                text: "[[pools]]\nname = \"p\"\n[[pools.origins]]\nname = \"o\"\n"
            }
        );
        assert_eq!(sections.len(), 2);
    }

    #[test]
    fn brackets_inside_values_strings_and_comments_are_not_headers() {
        let text = "[[pools]]\nname = \"p\"\norigins = [\n[\"x\"],\n  { name = \"a]\" }, # ]\n]\ncheck_regions = ['[pools]']\n[[pools]]\nname = \"q\"\n";
        assert_eq!(keys(text).expect("cut"), ["pools", "pools"]);
    }

    #[test]
    fn what_the_scanner_does_not_model_is_left_whole() {
        for text in [
            "[[pools]]\ndescription = \"\"\"\n[[pools]]\n\"\"\"\n",
            "[[pools]]\ndescription = '''\n'''\n",
            "[\"pools\"]\n",
            "[[ pools ]]\n",
            "[[pools]]\nname = \"p\"\n[monitors.x]\n",
            "[pools]\n",
            "[[pools]]\nname = \"open\n",
            "[[pools]]\norigins = [\n",
            "[[pools]]\nx = ]\n",
            "[[pools]] x = 1\n",
        ] {
            assert_eq!(split(text), None, "{text:?}");
        }
    }
}
