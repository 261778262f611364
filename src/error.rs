//! The HTTP boundary's error: every failure becomes JSON `{status, code, field?, message}`; 5xx details are
//! logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// One invalid input field.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

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
    #[error("{message}")]
    Conflict { field: Option<String>, message: String },
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid(vec![FieldError { field: field.into(), message: message.into() }])
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
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "bad_request",
            Self::Invalid(_) => "invalid_input",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::Conflict { .. } => "conflict",
            Self::Internal(_) => "internal",
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        Self::Internal(e.into())
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
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let Self::Internal(e) = &self {
            tracing::error!(error = ?e, "internal error answering a request");
        }
        let (field, errors) = match &self {
            Self::BadRequest { field, .. } | Self::Conflict { field, .. } => (field.clone(), Vec::new()),
            Self::Invalid(errors) => (errors.first().map(|e| e.field.clone()), errors.clone()),
            _ => (None, Vec::new()),
        };
        let message = match &self {
            Self::Invalid(errors) => {
                errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ")
            }
            other => other.to_string(),
        };
        let body = ErrorBody { status: status.as_u16(), code: self.code().to_string(), field, message, errors };
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
