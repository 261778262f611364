//! The API's capability extractors (who is calling the JSON face): each authenticates `Authorization: Bearer <token>` (scheme case-insensitive) and
//! admits only the roles its capability allows. A 401 carries `WWW-Authenticate: Bearer realm="cardhour"` (RFC
//! 6750), with `error="invalid_token"` when a token was sent but is unknown, expired or revoked.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use sqlx::PgPool;

use super::error::ApiError;
use crate::access::{Principal, Scope, Writer};
use crate::auth::hash_token;
use crate::db;

/// Admin or finance: writes (rates, mappings, teams, budgets) and closing months, as the [`Writer`] the write use
/// cases take.
pub struct Finance(pub Writer);

/// Anyone but a team lead: reads every team's data and the cluster-wide figures.
pub struct GlobalReader(pub Principal);

/// Any authenticated caller, with the only data it may see: every query and export of its handler takes this
/// scope (a team lead: its own teams; others do not exist for it).
pub struct ScopedReader(pub Scope);

/// Any authenticated caller, who it is: for what names the reader (a statement's prepared-by). Its data is
/// [`Principal::scope`]'s, as [`ScopedReader`]'s.
pub struct Reader(pub Principal);

/// Why a request was refused before its handler ran.
#[derive(Debug)]
pub enum AuthRejection {
    /// No credentials (or another scheme than Bearer).
    Missing,
    /// A bearer credential that is not a well-formed token.
    Malformed,
    /// A well-formed token that is unknown, expired or revoked.
    InvalidToken,
    /// Authenticated, but the role lacks the capability.
    Forbidden,
    /// The token could not be looked up.
    Internal(sqlx::Error),
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        let challenge = match self {
            Self::Missing => r#"Bearer realm="cardhour""#,
            Self::Malformed => r#"Bearer realm="cardhour", error="invalid_request""#,
            Self::InvalidToken => r#"Bearer realm="cardhour", error="invalid_token""#,
            Self::Forbidden => return ApiError::Forbidden.into_response(),
            Self::Internal(e) => return ApiError::from(e).into_response(),
        };
        let mut response = ApiError::Unauthorized.into_response();
        response.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        response
    }
}

/// The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive (RFC 7235 §2.1).
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthRejection> {
    let value = headers.get(AUTHORIZATION).ok_or(AuthRejection::Missing)?;
    // not visible ASCII: not a credential of ours, whatever its scheme
    let value = value.to_str().map_err(|_| AuthRejection::Malformed)?.trim();
    let (scheme, token) = value.split_once([' ', '\t']).unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthRejection::Missing);
    }
    let token = token.trim();
    // RFC 6750 token68: one word of visible characters
    if token.is_empty() || token.contains(|c: char| c.is_ascii_whitespace()) {
        return Err(AuthRejection::Malformed);
    }
    Ok(token)
}

async fn authenticate<S>(parts: &Parts, state: &S) -> Result<Principal, AuthRejection>
where
    PgPool: FromRef<S>,
{
    let token = bearer_token(&parts.headers)?;
    let pool = PgPool::from_ref(state);
    db::tokens::find_active(&pool, &hash_token(token))
        .await
        .map_err(AuthRejection::Internal)?
        .ok_or(AuthRejection::InvalidToken)
}

impl<S> FromRequestParts<S> for Finance
where
    PgPool: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let p = authenticate(parts, state).await?;
        Writer::of(&p).map(Finance).ok_or(AuthRejection::Forbidden)
    }
}

impl<S> FromRequestParts<S> for GlobalReader
where
    PgPool: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let p = authenticate(parts, state).await?;
        if p.role.reads_globally() { Ok(GlobalReader(p)) } else { Err(AuthRejection::Forbidden) }
    }
}

impl<S> FromRequestParts<S> for ScopedReader
where
    PgPool: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ScopedReader(authenticate(parts, state).await?.scope()))
    }
}

impl<S> FromRequestParts<S> for Reader
where
    PgPool: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Reader(authenticate(parts, state).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_of(value: &str) -> Result<String, &'static str> {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        bearer_token(&headers).map(str::to_string).map_err(|e| match e {
            AuthRejection::Missing => "missing",
            AuthRejection::Malformed => "malformed",
            _ => "other",
        })
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_one_word() {
        for v in ["Bearer chr_x", "bearer chr_x", "BEARER chr_x", "bEaReR   chr_x  ", "Bearer\tchr_x"] {
            assert_eq!(token_of(v).as_deref(), Ok("chr_x"), "{v:?}");
        }
        assert_eq!(token_of("Basic dXNlcjpwdw=="), Err("missing"));
        assert_eq!(token_of("Bearerchr_x"), Err("missing"));
        assert_eq!(token_of("Bearer"), Err("malformed"));
        assert_eq!(token_of("Bearer a b"), Err("malformed"));
        assert_eq!(bearer_token(&HeaderMap::new()).map_err(|e| format!("{e:?}")), Err("Missing".into()));
    }
}
