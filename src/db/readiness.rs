//! What a month's readiness to close reads: hours never stored, windows that failed and were not read again,
//! watermarks short of the month's end, nodes whose cards could not be counted, and the failures an ingest records.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

/// One cluster whose stored hours begin before `to`: its first stored hour and its watermark.
#[derive(Debug, Clone)]
pub struct ClusterSpan {
    pub cluster: String,
    pub first_hour: DateTime<Utc>,
    pub watermark: Option<DateTime<Utc>>,
}

pub async fn clusters_before(pool: &PgPool, to: DateTime<Utc>) -> Result<Vec<ClusterSpan>, sqlx::Error> {
    sqlx::query_as!(
        ClusterSpan,
        r#"SELECT i.cluster, min(i.hour) AS "first_hour!", w.complete_until AS "watermark?"
           FROM ingested_hours i LEFT JOIN ingest_watermarks w ON w.cluster = i.cluster
           GROUP BY i.cluster, w.complete_until
           HAVING min(i.hour) < $1
           ORDER BY i.cluster"#,
        to
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone)]
pub struct MissingHour {
    pub cluster: String,
    pub hour: DateTime<Utc>,
}

/// The hours meeting `[from, to)` that are not stored, per cluster, from the cluster's first stored hour on (a
/// cluster is not missing the hours before it was first read).
pub async fn missing_hours(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MissingHour>, sqlx::Error> {
    sqlx::query_as!(
        MissingHour,
        r#"SELECT c.cluster, h.hour AS "hour!"
           FROM (SELECT cluster, min(hour) AS first FROM ingested_hours GROUP BY cluster) c
           CROSS JOIN LATERAL generate_series(greatest(date_trunc('hour', $1::timestamptz), c.first),
                                              $2::timestamptz - interval '1 microsecond', interval '1 hour') h(hour)
           WHERE NOT EXISTS (SELECT 1 FROM ingested_hours i WHERE i.cluster = c.cluster AND i.hour = h.hour)
           ORDER BY c.cluster, h.hour"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// A recorded failure meeting `[from, to)` with the number of its hours in that span not stored since it failed.
#[derive(Debug, Clone)]
pub struct OpenFailure {
    pub cluster: String,
    pub hour_from: DateTime<Utc>,
    pub hour_to: DateTime<Utc>,
    pub error: String,
    pub failed_at: DateTime<Utc>,
    pub hours_not_read_since: i64,
}

pub async fn open_failures(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<OpenFailure>, sqlx::Error> {
    sqlx::query_as!(
        OpenFailure,
        r#"SELECT f.cluster, f.hour_from, f.hour_to, f.error, f.failed_at, n.hours AS "hours_not_read_since!"
           FROM ingest_failures f
           CROSS JOIN LATERAL (
               SELECT count(*) AS hours
               FROM generate_series(greatest(f.hour_from, date_trunc('hour', $1::timestamptz)),
                                    least(f.hour_to, $2::timestamptz) - interval '1 microsecond',
                                    interval '1 hour') h(hour)
               WHERE NOT EXISTS (SELECT 1 FROM ingested_hours i
                                 WHERE i.cluster = f.cluster AND i.hour = h.hour AND i.ingested_at > f.failed_at)
           ) n
           WHERE f.hour_to > $1 AND f.hour_from < $2 AND n.hours > 0
           ORDER BY f.cluster, f.hour_from, f.id"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// Records that `[hour_from, hour_to)` of a registered cluster could not be read; nothing for a cluster never
/// stored (it has no hours a close could miss).
pub async fn record_failure(
    conn: &mut PgConnection,
    cluster: &str,
    hour_from: DateTime<Utc>,
    hour_to: DateTime<Utc>,
    command: &str,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ingest_failures (cluster, hour_from, hour_to, command, error)
         SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM clusters WHERE name = $1)",
        cluster,
        hour_from,
        hour_to,
        command,
        error
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A node of a cluster whose cards could not be counted in some hours of `[from, to)` (an anomaly of one of
/// `kinds`, its subject the node).
#[derive(Debug, Clone)]
pub struct NodeProblem {
    pub cluster: String,
    pub node: String,
    pub kind: String,
    pub hours: i64,
}

pub async fn node_problems(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    kinds: &[String],
) -> Result<Vec<NodeProblem>, sqlx::Error> {
    sqlx::query_as!(
        NodeProblem,
        r#"SELECT cluster, subject AS node, kind, count(DISTINCT hour) AS "hours!"
           FROM ingest_anomalies
           WHERE hour >= date_trunc('hour', $1::timestamptz) AND hour < $2 AND kind = ANY($3)
           GROUP BY cluster, subject, kind ORDER BY cluster, subject, kind"#,
        from,
        to,
        kinds
    )
    .fetch_all(pool)
    .await
}

/// One registered cluster's stored hours in a month: how many, the first and last, and its first stored hour ever.
#[derive(Debug, Clone, PartialEq)]
pub struct CoverageCount {
    pub cluster: String,
    pub hours: i64,
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    pub first_ingest: Option<DateTime<Utc>>,
}

/// Every registered cluster's stored hours meeting `[from, to)`, with its first stored hour ever (each an index
/// read on `ingested_hours`' primary key).
pub async fn coverage_counts(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<CoverageCount>, sqlx::Error> {
    sqlx::query_as!(
        CoverageCount,
        r#"SELECT c.name AS "cluster!", m.hours AS "hours!", m.first_hour, m.last_hour,
                  (SELECT min(i.hour) FROM ingested_hours i WHERE i.cluster = c.name) AS first_ingest
           FROM clusters c
           CROSS JOIN LATERAL (SELECT count(*) AS hours, min(i.hour) AS first_hour, max(i.hour) AS last_hour
                               FROM ingested_hours i
                               WHERE i.cluster = c.name AND i.hour >= date_trunc('hour', $1::timestamptz)
                                 AND i.hour < $2) m
           ORDER BY c.name"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}
