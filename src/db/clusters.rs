//! Clusters: one per Prometheus source, with the sample source the last run read it by.

use sqlx::PgConnection;

/// How a run read the cluster, stored with it.
#[derive(Debug, Clone, Copy)]
pub struct SourceUsed<'a> {
    pub kind: &'a str,
    pub reason: &'a str,
    /// An `auto` probe chose it: the next `auto` run against the same URL reuses it.
    pub probed: bool,
}

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

/// Records the sample source a run of the (registered) cluster reads it by.
pub async fn record_source(conn: &mut PgConnection, name: &str, source: SourceUsed<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE clusters SET sample_source = $2, sample_source_reason = $3, sample_source_probed = $4,
                sample_source_at = now()
         WHERE name = $1",
        name,
        source.kind,
        source.reason,
        source.probed
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The source an `auto` probe chose for `name` read at `prometheus_url`, and why.
pub async fn probed_source(
    conn: &mut PgConnection,
    name: &str,
    prometheus_url: &str,
) -> Result<Option<(String, String)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT sample_source AS "kind!", coalesce(sample_source_reason, '') AS "reason!" FROM clusters
           WHERE name = $1 AND prometheus_url = $2 AND sample_source_probed AND sample_source IS NOT NULL"#,
        name,
        prometheus_url
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.kind, r.reason)))
}
