//! The one error of the use cases, face-neutral: each face (HTTP, pages, command line) turns it into its own answer.

use crate::ledger::LedgerError;
use crate::validate::Invalid;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Values that break a rule; every bad field is listed.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Invalid>),
    /// Absent — or present but outside the caller's scope: a team lead learns nothing of other teams.
    #[error("{0} not found")]
    NotFound(String),
    /// Absent, for a value the caller named in `field`.
    #[error("{message}")]
    NotFoundField { field: String, message: String },
    #[error("{message}")]
    Conflict { field: Option<String>, message: String },
    /// A cluster-wide use case asked for by a team-scoped caller.
    #[error("this is for global readers only")]
    Forbidden,
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl Error {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid(vec![Invalid::new(field, message)])
    }
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Self::Invalid(vec![e])
    }
}

impl From<crate::db::rates::RateBookError> for Error {
    fn from(e: crate::db::rates::RateBookError) -> Self {
        match e {
            crate::db::rates::RateBookError::Database(e) => Self::Database(e),
            other => Self::Ledger(other.into()),
        }
    }
}
