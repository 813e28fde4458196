//! The config store on an aggregator's command line (docs/api.md#the-config-in-etcd).

use std::path::PathBuf;
use std::time::Duration;

use crate::control::etcd::{StoreSettings, StoreUrl};

#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Keep the mesh's config in etcd: etcd://HOST:PORT[,HOST:PORT...]/PREFIX (etcds:// over
    /// TLS). This aggregator takes the API's writes as etcd transactions, watches the store
    /// and serves each generation to the mesh; --config is its copy on disk.
    #[arg(long, value_name = "URL", conflicts_with_all = ["config_primary", "config_from_mesh"])]
    pub config_store: Option<StoreUrl>,
    /// The CA (PEM) etcd's certificate must chain to (etcds://) [default: the web PKI].
    #[arg(long, value_name = "FILE", requires = "config_store")]
    pub config_store_ca: Option<PathBuf>,
    /// A client certificate (PEM) for etcd's client-certificate authentication.
    #[arg(long, value_name = "FILE", requires_all = ["config_store", "config_store_key"])]
    pub config_store_cert: Option<PathBuf>,
    /// The private key (PEM) of --config-store-cert.
    #[arg(long, value_name = "FILE", requires = "config_store_cert")]
    pub config_store_key: Option<PathBuf>,
    /// etcd's user, when its authentication is on; its password is in --config-store-password-file.
    #[arg(long, value_name = "NAME", requires_all = ["config_store", "config_store_password_file"])]
    pub config_store_user: Option<String>,
    /// The file holding the password of --config-store-user.
    #[arg(long, value_name = "FILE", requires = "config_store_user")]
    pub config_store_password_file: Option<PathBuf>,
    /// The longest one request to an etcd member may take before the next member is tried, and
    /// the longest a write waits for a newer generation its If-Match names to arrive.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub config_store_timeout_ms: u64,
}

impl StoreArgs {
    /// The store's settings, when `--config-store` names one.
    pub fn settings(&self) -> Option<StoreSettings> {
        Some(StoreSettings {
            url: self.config_store.clone()?,
            tls: lb_tls::ClientTrust {
                ca_file: self.config_store_ca.clone(),
                pin: None,
                identity: self
                    .config_store_cert
                    .clone()
                    .zip(self.config_store_key.clone()),
            },
            user: self
                .config_store_user
                .clone()
                .zip(self.config_store_password_file.clone()),
            request_timeout: Duration::from_millis(self.config_store_timeout_ms.max(1)),
        })
    }
}
