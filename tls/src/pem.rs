//! PEM files: certificate chains, trust anchors and private keys, each error naming its file.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;

use crate::TlsError;

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Unreadable {
        path: path.to_path_buf(),
        error,
    })
}

/// The certificates of a PEM file; none is an error.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let data = read(path)?;
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut data.as_slice()).collect();
    let certs = certs.map_err(|e| TlsError::unusable(path, format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::unusable(path, "no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut read(path)?.as_slice())
        .map_err(|e| TlsError::unusable(path, format!("not a PEM private key: {e}")))?
        .ok_or_else(|| TlsError::unusable(path, "no private key in it".into()))
}

/// A certificate chain and its private key, ready to sign handshakes.
pub fn certified_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = certificates(cert)?;
    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(private_key(key)?)
        .map_err(|e| TlsError::unusable(key, format!("unusable private key: {e}")))?;
    let certified = CertifiedKey::new(chain, signing);
    // A key that is not the certificate's would fail every handshake: refuse it now.
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(e) => {
            return Err(TlsError::unusable(
                key,
                format!("not the key of {}: {e}", cert.display()),
            ))
        }
    }
    Ok(Arc::new(certified))
}

/// Trust anchors: every certificate of a PEM file.
pub fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::unusable(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}
