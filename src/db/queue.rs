//! The ingest queue shared by every worker: the hours due per cluster, taken in batches of consecutive hours under
//! a lease; and what the workers saw of each cluster's source (batch size, failures, recovery).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

/// Hours a worker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub cluster: String,
    /// Consecutive, ascending, at least one.
    pub hours: Vec<DateTime<Utc>>,
}

fn interval(d: Duration) -> sqlx::postgres::types::PgInterval {
    sqlx::postgres::types::PgInterval { months: 0, days: 0, microseconds: d.as_micros().min(i64::MAX as u128) as i64 }
}

/// Taken (shared) by every transaction that stores hours of `cluster`, for its whole length: [`plan`] takes it
/// exclusively, so its statement sees every store committed before it and none commits during it — else an hour
/// stored (and taken off the queue) just after the plan's snapshot would be queued again and read twice.
/// (`lock_hour`'s keys are hour numbers, never -1.)
pub async fn lock_for_store(conn: &mut PgConnection, cluster: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock_shared(hashtext($1), -1)", cluster).execute(conn).await?;
    Ok(())
}

/// Queues the hours `[from, to)` of `cluster` not stored yet, and those from `reprocess_from` on that were stored
/// before `cycle_due` (each re-processed once per cycle); each taken no earlier than its end plus `lateness`.
/// Returns how many rows were queued. Call in a transaction of its own (it holds the cluster's store lock).
pub async fn plan(
    conn: &mut PgConnection,
    cluster: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    reprocess_from: DateTime<Utc>,
    cycle_due: DateTime<Utc>,
    lateness: Duration,
) -> Result<u64, sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext($1), -1)", cluster).execute(&mut *conn).await?;
    let done = sqlx::query!(
        "INSERT INTO ingest_queue (cluster, hour, not_before)
         SELECT $1, h, h + interval '1 hour' + $6::interval
         FROM generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') h
         WHERE NOT EXISTS (SELECT 1 FROM ingested_hours i
                           WHERE i.cluster = $1 AND i.hour = h AND (h < $4 OR i.ingested_at >= $5))
         ON CONFLICT (cluster, hour) DO NOTHING",
        cluster,
        from,
        to,
        reprocess_from,
        cycle_due,
        interval(lateness),
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Takes the oldest due hour of `clusters` that nobody holds (or whose lease expired), with the due, free hours
/// right after it of the same cluster, up to `batch_hours(cluster)`; leases them to `worker` for `lease`. Two
/// workers never get the same hour: the rows are locked while taken (`SKIP LOCKED`).
pub async fn claim(
    pool: &PgPool,
    clusters: &[String],
    worker: &str,
    lease: Duration,
    batch_hours: impl Fn(&str) -> u32,
) -> Result<Option<Claim>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let first = sqlx::query!(
        "SELECT cluster, hour FROM ingest_queue
         WHERE cluster = ANY($1) AND not_before <= now() AND (lease_until IS NULL OR lease_until < now())
         ORDER BY hour, cluster
         LIMIT 1
         FOR UPDATE SKIP LOCKED",
        clusters
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(first) = first else { return Ok(None) };
    let n = batch_hours(&first.cluster).max(1);
    let free = sqlx::query_scalar!(
        "SELECT hour FROM ingest_queue
         WHERE cluster = $1 AND hour > $2 AND hour < $2 + make_interval(hours => $3)
           AND not_before <= now() AND (lease_until IS NULL OR lease_until < now())
         ORDER BY hour
         FOR UPDATE SKIP LOCKED",
        first.cluster,
        first.hour,
        n as i32
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut hours = vec![first.hour];
    for h in free {
        if h - *hours.last().expect("one hour at least") != chrono::Duration::hours(1) {
            break;
        }
        hours.push(h);
    }
    sqlx::query!(
        "UPDATE ingest_queue SET leased_by = $3, lease_until = now() + $4::interval
         WHERE cluster = $1 AND hour = ANY($2)",
        first.cluster,
        &hours,
        worker,
        interval(lease),
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Some(Claim { cluster: first.cluster, hours }))
}

/// Extends `worker`'s lease on a claim; `false` when it lost some hour of it (the lease expired and another
/// worker took it, or it was stored meanwhile).
pub async fn renew(pool: &PgPool, claim: &Claim, worker: &str, lease: Duration) -> Result<bool, sqlx::Error> {
    let renewed = sqlx::query!(
        "UPDATE ingest_queue SET lease_until = now() + $4::interval
         WHERE cluster = $1 AND hour = ANY($2) AND leased_by = $3",
        claim.cluster,
        &claim.hours,
        worker,
        interval(lease),
    )
    .execute(pool)
    .await?;
    Ok(renewed.rows_affected() == claim.hours.len() as u64)
}

/// In the transaction storing a claim's hours: removes them from the queue if `worker` still holds every one of
/// them (the fence). `false`: the lease was lost, and the caller must roll back.
pub async fn complete(conn: &mut PgConnection, claim: &Claim, worker: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM ingest_queue WHERE cluster = $1 AND hour = ANY($2) AND leased_by = $3",
        claim.cluster,
        &claim.hours,
        worker
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == claim.hours.len() as u64)
}

/// After a stored range read without leases (a one-off ingest): the hours it stored need no worker.
pub async fn forget_stored(conn: &mut PgConnection, cluster: &str, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM ingest_queue WHERE cluster = $1 AND hour = ANY($2)
           AND (leased_by IS NULL OR lease_until < now())",
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Gives a claim back after a failed read: free again once `retry_in` has passed, the error noted on its hours.
pub async fn release(
    pool: &PgPool,
    claim: &Claim,
    worker: &str,
    retry_in: Duration,
    error: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE ingest_queue SET leased_by = NULL, lease_until = NULL,
             not_before = greatest(not_before, now() + $4::interval),
             failures = failures + CASE WHEN $5::text IS NULL THEN 0 ELSE 1 END,
             last_error = coalesce($5, last_error)
         WHERE cluster = $1 AND hour = ANY($2) AND leased_by = $3",
        claim.cluster,
        &claim.hours,
        worker,
        interval(retry_in),
        error,
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// What is left of `clusters`' work: hours queued (held by other workers too, who may die before storing them),
/// and when the first of them can next be taken — its retry time, or the end of another worker's lease
/// (`None`: nothing queued).
pub async fn remaining(pool: &PgPool, clusters: &[String]) -> Result<(i64, Option<DateTime<Utc>>), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT count(*) AS "hours!",
                  min(CASE WHEN lease_until >= now() THEN greatest(not_before, lease_until) ELSE not_before END)
                      AS next_due
           FROM ingest_queue WHERE cluster = ANY($1)"#,
        clusters
    )
    .fetch_one(pool)
    .await?;
    Ok((row.hours, row.next_due))
}

/// The batch size the workers read `cluster` with (`None` before any worker did).
pub async fn batch_hours(pool: &PgPool, cluster: &str) -> Result<Option<i32>, sqlx::Error> {
    sqlx::query_scalar!("SELECT batch_hours FROM ingest_cluster_state WHERE cluster = $1", cluster)
        .fetch_optional(pool)
        .await
}

/// A batch of `cluster` was stored: failures in a row end (their end noted as a recovery), the batch size is now
/// `batch_hours`.
pub async fn record_success(pool: &PgPool, cluster: &str, batch_hours: u32) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ingest_cluster_state (cluster, batch_hours, last_success_at) VALUES ($1, $2, now())
         ON CONFLICT (cluster) DO UPDATE SET batch_hours = EXCLUDED.batch_hours, last_success_at = now(),
             recovered_at = CASE WHEN ingest_cluster_state.failures_in_row > 0 THEN now()
                                 ELSE ingest_cluster_state.recovered_at END,
             failures_in_row = 0, updated_at = now()",
        cluster,
        batch_hours as i32
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// A read or store of `cluster` failed (`kind`: a short fixed name, `error`: the message); the batch size is now
/// `batch_hours`. Returns the failures in a row.
pub async fn record_failure(
    pool: &PgPool,
    cluster: &str,
    kind: &str,
    error: &str,
    batch_hours: u32,
) -> Result<u32, sqlx::Error> {
    let n = sqlx::query_scalar!(
        "INSERT INTO ingest_cluster_state (cluster, batch_hours, failures_in_row, last_error, last_error_kind,
             last_error_at)
         VALUES ($1, $2, 1, $3, $4, now())
         ON CONFLICT (cluster) DO UPDATE SET batch_hours = EXCLUDED.batch_hours,
             failures_in_row = ingest_cluster_state.failures_in_row + 1, last_error = EXCLUDED.last_error,
             last_error_kind = EXCLUDED.last_error_kind, last_error_at = now(), updated_at = now()
         RETURNING failures_in_row",
        cluster,
        batch_hours as i32,
        error,
        kind
    )
    .fetch_one(pool)
    .await?;
    Ok(n.max(1) as u32)
}

/// Ends the failures in a row of clusters with no failed hour left in the queue (their hours were stored after
/// all, by a retry or by another worker): a recovery, noted as such.
pub async fn settle(pool: &PgPool, clusters: &[String]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE ingest_cluster_state s SET failures_in_row = 0, recovered_at = now(), updated_at = now()
         WHERE s.cluster = ANY($1) AND s.failures_in_row > 0
           AND NOT EXISTS (SELECT 1 FROM ingest_queue q WHERE q.cluster = s.cluster AND q.failures > 0)",
        clusters
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// One cluster's queue and worker state, for ingest health.
#[derive(Debug, Clone, Serialize)]
pub struct QueueHealth {
    pub cluster: String,
    /// Hours queued (due or not), and of them held by a worker now.
    pub queued_hours: i64,
    pub leased_hours: i64,
    /// The workers holding hours of it.
    pub workers: Vec<String>,
    /// Hours whose last read failed, and when the next try is due.
    pub failing_hours: i64,
    pub next_retry_at: Option<DateTime<Utc>>,
    pub batch_hours: Option<i32>,
    pub failures_in_row: i32,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_kind: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub recovered_at: Option<DateTime<Utc>>,
}

/// Queue and worker state of every cluster that has either.
pub async fn health(pool: &PgPool) -> Result<Vec<QueueHealth>, sqlx::Error> {
    sqlx::query_as!(
        QueueHealth,
        r#"WITH q AS (
               SELECT cluster, count(*) AS queued,
                      count(*) FILTER (WHERE leased_by IS NOT NULL AND lease_until >= now()) AS leased,
                      coalesce(array_agg(DISTINCT leased_by) FILTER (WHERE leased_by IS NOT NULL
                                                                     AND lease_until >= now()), '{}') AS workers,
                      count(*) FILTER (WHERE failures > 0) AS failing,
                      min(not_before) FILTER (WHERE failures > 0) AS next_retry
               FROM ingest_queue GROUP BY cluster)
           SELECT coalesce(s.cluster, q.cluster) AS "cluster!", coalesce(q.queued, 0) AS "queued_hours!",
                  coalesce(q.leased, 0) AS "leased_hours!", coalesce(q.workers, '{}') AS "workers!",
                  coalesce(q.failing, 0) AS "failing_hours!", q.next_retry AS next_retry_at,
                  s.batch_hours AS "batch_hours?", coalesce(s.failures_in_row, 0) AS "failures_in_row!",
                  s.last_success_at AS "last_success_at?", s.last_error AS "last_error?",
                  s.last_error_kind AS "last_error_kind?", s.last_error_at AS "last_error_at?",
                  s.recovered_at AS "recovered_at?"
           FROM ingest_cluster_state s FULL JOIN q ON q.cluster = s.cluster
           ORDER BY 1"#
    )
    .fetch_all(pool)
    .await
}
