//! The audit log: who changed what, when, before and after. Written in the same transaction as the change.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

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

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
