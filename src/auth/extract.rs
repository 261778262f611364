//! The axum extractor that turns `Authorization: Bearer <token>` into a [`Principal`].

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use sqlx::PgPool;

use super::{Principal, hash_token};
use crate::db;
use crate::error::ApiError;

/// The authenticated caller of a handler.
pub struct Caller(pub Principal);

impl<S> FromRequestParts<S> for Caller
where
    PgPool: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).ok_or(ApiError::Unauthorized)?;
        let secret = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or(ApiError::Unauthorized)?;
        let pool = PgPool::from_ref(state);
        let principal = db::tokens::find_active(&pool, &hash_token(secret)).await?.ok_or(ApiError::Unauthorized)?;
        Ok(Caller(principal))
    }
}
