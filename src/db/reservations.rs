//! Reserved-quota billing's reads and writes (SPEC §10): the quota scopes' guarantees per day for a month's bills,
//! and the scopes' dated reservation terms (`reservation_terms`).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use sqlx::{PgConnection, PgPool};

/// One quota scope's guarantee on one billing day, card-seconds, with the team it belongs to that day.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeDay {
    pub cluster: String,
    pub team: String,
    pub scope_kind: String,
    pub scope: String,
    pub day: NaiveDate,
    pub guaranteed: f64,
}

/// The quota scopes' guarantees per cluster, team, scope and billing day in `[from, to)`, summed in a fixed order
/// so every read gives the same bits (a scope's team resolved hour by hour, like its usage's).
pub async fn scope_days(pool: &PgPool, from: NaiveDate, to: NaiveDate) -> Result<Vec<ScopeDay>, sqlx::Error> {
    sqlx::query_as!(
        ScopeDay,
        r#"SELECT cluster AS "cluster!", team AS "team!", scope_kind AS "scope_kind!", scope AS "scope!",
               day AS "day!",
               sum(guaranteed_card_seconds ORDER BY hour) AS "guaranteed!"
           FROM (SELECT q.*, billing_date(hour) AS day,
                        scope_team_of(cluster, scope_kind, scope, hour, label_team) AS team
                 FROM quota_hourly q
                 -- a day in any time zone lies within a day of its UTC date: the index narrows, the date decides
                 WHERE hour >= ($1::date - 1)::timestamptz AND hour < ($2::date + 2)::timestamptz) t
           WHERE day >= $1 AND day < $2
           GROUP BY cluster, team, scope_kind, scope, day
           ORDER BY cluster, team, scope_kind, scope, day"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// What one GPU model ran within a quota scope's guarantee on one billing day, card-seconds; `gpu_model` `None`
/// for hours stored before the models were recorded (migration 20261217000100), credited at the terms' model.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeModelDay {
    pub cluster: String,
    pub team: String,
    pub scope_kind: String,
    pub scope: String,
    pub day: NaiveDate,
    pub gpu_model: Option<String>,
    pub used_within: f64,
}

/// The scopes' use within their guarantees per cluster, team, scope, billing day and GPU model in `[from, to)`,
/// summed in a fixed order (a scope's team resolved hour by hour, as for [`scope_days`]).
pub async fn scope_model_days(
    pool: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<ScopeModelDay>, sqlx::Error> {
    sqlx::query_as!(
        ScopeModelDay,
        r#"SELECT cluster AS "cluster!", team AS "team!", scope_kind AS "scope_kind!", scope AS "scope!",
               day AS "day!", gpu_model,
               sum(used_within ORDER BY hour) AS "used_within!"
           FROM (SELECT u.*, billing_date(hour) AS day,
                        scope_team_of(cluster, scope_kind, scope, hour, label_team) AS team
                 FROM (SELECT m.cluster, m.hour, m.scope_kind, m.scope, m.gpu_model,
                              m.used_within_card_seconds AS used_within, q.label_team
                       FROM quota_model_hourly m
                       JOIN quota_hourly q USING (cluster, hour, scope_kind, scope)
                       WHERE m.hour >= ($1::date - 1)::timestamptz AND m.hour < ($2::date + 2)::timestamptz
                         AND m.used_within_card_seconds > 0
                       UNION ALL
                       SELECT q.cluster, q.hour, q.scope_kind, q.scope, NULL,
                              q.used_within_card_seconds, q.label_team
                       FROM quota_hourly q
                       WHERE q.hour >= ($1::date - 1)::timestamptz AND q.hour < ($2::date + 2)::timestamptz
                         AND q.used_within_card_seconds > 0
                         AND NOT EXISTS (SELECT 1 FROM quota_model_hourly m
                                         WHERE (m.cluster, m.hour, m.scope_kind, m.scope)
                                             = (q.cluster, q.hour, q.scope_kind, q.scope))) u) t
           WHERE day >= $1 AND day < $2
           GROUP BY cluster, team, scope_kind, scope, day, gpu_model
           ORDER BY cluster, team, scope_kind, scope, day, gpu_model"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// A scope's reservation terms from a date on, as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StoredTerm {
    pub id: i64,
    pub cluster: Option<String>,
    pub scope_kind: String,
    pub scope: String,
    pub gpu_model: String,
    pub factor: Decimal,
    pub valid_from: NaiveDate,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl StoredTerm {
    /// The term as billing reads it.
    pub fn term(&self) -> crate::billing::ReservationTerm {
        crate::billing::ReservationTerm {
            cluster: self.cluster.clone(),
            scope_kind: self.scope_kind.clone(),
            scope: self.scope.clone(),
            gpu_model: self.gpu_model.clone(),
            factor: self.factor,
            valid_from: self.valid_from,
        }
    }
}

/// Every reservation term, by scope and date.
pub async fn list(conn: &mut PgConnection) -> Result<Vec<StoredTerm>, sqlx::Error> {
    sqlx::query_as!(
        StoredTerm,
        "SELECT id, cluster, scope_kind, scope, gpu_model, factor, valid_from, created_by, created_at
         FROM reservation_terms ORDER BY scope_kind, scope, cluster NULLS FIRST, valid_from"
    )
    .fetch_all(conn)
    .await
}

/// What new terms say.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTerm<'a> {
    pub cluster: Option<&'a str>,
    pub scope_kind: &'a str,
    pub scope: &'a str,
    pub gpu_model: &'a str,
    pub factor: Decimal,
    pub valid_from: NaiveDate,
    pub created_by: &'a str,
}

/// Adds terms; `None` when the scope has terms for the same cluster and date already.
pub async fn insert(conn: &mut PgConnection, t: &NewTerm<'_>) -> Result<Option<StoredTerm>, sqlx::Error> {
    sqlx::query_as!(
        StoredTerm,
        "INSERT INTO reservation_terms (cluster, scope_kind, scope, gpu_model, factor, valid_from, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (coalesce(cluster, ''), scope_kind, scope, valid_from) DO NOTHING
         RETURNING id, cluster, scope_kind, scope, gpu_model, factor, valid_from, created_by, created_at",
        t.cluster,
        t.scope_kind,
        t.scope,
        t.gpu_model,
        t.factor,
        t.valid_from,
        t.created_by
    )
    .fetch_optional(conn)
    .await
}
