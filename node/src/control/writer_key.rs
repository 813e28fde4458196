//! Who may make a generation. With `--config-verify-key`, a document counts only when it is
//! signed with an Ed25519 key that config-writing nodes alone hold (`--config-signing-key`):
//! the cluster key opens gossip, and every prober holds it, so a compromised prober could
//! otherwise announce and serve a config of its own. The signature covers the generation, the
//! document's SHA-256 and its size; any node may relay a signed document, none can alter or
//! forge one. Keys are the PEM files OpenSSL writes (`openssl genpkey -algorithm ed25519`,
//! `openssl pkey -pubout`), or `meshlb config keygen`'s.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the key's 32 bytes follow.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read {}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: {why}", path.display())]
    Unusable { path: PathBuf, why: String },
    #[error("cannot make an Ed25519 key pair: {0}")]
    Generate(ring::error::Unspecified),
}

fn unusable(path: &Path, why: impl Into<String>) -> KeyError {
    KeyError::Unusable {
        path: path.to_path_buf(),
        why: why.into(),
    }
}

/// What a signature covers.
fn message(generation: u64, sha256: &str, size: u64) -> String {
    format!("meshlb config document v2\n{generation}\n{sha256}\n{size}\n")
}

/// The private key of a config-writing node.
pub struct SigningKey(Ed25519KeyPair);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// From a PEM PKCS#8 file (`-----BEGIN PRIVATE KEY-----`).
    pub fn load(path: &Path) -> Result<SigningKey, KeyError> {
        let data = std::fs::read(path).map_err(|error| KeyError::Unreadable {
            path: path.to_path_buf(),
            error,
        })?;
        let key = rustls_pemfile::private_key(&mut data.as_slice())
            .map_err(|e| unusable(path, format!("not PEM: {e}")))?
            .ok_or_else(|| unusable(path, "no private key in it"))?;
        let rustls_pki_types::PrivateKeyDer::Pkcs8(der) = key else {
            return Err(unusable(path, "not a PKCS#8 (Ed25519) private key"));
        };
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_pkcs8_der())
            .map(SigningKey)
            .map_err(|e| unusable(path, format!("not an Ed25519 key: {e}")))
    }

    /// The signature of a document (base64).
    pub fn sign(&self, generation: u64, sha256: &str, size: u64) -> String {
        B64.encode(self.0.sign(message(generation, sha256, size).as_bytes()))
    }

    pub fn public(&self) -> [u8; 32] {
        let mut key = [0u8; 32];
        key.copy_from_slice(self.0.public_key().as_ref());
        key
    }
}

/// The public keys documents are checked against (two during a rotation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyKeys(Vec<[u8; 32]>);

impl VerifyKeys {
    /// From PEM SubjectPublicKeyInfo files (`-----BEGIN PUBLIC KEY-----`), every error at once.
    pub fn load(paths: &[PathBuf]) -> Result<VerifyKeys, Vec<KeyError>> {
        let mut keys = Vec::new();
        let mut errors = Vec::new();
        for path in paths {
            match read_public(path) {
                Ok(k) => keys.push(k),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(VerifyKeys(keys))
        } else {
            Err(errors)
        }
    }

    /// These keys and `key`.
    pub fn with(mut self, key: [u8; 32]) -> VerifyKeys {
        if !self.0.contains(&key) {
            self.0.push(key);
        }
        self
    }

    /// Whether documents must carry a signature (any key configured).
    pub fn required(&self) -> bool {
        !self.0.is_empty()
    }

    /// Whether `signature` (base64) is one of these keys' over the document.
    pub fn verify(&self, generation: u64, sha256: &str, size: u64, signature: &str) -> bool {
        let Ok(signature) = B64.decode(signature.trim()) else {
            return false;
        };
        let message = message(generation, sha256, size);
        self.0.iter().any(|k| {
            UnparsedPublicKey::new(&ED25519, k)
                .verify(message.as_bytes(), &signature)
                .is_ok()
        })
    }
}

fn read_public(path: &Path) -> Result<[u8; 32], KeyError> {
    let data = std::fs::read(path).map_err(|error| KeyError::Unreadable {
        path: path.to_path_buf(),
        error,
    })?;
    let spki = rustls_pemfile::public_keys(&mut data.as_slice())
        .next()
        .ok_or_else(|| unusable(path, "no PEM public key in it"))?
        .map_err(|e| unusable(path, format!("not PEM: {e}")))?;
    let der = spki.as_ref();
    if der.len() != 44 || der[..12] != SPKI_PREFIX {
        return Err(unusable(path, "not an Ed25519 public key"));
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(&der[12..]);
    Ok(key)
}

/// A fresh key pair as PEM: (private PKCS#8, public SubjectPublicKeyInfo).
pub fn generate() -> Result<(String, String), KeyError> {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(KeyError::Generate)?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|e| KeyError::Generate(ring::error::Unspecified::from(e)))?;
    let mut spki = SPKI_PREFIX.to_vec();
    spki.extend_from_slice(pair.public_key().as_ref());
    Ok((pem("PRIVATE KEY", pkcs8.as_ref()), pem("PUBLIC KEY", &spki)))
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = B64.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_binds_generation_hash_and_size_to_the_writers_key() {
        let dir = tempfile::tempdir().expect("dir");
        let (private, public) = generate().expect("keys");
        let (key_file, pub_file) = (dir.path().join("k.pem"), dir.path().join("k.pub"));
        std::fs::write(&key_file, private).expect("write");
        std::fs::write(&pub_file, public).expect("write");
        let key = SigningKey::load(&key_file).expect("signing key");
        let keys = VerifyKeys::load(&[pub_file]).expect("verify key");
        assert_eq!(keys, VerifyKeys::default().with(key.public()));
        let sig = key.sign(7, "ab", 10);
        assert!(keys.verify(7, "ab", 10, &sig));
        assert!(!keys.verify(8, "ab", 10, &sig), "another generation");
        assert!(!keys.verify(7, "ac", 10, &sig), "another document");
        assert!(!keys.verify(7, "ab", 11, &sig), "another size");
        assert!(!keys.verify(7, "ab", 10, "not base64!"));
        let (other, _) = generate().expect("keys");
        let other_file = dir.path().join("o.pem");
        std::fs::write(&other_file, other).expect("write");
        let forger = SigningKey::load(&other_file).expect("key");
        assert!(
            !keys.verify(7, "ab", 10, &forger.sign(7, "ab", 10)),
            "another writer"
        );
    }

    #[test]
    fn openssls_key_files_are_read() {
        let dir = tempfile::tempdir().expect("dir");
        let (key_file, pub_file) = (dir.path().join("k.pem"), dir.path().join("k.pub"));
        let ok = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(&key_file)
            .status()
            .is_ok_and(|s| s.success())
            && std::process::Command::new("openssl")
                .args(["pkey", "-pubout", "-in"])
                .arg(&key_file)
                .arg("-out")
                .arg(&pub_file)
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "openssl makes an Ed25519 key pair");
        let key = SigningKey::load(&key_file).expect("openssl's private key");
        let keys = VerifyKeys::load(&[pub_file]).expect("openssl's public key");
        assert!(keys.verify(1, "x", 2, &key.sign(1, "x", 2)));
    }
}
