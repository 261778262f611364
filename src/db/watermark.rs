//! Per-cluster watermark: the first hour, after the first one ever stored, that is not stored yet.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

pub async fn get(conn: &mut PgConnection, cluster: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!("SELECT complete_until FROM ingest_watermarks WHERE cluster = $1", cluster)
        .fetch_optional(conn)
        .await
}

/// After `hour` was stored: a first hour starts the watermark; an hour at (or before) the watermark moves it on to
/// the next hour that is not stored; an hour beyond a gap leaves it where it is. Call inside the hour's transaction.
pub async fn advance(
    conn: &mut PgConnection,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<DateTime<Utc>, sqlx::Error> {
    let current =
        sqlx::query_scalar!("SELECT complete_until FROM ingest_watermarks WHERE cluster = $1 FOR UPDATE", cluster)
            .fetch_optional(&mut *conn)
            .await?;
    let from = match current {
        Some(mark) if hour > mark => return Ok(mark),
        Some(mark) => mark,
        None => hour,
    };
    let mark = sqlx::query_scalar!(
        r#"SELECT min(h) AS "mark!"
           FROM generate_series($2::timestamptz,
                                GREATEST($2::timestamptz, (SELECT max(hour) FROM ingested_hours WHERE cluster = $1))
                                    + interval '1 hour',
                                interval '1 hour') AS h
           WHERE NOT EXISTS (SELECT 1 FROM ingested_hours i WHERE i.cluster = $1 AND i.hour = h)"#,
        cluster,
        from
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO ingest_watermarks (cluster, complete_until) VALUES ($1, $2)
         ON CONFLICT (cluster) DO UPDATE SET complete_until = EXCLUDED.complete_until, updated_at = now()",
        cluster,
        mark
    )
    .execute(conn)
    .await?;
    Ok(mark)
}
