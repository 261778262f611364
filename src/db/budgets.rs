//! Budgets and the alerts they raised.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

use crate::access::Scope;

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Budget {
    pub team_id: String,
    pub month: String,
    #[schema(value_type = String)]
    pub amount: Decimal,
    #[schema(value_type = Vec<String>)]
    pub thresholds: Vec<Decimal>,
}

pub async fn upsert(conn: &mut PgConnection, b: &Budget, actor: &str) -> Result<Option<Budget>, sqlx::Error> {
    let before = sqlx::query_as!(
        Budget,
        "SELECT team_id, month, amount, thresholds FROM budgets WHERE team_id = $1 AND month = $2",
        b.team_id,
        b.month
    )
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO budgets (team_id, month, amount, thresholds, updated_by) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (team_id, month) DO UPDATE SET amount = EXCLUDED.amount, thresholds = EXCLUDED.thresholds,
             updated_by = EXCLUDED.updated_by, updated_at = now()",
        b.team_id,
        b.month,
        b.amount,
        &b.thresholds,
        actor
    )
    .execute(conn)
    .await?;
    Ok(before)
}

pub async fn for_month(pool: &PgPool, month: &str, scope: &Scope) -> Result<Vec<Budget>, sqlx::Error> {
    sqlx::query_as!(
        Budget,
        "SELECT team_id, month, amount, thresholds FROM budgets
         WHERE month = $1 AND ($2::text[] IS NULL OR team_id = ANY($2)) ORDER BY team_id",
        month,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

/// Waits for the one turn at checking and delivering budget alerts, held until `tx` ends.
pub async fn take_alert_turn(tx: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('cardhour:budget-alerts'))").execute(tx).await?;
    Ok(())
}

/// Records a crossing the first time it is seen; `false` when it was known already.
pub async fn raise(
    pool: &PgPool,
    team: &str,
    month: &str,
    threshold: Decimal,
    basis: &str,
    payload: &serde_json::Value,
) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!(
        "INSERT INTO budget_alerts (team_id, month, threshold, basis, payload) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING",
        team,
        month,
        threshold,
        basis,
        payload
    )
    .execute(pool)
    .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Alert {
    pub team_id: String,
    pub month: String,
    #[schema(value_type = String)]
    pub threshold: Decimal,
    pub basis: String,
    pub first_seen_at: DateTime<Utc>,
    pub payload: serde_json::Value,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
}

pub async fn alerts(pool: &PgPool, month: &str, undelivered_only: bool) -> Result<Vec<Alert>, sqlx::Error> {
    sqlx::query_as!(
        Alert,
        "SELECT team_id, month, threshold, basis, first_seen_at, payload, attempts, last_error, delivered_at
         FROM budget_alerts WHERE month = $1 AND (NOT $2 OR delivered_at IS NULL)
         ORDER BY team_id, threshold, basis",
        month,
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
