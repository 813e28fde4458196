//! What a node's admin listener knows its callers by: bearer tokens (`--admin-token-file`,
//! `--admin-read-token-file`) and, with `--admin-client-ca`, the client certificate checked in
//! the TLS handshake. The token files and the TLS files (certificate, key, client CA) are
//! re-read on every reload of the config file (SIGHUP, `POST /-/reload`): a token or a
//! certificate rotates without a restart. A part that fails to read keeps what was in force,
//! and says why.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::HeaderMap;
use lb_tls::{ReloadableServer, ServerFiles};

use crate::guard;

/// Where a token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// A file, re-read on reload; its first line's surrounding whitespace is trimmed.
    File(PathBuf),
    /// Given once (`MESHLB_ADMIN_TOKEN`): never changes.
    Given(Arc<str>),
}

/// Why credentials could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("cannot read the token file {}: {error}", path.display())]
    TokenFile {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("the token file {} is empty", path.display())]
    EmptyToken { path: PathBuf },
    #[error("the admin listener's TLS: {0}")]
    Tls(#[from] lb_tls::TlsError),
}

impl TokenSource {
    /// The token now. A file its group or others may read is warned about (as ssh does for
    /// keys): the token grants the admin API.
    pub fn read(&self) -> Result<Arc<str>, CredentialError> {
        let path = match self {
            TokenSource::Given(t) => return Ok(Arc::clone(t)),
            TokenSource::File(path) => path,
        };
        let text = std::fs::read_to_string(path).map_err(|error| CredentialError::TokenFile {
            path: path.clone(),
            error,
        })?;
        if let Some(mode) = open_mode(path) {
            tracing::warn!(
                file = %path.display(),
                mode = format!("{mode:o}"),
                "the token file {} can be read by more than its owner (mode {mode:o}): chmod 600 it",
                path.display()
            );
        }
        let token = text.trim();
        if token.is_empty() {
            return Err(CredentialError::EmptyToken { path: path.clone() });
        }
        Ok(token.into())
    }
}

/// The permission bits of `file` when its group or others may read or write it.
pub fn open_mode(file: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

/// The bearer tokens in force, and whether this connection's client certificate was verified.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// Reads and writes.
    pub write: Option<Arc<str>>,
    /// Reads only.
    pub read: Option<Arc<str>>,
    /// The client presented a certificate the listener's client CA signed
    /// (`--admin-client-ca`). With no token configured, that is what grants writes: mTLS
    /// instead of tokens. With tokens configured, they are asked for as well: mTLS beside
    /// them.
    pub certified: bool,
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    None,
    Read,
    Write,
}

impl Tokens {
    /// The access the request's bearer token (or the connection's certificate) gives. With no
    /// token configured and no certificate, reads are open and writes refused.
    pub fn access(&self, headers: &HeaderMap) -> Access {
        let none_configured = self.write.is_none() && self.read.is_none();
        let holds =
            |t: &Option<Arc<str>>| t.as_deref().is_some_and(|t| guard::has_token(t, headers));
        if holds(&self.write) || none_configured && self.certified {
            Access::Write
        } else if holds(&self.read) || none_configured {
            Access::Read
        } else {
            Access::None
        }
    }

    /// These tokens on a connection whose client certificate was (or was not) verified.
    pub fn on_connection(&self, certified: bool) -> Tokens {
        Tokens {
            certified,
            ..self.clone()
        }
    }
}

/// A listener's credentials: where its tokens come from, those in force, its TLS.
pub struct AdminCredentials {
    write: Option<TokenSource>,
    read: Option<TokenSource>,
    tokens: ArcSwap<Tokens>,
    tls: Option<Arc<ReloadableServer>>,
}

impl AdminCredentials {
    /// Reads every source now; every error at once.
    pub fn load(
        write: Option<TokenSource>,
        read: Option<TokenSource>,
        tls: Option<ServerFiles>,
    ) -> Result<AdminCredentials, Vec<CredentialError>> {
        let mut errors = Vec::new();
        let mut token = |s: &Option<TokenSource>| match s.as_ref().map(TokenSource::read) {
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                errors.push(e);
                None
            }
            None => None,
        };
        let tokens = Tokens {
            write: token(&write),
            read: token(&read),
            certified: false,
        };
        let tls = match tls.map(|files| ReloadableServer::load(files, &[b"http/1.1"])) {
            Some(Ok(t)) => Some(Arc::new(t)),
            Some(Err(e)) => {
                errors.push(e.into());
                None
            }
            None => None,
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(AdminCredentials {
            write,
            read,
            tokens: ArcSwap::from_pointee(tokens),
            tls,
        })
    }

    /// Tokens fixed for a test or a library caller, no TLS.
    pub fn fixed(tokens: Tokens) -> AdminCredentials {
        AdminCredentials {
            write: tokens.write.clone().map(TokenSource::Given),
            read: tokens.read.clone().map(TokenSource::Given),
            tokens: ArcSwap::from_pointee(tokens),
            tls: None,
        }
    }

    /// The tokens in force.
    pub fn tokens(&self) -> Arc<Tokens> {
        self.tokens.load_full()
    }

    /// The listener's TLS (`None`: plain HTTP).
    pub fn tls(&self) -> Option<&Arc<ReloadableServer>> {
        self.tls.as_ref()
    }

    /// Re-reads the token files and the TLS files. Each part that fails keeps what was in
    /// force; every failure is returned (and logged, and counted in
    /// `meshlb_admin_credential_reloads_total{result="failure"}`).
    pub fn reload(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let before = self.tokens();
        let mut reread = |source: &Option<TokenSource>, old: &Option<Arc<str>>| match source {
            None => None,
            Some(s) => match s.read() {
                Ok(t) => Some(t),
                Err(e) => {
                    errors.push(e.to_string());
                    old.clone()
                }
            },
        };
        let tokens = Tokens {
            write: reread(&self.write, &before.write),
            read: reread(&self.read, &before.read),
            certified: false,
        };
        self.tokens.store(Arc::new(tokens));
        if let Some(tls) = &self.tls {
            if let Err(e) = tls.reload() {
                errors.push(CredentialError::Tls(e).to_string());
            }
        }
        let result = if errors.is_empty() {
            "success"
        } else {
            "failure"
        };
        metrics::counter!("meshlb_admin_credential_reloads_total", "result" => result).increment(1);
        for e in &errors {
            tracing::error!(error = %e, "the admin listener keeps its previous credentials");
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {t}").parse().expect("value"),
        );
        h
    }

    #[test]
    fn a_verified_certificate_writes_only_where_no_token_is_configured() {
        let open = Tokens::default();
        assert_eq!(open.access(&HeaderMap::new()), Access::Read);
        assert_eq!(
            open.on_connection(true).access(&HeaderMap::new()),
            Access::Write
        );
        let tokens = Tokens {
            write: Some("w".into()),
            read: Some("r".into()),
            certified: false,
        };
        let certified = tokens.on_connection(true);
        assert_eq!(certified.access(&HeaderMap::new()), Access::None);
        assert_eq!(certified.access(&bearer("r")), Access::Read);
        assert_eq!(certified.access(&bearer("w")), Access::Write);
    }

    #[test]
    fn a_reload_rereads_a_token_file_and_keeps_the_old_token_when_it_fails() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("token");
        std::fs::write(&file, "first\n").expect("write");
        let c = AdminCredentials::load(Some(TokenSource::File(file.clone())), None, None)
            .expect("loads");
        assert_eq!(c.tokens().write.as_deref(), Some("first"));
        std::fs::write(&file, "second").expect("write");
        assert!(c.reload().is_empty());
        assert_eq!(c.tokens().write.as_deref(), Some("second"));
        std::fs::remove_file(&file).expect("remove");
        let errors = c.reload();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("token"), "{errors:?}");
        assert_eq!(c.tokens().write.as_deref(), Some("second"));
    }

    #[test]
    fn a_token_file_beyond_its_owner_is_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("token");
        std::fs::write(&file, "t").expect("write");
        for (mode, open) in [
            (0o600, false),
            (0o400, false),
            (0o640, true),
            (0o644, true),
            (0o606, true),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(open_mode(&file).is_some(), open, "{mode:o}");
        }
    }
}
