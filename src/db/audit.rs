//! The audit log: who changed what, when, before and after. Written in the same transaction as the change.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

/// What a write of one row did, for its audit entry; each carries the row as stored now.
#[derive(Debug, Clone, PartialEq)]
pub enum Change<T> {
    /// There was none: this write made it.
    Created(T),
    /// It was `before` and is `after` now.
    Changed { before: T, after: T },
    /// It held these values already: nothing was written.
    Unchanged(T),
}

impl<T> Change<T> {
    /// The row as stored now.
    pub fn into_after(self) -> T {
        match self {
            Self::Created(t) | Self::Unchanged(t) | Self::Changed { after: t, .. } => t,
        }
    }
}

/// Records `change` of `entity`: a creation (no `before`) or a change; nothing for a write that changed nothing
/// (a repeated request is not history). `true` when an entry was written.
pub async fn record_change<T: Serialize>(
    conn: &mut PgConnection,
    actor: &str,
    action: &str,
    entity: &str,
    change: &Change<T>,
) -> Result<bool, sqlx::Error> {
    let json = |t: &T| serde_json::to_value(t).ok().filter(|v| !v.is_null());
    let (before, after) = match change {
        Change::Unchanged(_) => return Ok(false),
        Change::Created(after) => (None, json(after)),
        Change::Changed { before, after } => (json(before), json(after)),
    };
    record(conn, actor, action, entity, before, after).await?;
    Ok(true)
}

pub async fn record(
    conn: &mut PgConnection,
    actor: &str,
    action: &str,
    entity: &str,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO audit_log (actor, action, entity, before, after) VALUES ($1, $2, $3, $4, $5)",
        actor,
        action,
        entity,
        before,
        after
    )
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub entity: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// The newest entries first.
pub async fn list(pool: &PgPool, limit: i64, before_id: Option<i64>) -> Result<Vec<AuditEntry>, sqlx::Error> {
    sqlx::query_as!(
        AuditEntry,
        "SELECT id, at, actor, action, entity, before, after FROM audit_log
         WHERE $2::bigint IS NULL OR id < $2 ORDER BY id DESC LIMIT $1",
        limit,
        before_id
    )
    .fetch_all(pool)
    .await
}
