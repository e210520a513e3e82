//! Why a document operation was refused.

/// Why a document operation was refused. Mirrors `field-error` in the WIT.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    #[error("`{0}` is a reserved field name")]
    ReservedField(String),
    #[error("wrong type: {0}")]
    WrongType(String),
    #[error("invalid path: {0}")]
    InvalidPath(String),
    #[error("invalid document JSON: {0}")]
    InvalidJson(String),
    #[error("document too large: {0}")]
    TooLarge(String),
}
