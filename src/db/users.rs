//! The portal's users: created, listed, disabled and given a new password by the CLI; read on every page request
//! (so a disabled user's session ends at its next request).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

use crate::access::Role;
use crate::validate::TeamId;

/// A user as stored, without the password hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    pub id: i64,
    pub username: String,
    pub role: String,
    pub teams: Vec<String>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl User {
    pub fn role(&self) -> Option<Role> {
        Role::parse(&self.role)
    }
}

/// What a login checks: the user and the stored hash.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub user: User,
    pub password_hash: String,
}

/// Inserts a user; `None` when the name is taken (nothing written).
pub async fn insert(
    conn: &mut PgConnection,
    username: &str,
    role: Role,
    teams: &[TeamId],
    password_hash: &str,
) -> Result<Option<User>, sqlx::Error> {
    let teams: Vec<String> = teams.iter().map(TeamId::to_string).collect();
    sqlx::query_as!(
        User,
        "INSERT INTO users (username, role, teams, password_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (username) DO NOTHING
         RETURNING id, username, role, teams, disabled_at, created_at, updated_at",
        username,
        role.as_str(),
        &teams[..],
        password_hash
    )
    .fetch_optional(conn)
    .await
}

/// Every user, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<User>, sqlx::Error> {
    sqlx::query_as!(
        User,
        "SELECT id, username, role, teams, disabled_at, created_at, updated_at FROM users ORDER BY username"
    )
    .fetch_all(pool)
    .await
}

/// The user `id` unless it is disabled (or gone): what a session's request re-reads.
pub async fn find_active(pool: &PgPool, id: i64) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as!(
        User,
        "SELECT id, username, role, teams, disabled_at, created_at, updated_at FROM users
         WHERE id = $1 AND disabled_at IS NULL",
        id
    )
    .fetch_optional(pool)
    .await
}

/// The user named `username` with its hash, unless disabled: what a login checks the password against.
pub async fn credentials(pool: &PgPool, username: &str) -> Result<Option<Credentials>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT id, username, role, teams, disabled_at, created_at, updated_at, password_hash FROM users
         WHERE username = $1 AND disabled_at IS NULL",
        username
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| Credentials {
        user: User {
            id: r.id,
            username: r.username,
            role: r.role,
            teams: r.teams,
            disabled_at: r.disabled_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        },
        password_hash: r.password_hash,
    }))
}

/// The user named `username`, locked for the rest of the transaction (for a change and its audit entry).
pub async fn get_for_update(conn: &mut PgConnection, username: &str) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as!(
        User,
        "SELECT id, username, role, teams, disabled_at, created_at, updated_at FROM users
         WHERE username = $1 FOR UPDATE",
        username
    )
    .fetch_optional(conn)
    .await
}

/// Disables user `id` (already disabled: unchanged); the user as it is now.
pub async fn disable(conn: &mut PgConnection, id: i64) -> Result<User, sqlx::Error> {
    sqlx::query_as!(
        User,
        "UPDATE users SET disabled_at = coalesce(disabled_at, now()), updated_at = now() WHERE id = $1
         RETURNING id, username, role, teams, disabled_at, created_at, updated_at",
        id
    )
    .fetch_one(conn)
    .await
}

/// Gives user `id` a new password hash; the user as it is now.
pub async fn set_password(conn: &mut PgConnection, id: i64, password_hash: &str) -> Result<User, sqlx::Error> {
    sqlx::query_as!(
        User,
        "UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1
         RETURNING id, username, role, teams, disabled_at, created_at, updated_at",
        id,
        password_hash
    )
    .fetch_one(conn)
    .await
}

/// Records that user `id` signed in now.
pub async fn record_login(pool: &PgPool, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE users SET last_login_at = now() WHERE id = $1", id).execute(pool).await?;
    Ok(())
}

/// When each user last signed in, by id (users that never did are absent).
pub async fn last_logins(pool: &PgPool) -> Result<Vec<(i64, DateTime<Utc>)>, sqlx::Error> {
    let rows =
        sqlx::query!(r#"SELECT id, last_login_at AS "at!" FROM users WHERE last_login_at IS NOT NULL ORDER BY id"#)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.at)).collect())
}
