//! Why an aggregator node did not start. Each says what failed and where.

/// An aggregator node could not start; nothing of it keeps running.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The config did not validate: every error, each naming file, field path and reason.
    #[error("{0}")]
    Config(lb_core::ConfigErrors),
    #[error(transparent)]
    Open(#[from] meshlb_node::control::protocol::OpenError),
    /// Settings that cannot work together.
    #[error("{0}")]
    Settings(String),
    #[error(transparent)]
    Mesh(#[from] mesh::StartError),
    #[error(transparent)]
    Admin(#[from] crate::admin::BindError),
    #[error(transparent)]
    DrainState(#[from] crate::drain_state::StateFileError),
    /// A frontend (DNS, proxy, layer 4, notifications) could not be built or bound.
    #[error("{part}: {message}")]
    Frontend { part: &'static str, message: String },
}

impl StartError {
    pub(super) fn frontend(part: &'static str) -> impl FnOnce(String) -> StartError {
        move |message| StartError::Frontend { part, message }
    }
}
