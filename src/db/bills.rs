//! What bills are made of: daily usage and capacity per billing day, and closed months' snapshots.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{PgConnection, PgPool};

use crate::access::Scope;
use crate::billing::Month;

#[derive(Debug, Clone, PartialEq)]
pub struct DayUsage {
    pub team: String,
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub day: NaiveDate,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// Usage of billing days `[from, to)`, all clusters, within `scope`.
pub async fn usage_by_day(
    pool: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
    scope: &Scope,
) -> Result<Vec<DayUsage>, sqlx::Error> {
    sqlx::query_as!(
        DayUsage,
        r#"SELECT team, namespace, gpu_model, kind, day, sum(gpu_seconds) AS "gpu_seconds!",
                  sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                  sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
           FROM usage_namespace_daily
           WHERE day >= $1 AND day < $2 AND ($3::text[] IS NULL OR team = ANY($3))
           GROUP BY team, namespace, gpu_model, kind, day"#,
        from,
        to,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone, PartialEq)]
pub struct DayCapacity {
    pub gpu_model: String,
    pub day: NaiveDate,
    pub card_seconds: f64,
    /// The part of `card_seconds` offered to workloads (not cordoned, allocatable).
    pub offered_card_seconds: f64,
}

pub async fn capacity_by_day(pool: &PgPool, from: NaiveDate, to: NaiveDate) -> Result<Vec<DayCapacity>, sqlx::Error> {
    sqlx::query_as!(
        DayCapacity,
        r#"SELECT gpu_model, day, sum(card_seconds) AS "card_seconds!",
                  sum(offered_card_seconds) AS "offered_card_seconds!"
           FROM capacity_daily
           WHERE day >= $1 AND day < $2 GROUP BY gpu_model, day"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// A closed month as stored, with the content hash stored at close and the one of the snapshot as read now
/// (both from SQL `snapshot_hash`, the one definition): they differ only if the snapshot was altered.
#[derive(Debug, Clone)]
pub struct ClosedMonth {
    pub month: String,
    pub closed_at: DateTime<Utc>,
    pub closed_by: String,
    pub snapshot: serde_json::Value,
    pub content_hash: String,
    pub actual_hash: String,
}

impl ClosedMonth {
    pub fn intact(&self) -> bool {
        self.content_hash == self.actual_hash
    }
}

pub async fn closed(conn: &mut PgConnection, month: Month) -> Result<Option<ClosedMonth>, sqlx::Error> {
    sqlx::query_as!(
        ClosedMonth,
        r#"SELECT month, closed_at, closed_by, snapshot, content_hash, snapshot_hash(snapshot) AS "actual_hash!"
         FROM closed_months WHERE month = $1"#,
        month.to_string()
    )
    .fetch_optional(conn)
    .await
}

/// The content hash `month` was closed with and the one its snapshot has now (hashed in the database: nothing but
/// the two hashes is sent); `None` when it is not closed.
pub async fn closed_hashes(pool: &PgPool, month: Month) -> Result<Option<(String, String)>, sqlx::Error> {
    let r = sqlx::query!(
        r#"SELECT content_hash, snapshot_hash(snapshot) AS "actual!" FROM closed_months WHERE month = $1"#,
        month.to_string()
    )
    .fetch_optional(pool)
    .await?;
    Ok(r.map(|r| (r.content_hash, r.actual)))
}

/// Closed months strictly before `month`, newest first.
pub async fn closed_before(conn: &mut PgConnection, month: Month) -> Result<Vec<ClosedMonth>, sqlx::Error> {
    sqlx::query_as!(
        ClosedMonth,
        r#"SELECT month, closed_at, closed_by, snapshot, content_hash, snapshot_hash(snapshot) AS "actual_hash!"
         FROM closed_months WHERE month < $1 ORDER BY month DESC"#,
        month.to_string()
    )
    .fetch_all(conn)
    .await
}

/// Months strictly after `month` that are closed, oldest first.
pub async fn closed_after(conn: &mut PgConnection, month: Month) -> Result<Vec<ClosedMonth>, sqlx::Error> {
    sqlx::query_as!(
        ClosedMonth,
        r#"SELECT month, closed_at, closed_by, snapshot, content_hash, snapshot_hash(snapshot) AS "actual_hash!"
         FROM closed_months WHERE month > $1 ORDER BY month"#,
        month.to_string()
    )
    .fetch_all(conn)
    .await
}

/// Stores a close and its audit entry (`action`, `summary` as its `after`), through `close_month()`, the one door
/// into `closed_months` (migrations/20261212000200_closed_month_door.sql: a plain INSERT is refused); `false` when
/// the month was closed already (nothing written). The content hash is set by the database (trigger
/// `content_hash`), from the snapshot as stored.
pub async fn insert_closed(
    conn: &mut PgConnection,
    month: Month,
    actor: &str,
    snapshot: &serde_json::Value,
    action: &str,
    summary: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT close_month($1, $2, $3, $4, $5) AS "closed!""#,
        month.to_string(),
        actor,
        snapshot,
        action,
        summary
    )
    .fetch_one(conn)
    .await
}

pub async fn setting(conn: &mut PgConnection, key: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT value FROM settings WHERE key = $1", key).fetch_optional(conn).await
}
