//! The sums the oversubscription report is computed from: stored usage per node, day, kind, fraction, MIG profile
//! and memory share, and stored capacity per node and day, days in the billing time zone.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::validate::ClusterName;
use crate::waste::{CapacityDay, HeldDay};

pub async fn held_days(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    tz: &str,
    cluster: Option<&str>,
) -> Result<Vec<HeldDay>, sqlx::Error> {
    sqlx::query_as!(
        HeldDay,
        r#"SELECT cluster, node, (hour AT TIME ZONE $3)::date AS "day!", gpu_model, kind, fraction, mig_profile,
                  memory_share, sum(gpu_seconds) AS "gpu_seconds!",
                  sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                  sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
           FROM gpu_usage_hourly
           WHERE hour >= $1 AND hour < $2 AND ($4::text IS NULL OR cluster = $4)
           GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8"#,
        from,
        to,
        tz,
        cluster
    )
    .fetch_all(pool)
    .await
}

pub async fn capacity_days(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    tz: &str,
    cluster: Option<&str>,
) -> Result<Vec<CapacityDay>, sqlx::Error> {
    sqlx::query_as!(
        CapacityDay,
        r#"SELECT cluster, node, (hour AT TIME ZONE $3)::date AS "day!", gpu_model,
                  sum(card_seconds) AS "card_seconds!"
           FROM node_capacity_hourly
           WHERE hour >= $1 AND hour < $2 AND ($4::text IS NULL OR cluster = $4)
           GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"#,
        from,
        to,
        tz,
        cluster
    )
    .fetch_all(pool)
    .await
}

/// The report of `[from, to)`.
pub async fn report(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    tz: chrono_tz::Tz,
    cluster: Option<&ClusterName>,
) -> Result<crate::waste::OversubscriptionReport, sqlx::Error> {
    let cluster = cluster.map(ClusterName::as_str);
    let held = held_days(pool, from, to, tz.name(), cluster).await?;
    let capacity = capacity_days(pool, from, to, tz.name(), cluster).await?;
    Ok(crate::waste::oversubscription(&held, &capacity))
}
