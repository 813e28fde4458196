//! How the config primary and the nodes that follow it trust each other over HTTP, with the
//! cluster key they already share (no other secret to distribute):
//!
//! - a node asks for the document with `X-Meshlb-Node`, `X-Meshlb-Time` (unix seconds) and
//!   `Authorization: Meshlb-Cluster <hex>`, an HMAC-SHA256 of both under a key derived from the
//!   cluster key; the primary refuses a clock more than [`MAX_SKEW_SECS`] away;
//! - the primary answers with `X-Meshlb-Generation`, `X-Meshlb-Sha256` and
//!   `X-Meshlb-Signature`, an HMAC of generation and hash: the node checks the signature and the
//!   body's hash before it looks at the document, so only the primary's document is applied.
//!
//! During a key rotation either key (current or previous) is accepted; the current one signs.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The farthest a fetch's clock may be from the primary's.
pub const MAX_SKEW_SECS: u64 = 300;

pub const NODE_HEADER: &str = "x-meshlb-node";
pub const TIME_HEADER: &str = "x-meshlb-time";
pub const GENERATION_HEADER: &str = "x-meshlb-generation";
pub const SHA256_HEADER: &str = "x-meshlb-sha256";
pub const SIGNATURE_HEADER: &str = "x-meshlb-signature";
/// The `Authorization` scheme of a fetch.
pub const SCHEME: &str = "Meshlb-Cluster ";

/// The keys of the control plane, derived from the cluster key texts.
#[derive(Clone)]
pub struct ControlKey {
    keys: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ControlKey({} keys)", self.keys.len())
    }
}

fn derive(text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"meshlb control plane v1\0");
    h.update(text.trim().as_bytes());
    h.finalize().into()
}

fn mac(key: &[u8; 32], parts: &[&str]) -> String {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for SHA-256.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    for p in parts {
        m.update(p.as_bytes());
        m.update(b"\n");
    }
    hex(&m.finalize().into_bytes())
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The document's hash as announced and checked.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

impl ControlKey {
    /// From the cluster key (`current`) and, during a rotation, the previous one.
    pub fn new(current: &str, previous: Option<&str>) -> ControlKey {
        let mut keys = vec![derive(current)];
        keys.extend(previous.map(derive));
        ControlKey { keys }
    }

    fn any(&self, parts: &[&str], given: &str) -> bool {
        self.keys
            .iter()
            .any(|k| crate::guard::same_token(&mac(k, parts), given))
    }

    /// A fetch's `Authorization` value.
    pub fn sign_fetch(&self, node: &str, unix_secs: u64) -> String {
        format!(
            "{SCHEME}{}",
            mac(&self.keys[0], &["fetch", node, &unix_secs.to_string()])
        )
    }

    /// Whether a fetch is the mesh's, at `now` (unix seconds).
    pub fn verify_fetch(&self, node: &str, time: &str, authorization: &str, now: u64) -> bool {
        let Ok(t) = time.parse::<u64>() else {
            return false;
        };
        let Some(given) = authorization.strip_prefix(SCHEME) else {
            return false;
        };
        t.abs_diff(now) <= MAX_SKEW_SECS && self.any(&["fetch", node, time], given)
    }

    /// The signature of a document the primary serves.
    pub fn sign_document(&self, generation: u64, sha256: &str) -> String {
        mac(
            &self.keys[0],
            &["document", &generation.to_string(), sha256],
        )
    }

    pub fn verify_document(&self, generation: u64, sha256: &str, signature: &str) -> bool {
        self.any(&["document", &generation.to_string(), sha256], signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetches_verify_under_either_key_within_the_skew() {
        let old = ControlKey::new("an old passphrase, long enough", None);
        let ring = ControlKey::new(
            "a new passphrase, long enough",
            Some("an old passphrase, long enough"),
        );
        let auth = old.sign_fetch("prober-1", 1000);
        assert!(ring.verify_fetch("prober-1", "1000", &auth, 1000 + MAX_SKEW_SECS));
        assert!(!ring.verify_fetch("prober-1", "1000", &auth, 1001 + MAX_SKEW_SECS));
        assert!(
            !ring.verify_fetch("prober-2", "1000", &auth, 1000),
            "another node"
        );
        assert!(
            !ring.verify_fetch("prober-1", "1001", &auth, 1000),
            "another time"
        );
        assert!(!ring.verify_fetch("prober-1", "1000", "Bearer x", 1000));
        let stranger = ControlKey::new("somebody else's passphrase", None);
        assert!(!stranger.verify_fetch("prober-1", "1000", &auth, 1000));
    }

    #[test]
    fn a_document_signature_binds_generation_and_hash() {
        let key = ControlKey::new("a passphrase, long enough", None);
        let sha = sha256_hex(b"doc");
        let sig = key.sign_document(4, &sha);
        assert!(key.verify_document(4, &sha, &sig));
        assert!(!key.verify_document(5, &sha, &sig));
        assert!(!key.verify_document(4, &sha256_hex(b"other"), &sig));
    }
}
