//! The figures `/metrics` reads at every scrape: one cheap query each (a few rows per cluster, by index).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

#[derive(Debug, Clone)]
pub struct Watermark {
    pub cluster: String,
    pub complete_until: DateTime<Utc>,
}

pub async fn watermarks(conn: &mut PgConnection) -> Result<Vec<Watermark>, sqlx::Error> {
    sqlx::query_as!(Watermark, "SELECT cluster, complete_until FROM ingest_watermarks ORDER BY cluster")
        .fetch_all(conn)
        .await
}

/// Per cluster, the failed reads not made good: some hour of the window up to now was not stored after the
/// failure (as ingest health lists them, [`super::readiness::open_failures`], counted by the primary key of
/// `ingested_hours` instead of hour by hour).
pub async fn open_failed_windows(conn: &mut PgConnection) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT f.cluster, count(*) AS "windows!"
           FROM ingest_failures f
           WHERE f.hour_from < now()
             AND (SELECT count(*) FROM ingested_hours i
                  WHERE i.cluster = f.cluster AND i.hour >= f.hour_from AND i.hour < least(f.hour_to, now())
                    AND i.ingested_at > f.failed_at)
                 < ceil(extract(epoch FROM least(f.hour_to, now()) - f.hour_from) / 3600)
           GROUP BY f.cluster ORDER BY f.cluster"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.cluster, r.windows)).collect())
}

/// Budget alerts not delivered yet, split by whether a delivery was tried.
#[derive(Debug, Clone, Copy, Default)]
pub struct Undelivered {
    pub attempted: i64,
    pub not_attempted: i64,
}

pub async fn undelivered_alerts(conn: &mut PgConnection) -> Result<Undelivered, sqlx::Error> {
    sqlx::query_as!(
        Undelivered,
        r#"SELECT count(*) FILTER (WHERE attempts > 0) AS "attempted!",
                  count(*) FILTER (WHERE attempts = 0) AS "not_attempted!"
           FROM budget_alerts WHERE delivered_at IS NULL"#
    )
    .fetch_one(conn)
    .await
}
