//! Clusters: one per Prometheus source.

use sqlx::PgConnection;

/// Registers a cluster, or updates its Prometheus URL.
pub async fn upsert(conn: &mut PgConnection, name: &str, prometheus_url: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO clusters (name, prometheus_url) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET prometheus_url = EXCLUDED.prometheus_url",
        name,
        prometheus_url
    )
    .execute(conn)
    .await?;
    Ok(())
}
