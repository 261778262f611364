//! Tokens and requests served per hour, pod, model and engine (`serving_hourly`, SPEC §9): written, replaced,
//! archived and restored with the hour's usage rows.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::metering::ServingRow;

/// Removes what is stored for some hours of a cluster (the caller writes their new rows).
pub async fn delete(conn: &mut PgConnection, cluster: &str, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM serving_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes the serving rows of some hours (none stored for them).
pub async fn insert(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[(DateTime<Utc>, &[ServingRow])],
) -> Result<(), sqlx::Error> {
    let rows = || hours.iter().flat_map(|(h, rows)| rows.iter().map(move |r| (*h, r)));
    if rows().next().is_none() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO serving_hourly (cluster, hour, namespace, pod, model, engine, input_tokens, output_tokens, requests)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[],
             $8::int8[], $9::int8[])",
        cluster,
        &rows().map(|(h, _)| h).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.key.namespace.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.key.pod.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.key.model.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.key.engine.as_str().to_string()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.input_tokens).collect::<Vec<Option<i64>>>() as &[Option<i64>],
        &rows().map(|(_, r)| r.output_tokens).collect::<Vec<Option<i64>>>() as &[Option<i64>],
        &rows().map(|(_, r)| r.requests).collect::<Vec<_>>(),
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
        "INSERT INTO replaced_serving_hourly SELECT $1, s.* FROM serving_hourly s WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the rows a run replaced for an hour differ from those stored now.
pub async fn changed(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             (SELECT namespace, pod, model, engine, input_tokens, output_tokens, requests
              FROM replaced_serving_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT SELECT namespace, pod, model, engine, input_tokens, output_tokens, requests
              FROM serving_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT namespace, pod, model, engine, input_tokens, output_tokens, requests
              FROM serving_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT SELECT namespace, pod, model, engine, input_tokens, output_tokens, requests
              FROM replaced_serving_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
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
        "DELETE FROM replaced_serving_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
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
        "INSERT INTO serving_hourly (cluster, hour, namespace, pod, model, engine, input_tokens, output_tokens, requests)
         SELECT cluster, hour, namespace, pod, model, engine, input_tokens, output_tokens, requests
         FROM replaced_serving_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the serving rows, stored and replaced, before the raw rows' retention horizon (`cardhour retention`):
/// those hours can no longer be ingested nor undone, and a closed month keeps its unit cost in its frozen extras.
/// The rows removed from `serving_hourly` and from `replaced_serving_hourly`.
pub async fn delete_before_retention(conn: &mut PgConnection) -> Result<(u64, u64), sqlx::Error> {
    let stored = sqlx::query!(
        "DELETE FROM serving_hourly WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(&mut *conn)
    .await?;
    let replaced = sqlx::query!(
        "DELETE FROM replaced_serving_hourly
         WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(conn)
    .await?;
    Ok((stored.rows_affected(), replaced.rows_affected()))
}

/// One model of one serving pod in one hour, with the team and billing day the hour belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedHour {
    pub cluster: String,
    pub hour: DateTime<Utc>,
    pub day: chrono::NaiveDate,
    pub team: String,
    pub namespace: String,
    pub pod: String,
    pub model: String,
    pub engine: String,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub requests: i64,
}

/// The serving rows of billing days `[from, to)` within `scope`. A pod-hour's team is that of its usage rows (the
/// namespace's team in the hour), else the namespace's team resolved for the hour.
pub async fn served_hours(
    pool: &sqlx::PgPool,
    from: chrono::NaiveDate,
    to: chrono::NaiveDate,
    scope: &crate::access::Scope,
) -> Result<Vec<ServedHour>, sqlx::Error> {
    sqlx::query_as!(
        ServedHour,
        r#"WITH s AS (
               SELECT s.*, billing_date(s.hour) AS day,
                      COALESCE((SELECT u.team FROM gpu_usage_hourly u
                                WHERE u.cluster = s.cluster AND u.hour = s.hour AND u.namespace = s.namespace
                                  AND u.pod = s.pod LIMIT 1),
                               (SELECT n.team FROM usage_namespace_hourly n
                                WHERE n.cluster = s.cluster AND n.hour = s.hour AND n.namespace = s.namespace LIMIT 1),
                               team_of(s.cluster, s.namespace, s.hour, NULL)) AS team
               FROM serving_hourly s
               WHERE s.hour >= ($1::date - 1)::timestamptz AND s.hour < ($2::date + 2)::timestamptz)
           SELECT cluster AS "cluster!", hour AS "hour!", day AS "day!", team AS "team!", namespace AS "namespace!",
                  pod AS "pod!", model AS "model!", engine AS "engine!", input_tokens, output_tokens,
                  requests AS "requests!"
           FROM s
           WHERE day >= $1 AND day < $2 AND ($3::text[] IS NULL OR team = ANY($3))
           ORDER BY cluster, hour, namespace, pod, model, engine"#,
        from,
        to,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

/// The GPU a serving pod held in one hour, per GPU model, resource kind and node pool: what its cost is priced from.
#[derive(Debug, Clone, PartialEq)]
pub struct ServingPodUsage {
    pub cluster: String,
    pub hour: DateTime<Utc>,
    /// The hour's billing day (rates are dated in billing days).
    pub day: chrono::NaiveDate,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    pub kind: String,
    pub pool: Option<String>,
    pub gpu_seconds: f64,
    /// Replica-seconds (q, each replica a card), for time-sliced replicas billed as whole cards.
    pub replica_seconds: f64,
}

/// The usage of the pods that served in billing days `[from, to)` (every cluster; the caller scopes by team).
pub async fn serving_pod_usage(
    pool: &sqlx::PgPool,
    from: chrono::NaiveDate,
    to: chrono::NaiveDate,
) -> Result<Vec<ServingPodUsage>, sqlx::Error> {
    sqlx::query_as!(
        ServingPodUsage,
        r#"WITH p AS (SELECT DISTINCT cluster, hour, namespace, pod FROM serving_hourly
                      WHERE hour >= ($1::date - 1)::timestamptz AND hour < ($2::date + 2)::timestamptz
                        AND billing_date(hour) >= $1 AND billing_date(hour) < $2)
           SELECT u.cluster AS "cluster!", u.hour AS "hour!", billing_date(u.hour) AS "day!", u.namespace AS "namespace!", u.pod AS "pod!",
                  u.gpu_model AS "gpu_model!", u.kind AS "kind!", ns.pool AS "pool?",
                  sum(u.gpu_seconds) AS "gpu_seconds!", sum(u.gpu_seconds / u.fraction) AS "replica_seconds!"
           FROM p JOIN gpu_usage_hourly u
                ON u.cluster = p.cluster AND u.hour = p.hour AND u.namespace = p.namespace AND u.pod = p.pod
           LEFT JOIN node_settings ns ON ns.cluster = u.cluster AND ns.node = u.node
           GROUP BY u.cluster, u.hour, u.namespace, u.pod, u.gpu_model, u.kind, ns.pool
           ORDER BY 1, 2, 3, 4, 5, 6, 7"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}
