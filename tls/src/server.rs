//! A TLS server's settings read from files and re-read on demand: a node's admin listener takes
//! its certificate, its key and — for client-certificate authentication — the CA its clients'
//! certificates must chain to, and re-reads all three on every reload (SIGHUP), so a renewed
//! certificate is served without a restart. A reload that fails keeps the settings in force.
//! TLS 1.2 and 1.3 only (rustls speaks nothing older).

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::{pem, TlsError};

/// Where a TLS server's credentials are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    /// The certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// Clients must present a certificate this CA (PEM) signed; `None`: no client certificate
    /// is asked for.
    pub client_ca: Option<PathBuf>,
}

/// A TLS server's settings, re-read from their files by [`ReloadableServer::reload`].
pub struct ReloadableServer {
    files: ServerFiles,
    alpn: Vec<Vec<u8>>,
    current: ArcSwap<ServerConfig>,
}

impl std::fmt::Debug for ReloadableServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadableServer")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadableServer {
    /// Reads `files` now; `alpn` lists the protocols offered (`http/1.1`).
    pub fn load(files: ServerFiles, alpn: &[&[u8]]) -> Result<ReloadableServer, TlsError> {
        let alpn: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
        let config = build(&files, &alpn)?;
        Ok(ReloadableServer {
            files,
            alpn,
            current: ArcSwap::from_pointee(config),
        })
    }

    /// Re-reads the files; on an error the settings in force stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = build(&self.files, &self.alpn)?;
        self.current.store(Arc::new(config));
        Ok(())
    }

    /// The settings for the next handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    /// Whether every client must present a certificate the client CA signed.
    pub fn verifies_clients(&self) -> bool {
        self.files.client_ca.is_some()
    }

    pub fn files(&self) -> &ServerFiles {
        &self.files
    }
}

fn build(files: &ServerFiles, alpn: &[Vec<u8>]) -> Result<ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certified = pem::certified_key(&files.cert, &files.key)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(pem::roots(ca)?), provider)
                    .build()
                    .map_err(|e| {
                        TlsError::unusable(ca, format!("cannot verify clients with it: {e}"))
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(Single(certified)));
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

/// One certificate for every name.
#[derive(Debug)]
struct Single(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for Single {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &std::path::Path, stem: &str) -> (PathBuf, PathBuf) {
        let c = rcgen::generate_simple_self_signed(vec!["admin.test".into()]).expect("cert");
        let (cert, key) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert, c.cert.pem()).expect("cert");
        std::fs::write(&key, c.signing_key.serialize_pem()).expect("key");
        (cert, key)
    }

    #[test]
    fn a_reload_that_fails_keeps_the_settings_in_force() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key) = write_pair(dir.path(), "a");
        let files = ServerFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
        };
        let server = ReloadableServer::load(files, &[b"http/1.1"]).expect("loads");
        let before = server.config();
        std::fs::write(&key, "not a key").expect("spoil");
        let e = server.reload().expect_err("a spoiled key");
        assert!(e.to_string().contains("a.key"), "{e}");
        assert!(Arc::ptr_eq(&before, &server.config()), "replaced");
        write_pair(dir.path(), "a");
        server.reload().expect("a good pair");
        assert!(!Arc::ptr_eq(&before, &server.config()), "not replaced");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, _) = write_pair(dir.path(), "a");
        let (_, other_key) = write_pair(dir.path(), "b");
        let files = ServerFiles {
            cert,
            key: other_key,
            client_ca: None,
        };
        let e = ReloadableServer::load(files, &[]).expect_err("mismatched");
        assert!(e.to_string().contains("not the key of"), "{e}");
    }
}
