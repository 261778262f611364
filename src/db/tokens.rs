//! API tokens: issued by the CLI, looked up by digest on every request (an expired or revoked token is not
//! found), with their last use recorded at most once a minute.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::access::{Credential, Principal, Role};

/// A token that does not expire.
pub async fn insert(
    conn: &mut PgConnection,
    name: &str,
    hash: &str,
    role: Role,
    teams: &[String],
) -> Result<i64, sqlx::Error> {
    insert_expiring(conn, name, hash, role, teams, None).await
}

/// A token refused from `expires_at` on (`None`: never).
pub async fn insert_expiring(
    conn: &mut PgConnection,
    name: &str,
    hash: &str,
    role: Role,
    teams: &[String],
    expires_at: Option<DateTime<Utc>>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO api_tokens (name, token_hash, role, teams, expires_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        name,
        hash,
        role.as_str(),
        teams,
        expires_at
    )
    .fetch_one(conn)
    .await
}

/// The caller holding the token with this digest, unless it is unknown, revoked or expired. Records the use when
/// the last recorded one is more than a minute old: one statement, and no write at all for the other requests.
pub async fn find_active(pool: &PgPool, hash: &str) -> Result<Option<Principal>, sqlx::Error> {
    let row = sqlx::query!(
        r#"WITH t AS (
               SELECT id, name, role, teams, last_used_at FROM api_tokens
               WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())),
           used AS (
               UPDATE api_tokens a SET last_used_at = now() FROM t
               WHERE a.id = t.id AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute'))
           SELECT id, name, role, teams FROM t"#,
        hash
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|r| {
        Some(Principal {
            credential: Credential::Token(r.id),
            name: r.name,
            role: Role::parse(&r.role)?,
            teams: r.teams,
        })
    }))
}

pub async fn revoke(conn: &mut PgConnection, id: i64) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!("UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", id)
        .execute(conn)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// A token as `cardhour token list` shows it (never its digest).
#[derive(Debug, Clone, serde::Serialize)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub teams: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Every token, oldest first.
pub async fn list(pool: &PgPool) -> Result<Vec<TokenInfo>, sqlx::Error> {
    sqlx::query_as!(
        TokenInfo,
        "SELECT id, name, role, teams, created_at, expires_at, last_used_at, revoked_at FROM api_tokens ORDER BY id"
    )
    .fetch_all(pool)
    .await
}
