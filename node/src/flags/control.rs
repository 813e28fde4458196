//! Command-line settings of the control plane every node shares (docs/api.md#one-config-for-the-mesh).

use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use crate::control::writer_key::{SigningKey, VerifyKeys};
use crate::control::{ConfigRole, ControlKey, ControlSettings, DocumentSettings};

use super::{FlagError, MeshArgs};

#[derive(Debug, Clone, clap::Args)]
pub struct ControlArgs {
    /// Run the config the mesh's primary holds: fetch every new generation it announces in
    /// gossip, check it, keep it in --config (atomically) and reload. --config may be absent
    /// at the first start (the node then waits with an empty config).
    #[arg(long)]
    pub config_from_mesh: bool,
    /// The largest config document fetched from the primary or written through the API.
    #[arg(long, value_name = "BYTES", default_value_t = crate::control::DEFAULT_MAX_DOCUMENT_BYTES)]
    pub config_max_bytes: usize,
    /// The longest a fetch of the primary's document may take.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub config_fetch_timeout_ms: u64,
    /// Verify an https:// primary's certificate against this CA (PEM) alone [default: the
    /// public web PKI].
    #[arg(long, value_name = "FILE")]
    pub config_ca: Option<PathBuf>,
    /// Trust an https:// primary by its key alone: sha256//BASE64 of its SubjectPublicKeyInfo
    /// (curl's --pinnedpubkey); takes the place of --config-ca.
    #[arg(long, value_name = "PIN")]
    pub config_pin: Option<lb_tls::SpkiPin>,
    /// Present this client certificate (PEM) when fetching from a primary whose admin
    /// listener asks for one (--admin-client-ca).
    #[arg(long, value_name = "FILE", requires = "config_client_key")]
    pub config_client_cert: Option<PathBuf>,
    /// The private key (PEM) of --config-client-cert.
    #[arg(long, value_name = "FILE", requires = "config_client_cert")]
    pub config_client_key: Option<PathBuf>,
    /// The Ed25519 key (PEM PKCS#8) this config-writing node signs each generation with (the
    /// primary, or each aggregator on the config store); `meshlb config keygen` makes one.
    #[arg(long, value_name = "FILE")]
    pub config_signing_key: Option<PathBuf>,
    /// A public key (PEM) generations must be signed with; repeat it during a rotation. With
    /// one, a generation that no writer signed — announced by a node holding only the cluster
    /// key, or altered by a relay — is refused.
    #[arg(long, value_name = "FILE")]
    pub config_verify_key: Vec<PathBuf>,
    /// Fetches of this node's document served at once; more are answered 503 and the
    /// follower tries another holder (at least 1).
    #[arg(long, value_name = "N", default_value_t = crate::control::DEFAULT_SERVE_MAX as u16,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub config_serve_max: u16,
}

impl ControlArgs {
    /// The control-plane settings of a node in `role`, keyed from the cluster key.
    pub fn settings(
        &self,
        role: ConfigRole,
        mesh: &MeshArgs,
    ) -> Result<ControlSettings, FlagError> {
        let (current, previous) = mesh.key_texts()?;
        Ok(ControlSettings {
            role,
            key: ControlKey::new(&current, previous.as_deref()),
            max_document_bytes: self.config_max_bytes.max(1),
            fetch_timeout: Duration::from_millis(self.config_fetch_timeout_ms.max(1)),
            fetch_trust: lb_tls::ClientTrust {
                ca_file: self.config_ca.clone(),
                pin: self.config_pin,
                identity: self
                    .config_client_cert
                    .clone()
                    .zip(self.config_client_key.clone()),
            },
            store: None,
            documents: self.documents()?,
        })
    }

    /// The writer key and the keys generations are checked against.
    fn documents(&self) -> Result<DocumentSettings, FlagError> {
        let signing = match &self.config_signing_key {
            Some(path) => Some(Arc::new(SigningKey::load(path)?)),
            None => None,
        };
        let verify = VerifyKeys::load(&self.config_verify_key).map_err(FlagError::VerifyKeys)?;
        let verify = match &signing {
            Some(key) => verify.with(key.public()),
            None => verify,
        };
        Ok(DocumentSettings {
            signing,
            verify,
            serve_max: usize::from(self.config_serve_max),
        })
    }
}
