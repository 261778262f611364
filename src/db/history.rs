//! Ingest runs and what they replaced: the stored hours a run read less for (kept), the rows a replacement removed
//! (kept with the run, so an undo can put them back). Callers own the transactions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

/// Which command a run was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCommand {
    Ingest,
    Worker,
    Undo,
}

impl RunCommand {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingest => "ingest",
            Self::Worker => "worker",
            Self::Undo => "undo",
        }
    }
}

/// Registers a run of `cluster` (which must exist) and returns its id.
pub async fn start_run(
    conn: &mut PgConnection,
    cluster: &str,
    command: RunCommand,
    actor: &str,
    replace_smaller: bool,
    undoes: Option<i64>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO ingest_runs (cluster, command, actor, replace_smaller, undoes) VALUES ($1, $2, $3, $4, $5)
         RETURNING id",
        cluster,
        command.as_str(),
        actor,
        replace_smaller,
        undoes
    )
    .fetch_one(conn)
    .await
}

/// What is stored for an hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredHour {
    pub usage_rows: i64,
    /// `None` for hours stored before samples were counted.
    pub samples_read: Option<i64>,
    pub run_id: Option<i64>,
}

impl StoredHour {
    /// A read of `rows` rows from `samples` samples holds less than what is stored.
    pub fn is_larger_than(&self, rows: u64, samples: u64) -> bool {
        self.usage_rows > rows as i64 || self.samples_read.is_some_and(|s| s > samples as i64)
    }
}

pub async fn stored_hour(
    conn: &mut PgConnection,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<Option<StoredHour>, sqlx::Error> {
    Ok(stored_hours(conn, cluster, &[hour]).await?.remove(&hour))
}

/// What is stored for each of some hours (those with nothing stored are absent).
pub async fn stored_hours(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<BTreeMap<DateTime<Utc>, StoredHour>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT hour, usage_rows::int8 AS "usage_rows!", samples_read, run_id FROM ingested_hours
           WHERE cluster = $1 AND hour = ANY($2)"#,
        cluster,
        hours
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.hour, StoredHour { usage_rows: r.usage_rows, samples_read: r.samples_read, run_id: r.run_id }))
        .collect())
}

/// Records what stored hours were read with (`samples_read[i]` for `hours[i]`), and by which run.
pub async fn record_reads(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[DateTime<Utc>],
    samples_read: &[i64],
    run_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE ingested_hours i SET samples_read = r.samples, run_id = $4
         FROM UNNEST($2::timestamptz[], $3::int8[]) AS r (hour, samples)
         WHERE i.cluster = $1 AND i.hour = r.hour",
        cluster,
        hours,
        samples_read,
        run_id
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM kept_hours WHERE cluster = $1 AND hour = ANY($2)", cluster, hours).execute(conn).await?;
    Ok(())
}

/// Notes that `run` read less for an hour than is stored and left it as it was.
pub async fn keep_hour(
    conn: &mut PgConnection,
    cluster: &str,
    hour: DateTime<Utc>,
    run_id: i64,
    stored: &StoredHour,
    read_rows: u64,
    read_samples: u64,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO kept_hours (cluster, hour, run_id, stored_rows, stored_samples, read_rows, read_samples)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (cluster, hour) DO UPDATE SET run_id = EXCLUDED.run_id, stored_rows = EXCLUDED.stored_rows,
             stored_samples = EXCLUDED.stored_samples, read_rows = EXCLUDED.read_rows,
             read_samples = EXCLUDED.read_samples, at = now()",
        cluster,
        hour,
        run_id,
        stored.usage_rows as i32,
        stored.samples_read,
        read_rows as i32,
        read_samples as i64
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Copies what is stored for an hour (its bookkeeping row, usage, capacity and anomalies) into the history of
/// `run`, before the run replaces it.
pub async fn save_replaced(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    save_replaced_hours(conn, run_id, cluster, &[hour]).await
}

/// [`save_replaced`] for some hours at once.
pub async fn save_replaced_hours(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO replaced_hours (run_id, cluster, hour, scrape_interval_ms, usage_rows, samples_read,
             previous_run_id, ingested_at)
         SELECT $1, cluster, hour, scrape_interval_ms, usage_rows, samples_read, run_id, ingested_at
         FROM ingested_hours WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO replaced_usage_hourly SELECT $1, u.* FROM gpu_usage_hourly u WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO replaced_node_capacity_hourly (run_id, cluster, hour, node, gpu_model, cards, card_seconds,
             offered_card_seconds, offered_source)
         SELECT $1, cluster, hour, node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
         FROM node_capacity_hourly WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO replaced_ingest_anomalies SELECT $1, a.* FROM ingest_anomalies a WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    super::serving::save_replaced(conn, run_id, cluster, hours).await?;
    super::quota::save_replaced(conn, run_id, cluster, hours).await?;
    super::waits::save_replaced(conn, run_id, cluster, hours).await?;
    Ok(())
}

/// After a replacement: drops the history of `run` for the hour when the new rows equal the old ones (re-reads of
/// unchanged samples, every worker cycle), so history holds only changes. Returns whether something changed.
pub async fn forget_if_unchanged(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    // `team` is left out: it follows the mappings, not the read
    let changed = sqlx::query_scalar!(
        r#"SELECT EXISTS (
             (SELECT namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
                     gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib, label_team,
                     memory_share, bridged_gpu_seconds
              FROM replaced_usage_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT
              SELECT namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
                     gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib, label_team,
                     memory_share, bridged_gpu_seconds
              FROM gpu_usage_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
                     gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib, label_team,
                     memory_share, bridged_gpu_seconds
              FROM gpu_usage_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT
              SELECT namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
                     gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib, label_team,
                     memory_share, bridged_gpu_seconds
              FROM replaced_usage_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
           ) OR EXISTS (
             (SELECT node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
              FROM replaced_node_capacity_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT SELECT node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
              FROM node_capacity_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
              FROM node_capacity_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT SELECT node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
              FROM replaced_node_capacity_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
           ) AS "changed!""#,
        run_id,
        cluster,
        hour
    )
    .fetch_one(&mut *conn)
    .await?;
    let changed = changed
        || super::serving::changed(conn, run_id, cluster, hour).await?
        || super::quota::changed(conn, run_id, cluster, hour).await?
        || super::waits::changed(conn, run_id, cluster, hour).await?;
    if !changed {
        forget(conn, run_id, cluster, hour).await?;
    }
    Ok(changed)
}

async fn forget(conn: &mut PgConnection, run_id: i64, cluster: &str, hour: DateTime<Utc>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM replaced_usage_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM replaced_node_capacity_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "DELETE FROM replaced_ingest_anomalies WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    super::serving::forget_replaced(conn, run_id, cluster, hour).await?;
    super::quota::forget_replaced(conn, run_id, cluster, hour).await?;
    super::waits::forget_replaced(conn, run_id, cluster, hour).await?;
    sqlx::query!("DELETE FROM replaced_hours WHERE run_id = $1 AND cluster = $2 AND hour = $3", run_id, cluster, hour)
        .execute(conn)
        .await?;
    Ok(())
}

/// A run as stored.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub id: i64,
    pub cluster: String,
    pub command: String,
    pub undoes: Option<i64>,
}

pub async fn run(conn: &mut PgConnection, id: i64) -> Result<Option<Run>, sqlx::Error> {
    sqlx::query_as!(Run, "SELECT id, cluster, command, undoes FROM ingest_runs WHERE id = $1", id)
        .fetch_optional(conn)
        .await
}

/// The undo run that reverted `run_id`, if one did.
pub async fn undone_by(conn: &mut PgConnection, run_id: i64) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM ingest_runs WHERE undoes = $1 ORDER BY id LIMIT 1", run_id)
        .fetch_optional(conn)
        .await
}

/// A replaced hour of a run: when, and which run stored what it replaced.
#[derive(Debug, Clone, Serialize)]
pub struct ReplacedHour {
    pub cluster: String,
    pub hour: DateTime<Utc>,
    pub usage_rows: i32,
    pub samples_read: Option<i64>,
    pub previous_run_id: Option<i64>,
    pub scrape_interval_ms: Option<i64>,
}

pub async fn replaced_by(conn: &mut PgConnection, run_id: i64) -> Result<Vec<ReplacedHour>, sqlx::Error> {
    sqlx::query_as!(
        ReplacedHour,
        "SELECT cluster, hour, usage_rows, samples_read, previous_run_id, scrape_interval_ms FROM replaced_hours
         WHERE run_id = $1 ORDER BY cluster, hour",
        run_id
    )
    .fetch_all(conn)
    .await
}

/// Puts the rows `run` replaced for one hour back in place of what is stored now (which the caller saved under
/// the undo run first); rollups follow. The team is resolved again under today's mappings.
pub async fn restore(conn: &mut PgConnection, run_id: i64, h: &ReplacedHour) -> Result<(), sqlx::Error> {
    let (cluster, hour) = (h.cluster.as_str(), h.hour);
    super::usage::delete_hour(conn, cluster, hour).await?;
    sqlx::query!(
        "INSERT INTO gpu_usage_hourly (cluster, hour, namespace, pod, container, resource, gpu_model, kind, mig_profile,
             node, units, fraction, gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source,
             peak_fb_used_mib, label_team, memory_share, bridged_gpu_seconds, team)
         SELECT cluster, hour, namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
             gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib, label_team,
             memory_share, bridged_gpu_seconds, team_of(cluster, namespace, hour, label_team)
         FROM replaced_usage_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds, offered_card_seconds,
             offered_source)
         SELECT cluster, hour, node, gpu_model, cards, card_seconds, offered_card_seconds, offered_source
         FROM replaced_node_capacity_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO ingest_anomalies (cluster, hour, kind, subject, count)
         SELECT cluster, hour, kind, subject, count FROM replaced_ingest_anomalies
         WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(&mut *conn)
    .await?;
    super::serving::restore(conn, run_id, cluster, hour).await?;
    super::quota::restore(conn, run_id, cluster, hour).await?;
    super::waits::restore(conn, run_id, cluster, hour).await?;
    super::usage::rebuild_hour_rollups(conn, cluster, hour).await?;
    sqlx::query!(
        "UPDATE ingested_hours SET scrape_interval_ms = $3, usage_rows = $4, samples_read = $5, run_id = $6,
             ingested_at = now()
         WHERE cluster = $1 AND hour = $2",
        cluster,
        hour,
        h.scrape_interval_ms,
        h.usage_rows,
        h.samples_read,
        h.previous_run_id
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM kept_hours WHERE cluster = $1 AND hour = $2", cluster, hour).execute(conn).await?;
    Ok(())
}

/// An hour kept because a read held less than what is stored.
#[derive(Debug, Clone, Serialize)]
pub struct KeptHour {
    pub cluster: String,
    pub hour: DateTime<Utc>,
    pub run_id: i64,
    pub stored_rows: i32,
    pub stored_samples: Option<i64>,
    pub read_rows: i32,
    pub read_samples: i64,
    pub at: DateTime<Utc>,
}

/// The hours kept over a smaller read, newest first.
pub async fn kept_hours(pool: &PgPool, cluster: Option<&str>) -> Result<Vec<KeptHour>, sqlx::Error> {
    sqlx::query_as!(
        KeptHour,
        "SELECT cluster, hour, run_id, stored_rows, stored_samples, read_rows, read_samples, at FROM kept_hours
         WHERE $1::text IS NULL OR cluster = $1 ORDER BY cluster, hour DESC",
        cluster
    )
    .fetch_all(pool)
    .await
}
