//! Quota scopes per hour (`quota_hourly`, SPEC §10) and what each GPU model used of them (`quota_model_hourly`):
//! written, replaced, archived and restored with the hour's usage rows; and the queue → team mappings
//! (`queue_mappings`).

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgConnection;

use crate::metering::QuotaRow;

/// Removes what is stored for some hours of a cluster (the caller writes their new rows); the models' rows go
/// with their scopes' (`ON DELETE CASCADE`).
pub async fn delete(conn: &mut PgConnection, cluster: &str, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM quota_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes the quota rows of some hours (none stored for them).
pub async fn insert(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[(DateTime<Utc>, &[QuotaRow])],
) -> Result<(), sqlx::Error> {
    let rows = || hours.iter().flat_map(|(h, rows)| rows.iter().map(move |r| (*h, r)));
    if rows().next().is_none() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO quota_hourly (cluster, hour, scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds,
             borrowed_card_seconds, reserved_idle_card_seconds, label_team)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::float8[],
             $8::float8[], $9::text[])",
        cluster,
        &rows().map(|(h, _)| h).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.scope.kind.as_str().to_string()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.scope.name.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.split.guaranteed).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.split.used_within).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.split.borrowed).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.split.reserved_idle).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.label_team.clone()).collect::<Vec<Option<String>>>() as &[Option<String>],
    )
    .execute(&mut *conn)
    .await?;
    let models = || rows().flat_map(|(h, r)| r.by_model.iter().map(move |m| (h, r, m)));
    if models().next().is_none() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO quota_model_hourly (cluster, hour, scope_kind, scope, gpu_model, used_card_seconds,
             used_within_card_seconds)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::float8[])",
        cluster,
        &models().map(|(h, _, _)| h).collect::<Vec<_>>(),
        &models().map(|(_, r, _)| r.scope.kind.as_str().to_string()).collect::<Vec<_>>(),
        &models().map(|(_, r, _)| r.scope.name.clone()).collect::<Vec<_>>(),
        &models().map(|(_, _, m)| m.gpu_model.clone()).collect::<Vec<_>>(),
        &models().map(|(_, _, m)| m.used).collect::<Vec<_>>(),
        &models().map(|(_, _, m)| m.used_within).collect::<Vec<_>>(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Keeps the rows of some hours with the run replacing them.
pub async fn save_replaced(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO replaced_quota_hourly SELECT $1, q.* FROM quota_hourly q WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO replaced_quota_model_hourly SELECT $1, q.* FROM quota_model_hourly q
         WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the rows a run replaced for an hour differ from those stored now (scopes, or their models).
pub async fn changed(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let scopes = sqlx::query_scalar!(
        r#"SELECT EXISTS (
             (SELECT scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds, borrowed_card_seconds,
                  reserved_idle_card_seconds, label_team
              FROM replaced_quota_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT SELECT scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds, borrowed_card_seconds,
                  reserved_idle_card_seconds, label_team
              FROM quota_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds, borrowed_card_seconds,
                  reserved_idle_card_seconds, label_team
              FROM quota_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT SELECT scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds, borrowed_card_seconds,
                  reserved_idle_card_seconds, label_team
              FROM replaced_quota_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
           ) AS "changed!""#,
        run_id,
        cluster,
        hour
    )
    .fetch_one(&mut *conn)
    .await?;
    if scopes {
        return Ok(true);
    }
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             (SELECT scope_kind, scope, gpu_model, used_card_seconds, used_within_card_seconds
              FROM replaced_quota_model_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT SELECT scope_kind, scope, gpu_model, used_card_seconds, used_within_card_seconds
              FROM quota_model_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT scope_kind, scope, gpu_model, used_card_seconds, used_within_card_seconds
              FROM quota_model_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT SELECT scope_kind, scope, gpu_model, used_card_seconds, used_within_card_seconds
              FROM replaced_quota_model_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
           ) AS "changed!""#,
        run_id,
        cluster,
        hour
    )
    .fetch_one(conn)
    .await
}

/// Drops what a run kept of an hour (it replaced equal rows).
pub async fn forget_replaced(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM replaced_quota_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM replaced_quota_model_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Puts back the rows a run replaced for an hour (the hour's current rows already removed).
pub async fn restore(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO quota_hourly (cluster, hour, scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds,
             borrowed_card_seconds, reserved_idle_card_seconds, label_team)
         SELECT cluster, hour, scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds,
             borrowed_card_seconds, reserved_idle_card_seconds, label_team
         FROM replaced_quota_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO quota_model_hourly (cluster, hour, scope_kind, scope, gpu_model, used_card_seconds,
             used_within_card_seconds)
         SELECT cluster, hour, scope_kind, scope, gpu_model, used_card_seconds, used_within_card_seconds
         FROM replaced_quota_model_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// One quota scope's figures over a range of hours for one team, card-seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeSums {
    pub team: String,
    pub scope_kind: String,
    pub scope: String,
    pub guaranteed: f64,
    pub used_within: f64,
    pub borrowed: f64,
    pub reserved_idle: f64,
    /// Hours with a row.
    pub hours: i64,
}

/// The scopes' sums over `[from, to)` per team (a scope's team resolved hour by hour: a mapping dated in the
/// range splits it), summed in a fixed order so any read gives the same bits.
pub async fn sums(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<ScopeSums>, sqlx::Error> {
    sqlx::query_as!(
        ScopeSums,
        r#"SELECT team AS "team!", scope_kind AS "scope_kind!", scope AS "scope!",
               sum(guaranteed_card_seconds ORDER BY cluster, hour) AS "guaranteed!",
               sum(used_within_card_seconds ORDER BY cluster, hour) AS "used_within!",
               sum(borrowed_card_seconds ORDER BY cluster, hour) AS "borrowed!",
               sum(reserved_idle_card_seconds ORDER BY cluster, hour) AS "reserved_idle!",
               count(*) AS "hours!"
           FROM (SELECT q.*, scope_team_of(cluster, scope_kind, scope, hour, label_team) AS team
                 FROM quota_hourly q WHERE hour >= $1 AND hour < $2) t
           GROUP BY team, scope_kind, scope
           ORDER BY team, scope_kind, scope"#,
        from,
        to
    )
    .fetch_all(conn)
    .await
}

/// A queue's team from a date on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueMapping {
    pub id: i64,
    pub cluster: Option<String>,
    pub queue_kind: String,
    pub queue: String,
    pub team_id: String,
    pub valid_from: NaiveDate,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// Every queue mapping, by queue and date.
pub async fn list_mappings(conn: &mut PgConnection) -> Result<Vec<QueueMapping>, sqlx::Error> {
    sqlx::query_as!(
        QueueMapping,
        "SELECT id, cluster, queue_kind, queue, team_id, valid_from, created_by, created_at FROM queue_mappings
         ORDER BY queue_kind, queue, cluster NULLS FIRST, valid_from"
    )
    .fetch_all(conn)
    .await
}

/// What a new queue mapping says.
#[derive(Debug, Clone, PartialEq)]
pub struct NewQueueMapping<'a> {
    pub cluster: Option<&'a str>,
    pub queue_kind: &'a str,
    pub queue: &'a str,
    pub team_id: &'a str,
    pub valid_from: NaiveDate,
    pub created_by: &'a str,
}

/// Adds a mapping; `None` when one for the same queue, cluster and date exists already.
pub async fn insert_mapping(
    conn: &mut PgConnection,
    m: &NewQueueMapping<'_>,
) -> Result<Option<QueueMapping>, sqlx::Error> {
    sqlx::query_as!(
        QueueMapping,
        "INSERT INTO queue_mappings (cluster, queue_kind, queue, team_id, valid_from, created_by)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (coalesce(cluster, ''), queue_kind, queue, valid_from) DO NOTHING
         RETURNING id, cluster, queue_kind, queue, team_id, valid_from, created_by, created_at",
        m.cluster,
        m.queue_kind,
        m.queue,
        m.team_id,
        m.valid_from,
        m.created_by
    )
    .fetch_optional(conn)
    .await
}

/// The mapping of exactly this cluster (`None`: every cluster), queue and day, locked until the transaction ends
/// (an import decides insert, update or unchanged on it, and no one may change it meanwhile).
pub async fn mapping_at(
    conn: &mut PgConnection,
    cluster: Option<&str>,
    queue_kind: &str,
    queue: &str,
    valid_from: NaiveDate,
) -> Result<Option<QueueMapping>, sqlx::Error> {
    sqlx::query_as!(
        QueueMapping,
        "SELECT id, cluster, queue_kind, queue, team_id, valid_from, created_by, created_at FROM queue_mappings
         WHERE coalesce(cluster, '') = coalesce($1, '') AND queue_kind = $2 AND queue = $3 AND valid_from = $4
         FOR UPDATE",
        cluster,
        queue_kind,
        queue,
        valid_from
    )
    .fetch_optional(conn)
    .await
}

/// Points mapping `id` at another team. Nothing stored follows: a queue's team is resolved when quota rows are
/// read (`queue_team_of`).
pub async fn update_mapping_team(
    conn: &mut PgConnection,
    id: i64,
    team_id: &str,
    actor: &str,
) -> Result<QueueMapping, sqlx::Error> {
    sqlx::query_as!(
        QueueMapping,
        "UPDATE queue_mappings SET team_id = $2, created_by = $3, created_at = now() WHERE id = $1
         RETURNING id, cluster, queue_kind, queue, team_id, valid_from, created_by, created_at",
        id,
        team_id,
        actor
    )
    .fetch_one(conn)
    .await
}

/// Whether a queue mapping may name `cluster`: one cardhour knows (`queue_mappings.cluster` references it).
pub async fn mapping_cluster_known(conn: &mut PgConnection, cluster: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM clusters WHERE name = $1) AS "known!""#, cluster)
        .fetch_one(conn)
        .await
}

/// Deletes the rows (stored and replaced; the models' with their scopes') of the hours before raw retention's
/// horizon, with the raw rows.
pub async fn delete_before_retention(conn: &mut PgConnection) -> Result<(u64, u64), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM replaced_quota_model_hourly
         WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(&mut *conn)
    .await?;
    let stored = sqlx::query!(
        "DELETE FROM quota_hourly WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(&mut *conn)
    .await?;
    let replaced = sqlx::query!(
        "DELETE FROM replaced_quota_hourly
         WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(conn)
    .await?;
    Ok((stored.rows_affected(), replaced.rows_affected()))
}
