//! What a member of the mesh does, as its `role` tag says.

use std::fmt;

/// A member's role. A tag this version does not know (a newer node's, or a hostile one) is
/// kept as it came, so `/members` shows it, and counts as neither prober nor aggregator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Prober,
    Aggregator,
    Unknown(String),
}

impl Role {
    /// The role as its tag reads.
    pub fn parse(tag: &str) -> Role {
        match tag {
            "prober" => Role::Prober,
            "aggregator" => Role::Aggregator,
            other => Role::Unknown(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Role::Prober => "prober",
            Role::Aggregator => "aggregator",
            Role::Unknown(tag) => tag,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_back_as_their_tags() {
        for tag in ["prober", "aggregator", "something-newer", ""] {
            assert_eq!(Role::parse(tag).as_str(), tag);
        }
        assert_eq!(Role::parse("prober"), Role::Prober);
        assert_eq!(Role::parse("Prober"), Role::Unknown("Prober".into()));
    }
}
