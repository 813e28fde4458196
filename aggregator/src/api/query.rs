//! Why a query string is refused: the errors of the API's read parameters (`search.rs`,
//! `health.rs`), answered 400 with their message.

/// A query parameter the API cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// A known parameter with a value of the wrong form.
    #[error("{param}: expected {expected}, got `{got}`")]
    Value {
        param: String,
        expected: &'static str,
        got: String,
    },
    /// A parameter the endpoint does not know, with the ones it does.
    #[error("unknown parameter `{param}` ({known})")]
    Unknown { param: String, known: &'static str },
}

impl QueryError {
    pub fn value(param: &str, expected: &'static str, got: &str) -> QueryError {
        QueryError::Value {
            param: param.to_string(),
            expected,
            got: got.to_string(),
        }
    }
}
