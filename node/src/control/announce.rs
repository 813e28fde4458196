//! What a node that holds a generation announces in gossip — the writer (the primary, or a
//! store-connected aggregator) under `mesh::keys::CONFIG_PRIMARY`, any relay under
//! `CONFIG_HOLDS`: the generation, the document's SHA-256 and size, the URL its listener
//! serves the document at, and the writer's signature of the three (`writer_key.rs`), which
//! a follower checks before it fetches anything. Gossip is sealed with the cluster key, so an
//! announcement is a mesh node's; the signature says whether a writer made the generation.

use std::fmt;

/// What the primary announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub generation: u64,
    /// Lowercase hex SHA-256 of the document's bytes.
    pub sha256: String,
    pub size: u64,
    /// The holder's listener, `http://host:port` or `https://host:port`.
    pub url: String,
    /// The writer's signature (base64), when the generation is signed.
    pub signature: Option<String>,
}

impl fmt::Display for Announcement {
    /// `generation sha256 size url [signature]`: what the gossip value holds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.generation, self.sha256, self.size, self.url
        )?;
        match &self.signature {
            Some(s) => write!(f, " {s}"),
            None => Ok(()),
        }
    }
}

impl Announcement {
    /// Reads a gossip value; anything malformed is no announcement.
    pub fn parse(value: &str) -> Option<Announcement> {
        let mut parts = value.split(' ');
        let generation = parts.next()?.parse().ok()?;
        let sha256 = parts.next()?;
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let size = parts.next()?.parse().ok()?;
        let url = parts.next()?;
        let signature = parts.next().map(str::to_string);
        if parts.next().is_some() || !url.starts_with("http://") && !url.starts_with("https://") {
            return None;
        }
        Some(Announcement {
            generation,
            sha256: sha256.to_ascii_lowercase(),
            size,
            url: url.to_string(),
            signature,
        })
    }
}

/// The primary a node follows among what the live nodes announce: the highest generation
/// (two primaries are a misconfiguration that `count` reports; the newer document wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primary {
    pub node_id: String,
    pub announcement: Announcement,
    /// How many live nodes announced themselves primary.
    pub count: usize,
}

/// Picks the primary from `(node id, gossip value)` pairs of live nodes.
pub fn choose<'a>(announced: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<Primary> {
    let mut best: Option<Primary> = None;
    let mut count = 0;
    for (node, value) in announced {
        let Some(a) = Announcement::parse(value) else {
            continue;
        };
        count += 1;
        let newer = best
            .as_ref()
            .is_none_or(|b| (a.generation, node) > (b.announcement.generation, b.node_id.as_str()));
        if newer {
            best = Some(Primary {
                node_id: node.to_string(),
                announcement: a,
                count: 0,
            });
        }
    }
    best.map(|b| Primary { count, ..b })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(generation: u64) -> String {
        Announcement {
            generation,
            sha256: "ab".repeat(32),
            size: 10,
            url: "http://127.0.0.1:9090".into(),
            signature: Some("c2ln".into()),
        }
        .to_string()
    }

    #[test]
    fn round_trips_and_refuses_malformed_values() {
        let v = value(7);
        assert_eq!(Announcement::parse(&v).map(|a| a.generation), Some(7));
        for bad in [
            "",
            "7",
            "x abab 1 http://a",
            &format!("7 {} 1 ftp://a", "ab".repeat(32)),
            &format!("7 {} 1 http://a sig extra", "ab".repeat(32)),
            &format!("7 {} 1 http://a", "zz".repeat(32)),
            &format!("7 {} -1 http://a", "ab".repeat(32)),
        ] {
            assert_eq!(Announcement::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_newest_generation_leads_and_primaries_are_counted() {
        let (a, b) = (value(3), value(5));
        let p =
            choose([("agg-1", a.as_str()), ("agg-2", b.as_str()), ("x", "junk")]).expect("primary");
        assert_eq!(p.node_id, "agg-2");
        assert_eq!(p.announcement.generation, 5);
        assert_eq!(p.count, 2);
        assert_eq!(choose([("x", "junk")]), None);
    }
}
