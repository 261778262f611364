//! The HTTP API's error: every failure becomes JSON `{status, code, field?, message}`; 5xx details are logged,
//! never sent. A use case's refusal ([`crate::usecase::Error`]) becomes its answer in `api::errors`; a database
//! error of the API's own (tokens, idempotency keys, probes) is read as the use cases read it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// One invalid input field: the one shape every face renders ([`crate::validate::FieldError`]), `{field,
/// message}` in JSON.
pub use crate::validate::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request cannot be read (bad JSON, bad query string).
    #[error("{message}")]
    BadRequest { field: Option<String>, message: String },
    /// Well-formed but invalid values; every bad field is listed.
    #[error("invalid input")]
    Invalid(Vec<FieldError>),
    #[error("missing or invalid API token")]
    Unauthorized,
    #[error("your role may not do this")]
    Forbidden,
    /// Absent — or present but outside the caller's scope: a team lead learns nothing of other teams.
    #[error("{0} not found")]
    NotFound(String),
    /// A 404 for a value the caller named in `field` (e.g. `?team=visoin`): the field says which.
    #[error("{message}")]
    NotFoundField { field: String, message: String },
    #[error("{message}")]
    Conflict { field: Option<String>, message: String },
    /// A month that is not complete, closed without an override: 409 with what stands in the way.
    #[error("month {} is not ready to close: {}", .0.month,
        .0.blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotReady(Box<crate::ledger::readiness::Readiness>),
    /// The body is larger than the one limit every route shares.
    #[error("the request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// The request took longer than the server allows, or the database cancelled its statement.
    #[error("the request took too long and was cancelled; narrow it (a shorter range, fewer rows)")]
    Timeout,
    /// The service cannot answer now (its database unreachable, its schema behind): 503, retry later.
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid(vec![FieldError::new(field, message)])
    }

    pub fn bad_request(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest { field: Some(field.into()), message: message.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound(_) | Self::NotFoundField { .. } => StatusCode::NOT_FOUND,
            Self::Conflict { .. } | Self::NotReady(_) => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Timeout | Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "bad_request",
            Self::Invalid(_) => "invalid_input",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound(_) | Self::NotFoundField { .. } => "not_found",
            Self::Conflict { .. } => "conflict",
            Self::NotReady(_) => "not_ready",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Timeout => "timeout",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<crate::validate::Invalid> for ApiError {
    fn from(e: crate::validate::Invalid) -> Self {
        Self::Invalid(vec![e])
    }
}

/// Constraint violations are the caller's (a race lost, a value the schema refuses): 409 or 422 naming the
/// field, never a 500. A cancelled statement (`statement_timeout`) is a 503. Everything else is internal. The
/// reading is the use cases' ([`crate::usecase::Error`]'s, from `db::constraint`), so every face agrees.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        crate::usecase::Error::from(e).into()
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub status: u16,
    pub code: String,
    /// The first offending field, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
    /// Every offending field (validation errors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// What stands in the way of closing a month (`not_ready`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<crate::ledger::readiness::Blocker>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Self::Internal(e) = &self {
            tracing::error!(error = ?e, "internal error answering a request");
        }
        let (field, errors) = match &self {
            Self::BadRequest { field, .. } | Self::Conflict { field, .. } => (field.clone(), Vec::new()),
            Self::NotFoundField { field, .. } => (Some(field.clone()), Vec::new()),
            Self::Invalid(errors) => (errors.first().map(|e| e.field.clone()), errors.clone()),
            Self::NotReady(_) => (Some("month".to_string()), Vec::new()),
            _ => (None, Vec::new()),
        };
        let message = match &self {
            Self::Invalid(errors) => {
                errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ")
            }
            other => other.to_string(),
        };
        let blockers = match &self {
            Self::NotReady(r) => r.blockers.clone(),
            _ => Vec::new(),
        };
        let body =
            ErrorBody { status: status.as_u16(), code: self.code().to_string(), field, message, errors, blockers };
        (status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_are_json_with_status_code_and_field() {
        let r = ApiError::invalid("pue", "must be at least 1.0").into_response();
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = axum::body::to_bytes(r.into_body(), 10_000).await.unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["status"], 422);
        assert_eq!(v["field"], "pue");
        assert_eq!(v["code"], "invalid_input");
        let r = ApiError::Internal(anyhow::anyhow!("password=secret")).into_response();
        let body = axum::body::to_bytes(r.into_body(), 10_000).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
    }
}
