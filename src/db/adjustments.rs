//! Adjustments (maker-checker credits and debits): entered, decided once, read by the statements they are booked
//! to. The table's trigger refuses any other change and every delete. Rows as stored ([`Row`]); the ledger's
//! `Adjustment` is read from them by the use cases.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::PgConnection;

use crate::access::Scope;
use crate::billing::Month;

/// An adjustment as stored.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: i64,
    pub month: String,
    pub team_id: String,
    pub amount: Decimal,
    pub reason: String,
    pub status: String,
    pub entered_by: String,
    pub entered_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub decision_note: Option<String>,
    pub booked_month: Option<String>,
}

/// Enters a pending adjustment: `amount` yuan (signed, to the fen) of `team` in `month`.
pub async fn insert(
    conn: &mut PgConnection,
    (month, team, amount, reason): (Month, &str, Decimal, &str),
    actor: &str,
) -> Result<Row, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "INSERT INTO adjustments (month, team_id, amount, reason, entered_by) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                   decision_note, booked_month",
        month.to_string(),
        team,
        amount,
        reason,
        actor
    )
    .fetch_one(conn)
    .await
}

/// Adjustment `id` under its row lock (a decision reads it so: two deciders take turns, the second finds it
/// decided).
pub async fn get_for_update(conn: &mut PgConnection, id: i64) -> Result<Option<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "SELECT id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                decision_note, booked_month
         FROM adjustments WHERE id = $1 FOR UPDATE",
        id
    )
    .fetch_optional(conn)
    .await
}

/// Records the decision of pending adjustment `id`: `approved` (booked to `booked`) or `rejected` (`booked` None).
pub async fn decide(
    conn: &mut PgConnection,
    id: i64,
    status: &str,
    actor: &str,
    note: Option<&str>,
    booked: Option<Month>,
) -> Result<Row, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "UPDATE adjustments SET status = $2, decided_by = $3, decided_at = now(), decision_note = $4, booked_month = $5
         WHERE id = $1 AND status = 'pending'
         RETURNING id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                   decision_note, booked_month",
        id,
        status,
        actor,
        note,
        booked.map(|m| m.to_string())
    )
    .fetch_one(conn)
    .await
}

/// The approved adjustments booked to `month`, by id.
pub async fn booked_to(conn: &mut PgConnection, month: Month) -> Result<Vec<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "SELECT id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                decision_note, booked_month
         FROM adjustments WHERE status = 'approved' AND booked_month = $1 ORDER BY id",
        month.to_string()
    )
    .fetch_all(conn)
    .await
}

/// The pending adjustments of months up to `month`, by id.
pub async fn pending_through(conn: &mut PgConnection, month: Month) -> Result<Vec<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "SELECT id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                decision_note, booked_month
         FROM adjustments WHERE status = 'pending' AND month <= $1 ORDER BY id",
        month.to_string()
    )
    .fetch_all(conn)
    .await
}

/// The adjustments of the teams of `scope`, the newest first: of `month` (corrected or booked to it) when given,
/// in `status` when given, at most `limit`.
pub async fn list(
    conn: &mut PgConnection,
    scope: &Scope,
    month: Option<Month>,
    status: Option<&str>,
    limit: i64,
) -> Result<Vec<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        "SELECT id, month, team_id, amount, reason, status, entered_by, entered_at, decided_by, decided_at,
                decision_note, booked_month
         FROM adjustments
         WHERE ($1::text[] IS NULL OR team_id = ANY($1))
           AND ($2::text IS NULL OR month = $2 OR booked_month = $2)
           AND ($3::text IS NULL OR status = $3)
         ORDER BY id DESC LIMIT $4",
        scope.teams.as_deref() as Option<&[String]>,
        month.map(|m| m.to_string()),
        status,
        limit
    )
    .fetch_all(conn)
    .await
}

/// Every closed month from `from` on.
pub async fn closed_from(conn: &mut PgConnection, from: Month) -> Result<BTreeSet<Month>, sqlx::Error> {
    let rows = sqlx::query_scalar!("SELECT month FROM closed_months WHERE month >= $1", from.to_string())
        .fetch_all(conn)
        .await?;
    Ok(rows.iter().filter_map(|m| m.parse().ok()).collect())
}
