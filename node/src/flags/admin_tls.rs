//! The admin listener's credentials on the command line, both roles alike: token files and
//! TLS (docs/security.md#tls-on-the-control-paths).

use std::path::PathBuf;
use std::sync::Arc;

use super::FlagError;

use crate::credentials::{AdminCredentials, TokenSource};

#[derive(Debug, Clone, clap::Args)]
pub struct AdminTlsArgs {
    /// Serve the admin listener over TLS (1.2 and 1.3) with this certificate chain (PEM, leaf
    /// first); re-read on every reload (SIGHUP). No plain listener remains unless
    /// --admin-plain-listen asks for one.
    #[arg(long, value_name = "FILE", requires = "admin_tls_key")]
    pub admin_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --admin-tls-cert; re-read with it.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    pub admin_tls_key: Option<PathBuf>,
    /// Ask every client of the TLS admin listener for a certificate this CA (PEM) signed, and
    /// refuse the handshake without one. With no token configured, a verified certificate is
    /// what grants writes; with tokens, they are needed as well. Re-read on reload.
    #[arg(long, value_name = "FILE", requires = "admin_tls_cert")]
    pub admin_client_ca: Option<PathBuf>,
}

impl AdminTlsArgs {
    fn files(&self) -> Option<lb_tls::ServerFiles> {
        Some(lb_tls::ServerFiles {
            cert: self.admin_tls_cert.clone()?,
            key: self.admin_tls_key.clone()?,
            client_ca: self.admin_client_ca.clone(),
        })
    }

    /// The listener's credentials: each token from its file (re-read on reload), else from
    /// its environment variable (fixed); every error at once.
    pub fn credentials(
        &self,
        write: (Option<&PathBuf>, &str),
        read: Option<(Option<&PathBuf>, &str)>,
    ) -> Result<Arc<AdminCredentials>, FlagError> {
        let source = |(file, env): (Option<&PathBuf>, &str)| match file {
            Some(f) => Some(TokenSource::File(f.clone())),
            None => std::env::var(env)
                .ok()
                .map(|t| TokenSource::Given(t.trim().into())),
        };
        AdminCredentials::load(source(write), read.and_then(source), self.files())
            .map(Arc::new)
            .map_err(FlagError::Credentials)
    }
}
