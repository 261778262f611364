//! Budgets and the alerts they raised.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

use super::audit::Change;
use crate::access::Scope;
use crate::billing::Month;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    pub team_id: String,
    pub month: String,
    pub amount: Decimal,
    pub thresholds: Vec<Decimal>,
}

/// Creates or changes `team`'s budget of `month`. The creation is the insert that wins (a concurrent one waits for
/// its commit and finds the row); a change reads the row under its lock first, so concurrent puts of one budget
/// take turns and each reads the one before it as its `before` — the audit chain replays — and a put of the values
/// stored writes nothing.
pub async fn put(conn: &mut PgConnection, b: &Budget, actor: &str) -> Result<Change<Budget>, sqlx::Error> {
    let created = sqlx::query_as!(
        Budget,
        "INSERT INTO budgets (team_id, month, amount, thresholds, updated_by) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (team_id, month) DO NOTHING
         RETURNING team_id, month, amount, thresholds",
        b.team_id,
        b.month,
        b.amount,
        &b.thresholds,
        actor
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(created) = created {
        return Ok(Change::Created(created));
    }
    let before = sqlx::query_as!(
        Budget,
        "SELECT team_id, month, amount, thresholds FROM budgets WHERE team_id = $1 AND month = $2 FOR UPDATE",
        b.team_id,
        b.month
    )
    .fetch_one(&mut *conn)
    .await?;
    if before.amount == b.amount && before.thresholds == b.thresholds {
        return Ok(Change::Unchanged(before));
    }
    let after = sqlx::query_as!(
        Budget,
        "UPDATE budgets SET amount = $3, thresholds = $4, updated_by = $5, updated_at = now()
         WHERE team_id = $1 AND month = $2
         RETURNING team_id, month, amount, thresholds",
        b.team_id,
        b.month,
        b.amount,
        &b.thresholds,
        actor
    )
    .fetch_one(conn)
    .await?;
    Ok(Change::Changed { before, after })
}

pub async fn for_month(pool: &PgPool, month: Month, scope: &Scope) -> Result<Vec<Budget>, sqlx::Error> {
    sqlx::query_as!(
        Budget,
        "SELECT team_id, month, amount, thresholds FROM budgets
         WHERE month = $1 AND ($2::text[] IS NULL OR team_id = ANY($2)) ORDER BY team_id",
        month.to_string(),
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

/// Records a crossing the first time it is seen; `false` when it was known already.
pub async fn raise(
    pool: &PgPool,
    team: &str,
    month: Month,
    threshold: Decimal,
    basis: &str,
    payload: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!(
        "INSERT INTO budget_alerts (team_id, month, threshold, basis, payload) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING",
        team,
        month.to_string(),
        threshold,
        basis,
        payload
    )
    .execute(pool)
    .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    pub team_id: String,
    pub month: String,
    pub threshold: Decimal,
    pub basis: String,
    pub first_seen_at: DateTime<Utc>,
    pub payload: serde_json::Value,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
}

pub async fn alerts(pool: &PgPool, month: Month, undelivered_only: bool) -> Result<Vec<Alert>, sqlx::Error> {
    sqlx::query_as!(
        Alert,
        "SELECT team_id, month, threshold, basis, first_seen_at, payload, attempts, last_error, delivered_at
         FROM budget_alerts WHERE month = $1 AND (NOT $2 OR delivered_at IS NULL)
         ORDER BY team_id, threshold, basis",
        month.to_string(),
        undelivered_only
    )
    .fetch_all(pool)
    .await
}

/// Records one delivery attempt: delivered, or the error it met.
pub async fn attempted(pool: &PgPool, a: &Alert, error: Option<&str>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE budget_alerts SET attempts = attempts + 1, last_error = $5,
             delivered_at = CASE WHEN $5::text IS NULL THEN now() END
         WHERE team_id = $1 AND month = $2 AND threshold = $3 AND basis = $4",
        a.team_id,
        a.month,
        a.threshold,
        a.basis,
        error
    )
    .execute(pool)
    .await?;
    Ok(())
}
