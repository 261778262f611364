//! API tokens: issued by the CLI, looked up by digest on every request.

use sqlx::{PgConnection, PgPool};

use crate::auth::{Principal, Role};

pub async fn insert(
    conn: &mut PgConnection,
    name: &str,
    hash: &str,
    role: Role,
    teams: &[String],
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO api_tokens (name, token_hash, role, teams) VALUES ($1, $2, $3, $4) RETURNING id",
        name,
        hash,
        role.as_str(),
        teams
    )
    .fetch_one(conn)
    .await
}

pub async fn find_active(pool: &PgPool, hash: &str) -> Result<Option<Principal>, sqlx::Error> {
    let row =
        sqlx::query!("SELECT id, name, role, teams FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL", hash)
            .fetch_optional(pool)
            .await?;
    Ok(row.and_then(|r| Some(Principal { token_id: r.id, name: r.name, role: Role::parse(&r.role)?, teams: r.teams })))
}

pub async fn revoke(conn: &mut PgConnection, id: i64) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!("UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", id)
        .execute(conn)
        .await?;
    Ok(r.rows_affected() == 1)
}
