//! What ingest health shows per cluster: how far the stored hours reach, when they were last written, the hours
//! kept over smaller reads, and the anomalies of recent hours.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

#[derive(Debug, Clone)]
pub struct ClusterRow {
    pub cluster: String,
    pub prometheus_url: String,
    pub watermark: Option<DateTime<Utc>>,
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    pub hours_stored: i64,
    pub last_ingested_at: Option<DateTime<Utc>>,
    pub kept_hours: i64,
    pub sample_source: Option<String>,
    pub sample_source_reason: Option<String>,
}

/// A cluster's GPU-seconds and the unmetered part of them over its last stored `hours` hours.
#[derive(Debug, Clone)]
pub struct MeteredShare {
    pub cluster: String,
    pub gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// Per cluster, the GPU-seconds of its newest `hours` stored hours (ending at its newest stored hour, so a lagging
/// ingest still shows its last day) and how many of them no utilization series covered.
pub async fn metered_share(pool: &PgPool, hours: i32) -> Result<Vec<MeteredShare>, sqlx::Error> {
    sqlx::query_as!(
        MeteredShare,
        r#"SELECT u.cluster, sum(u.gpu_seconds) AS "gpu_seconds!", sum(u.unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
           FROM (SELECT cluster, max(hour) AS last FROM ingested_hours GROUP BY cluster) l
           JOIN usage_namespace_hourly u
             ON u.cluster = l.cluster AND u.hour > l.last - make_interval(hours => $1) AND u.hour <= l.last
           GROUP BY u.cluster ORDER BY u.cluster"#,
        hours
    )
    .fetch_all(pool)
    .await
}

/// A cluster's GPU-seconds bridged over kube-state-metrics gaps in its newest stored hours.
#[derive(Debug, Clone)]
pub struct Bridged {
    pub cluster: String,
    pub bridged_gpu_seconds: f64,
}

/// Per cluster, the GPU-seconds its newest `hours` stored hours bridged over KSM gaps (as [`metered_share`], a
/// lagging ingest still shows its last day; over the primary key's leading cluster and hour).
pub async fn bridged(pool: &PgPool, hours: i32) -> Result<Vec<Bridged>, sqlx::Error> {
    sqlx::query_as!(
        Bridged,
        r#"SELECT u.cluster, sum(u.bridged_gpu_seconds) AS "bridged_gpu_seconds!"
           FROM (SELECT cluster, max(hour) AS last FROM ingested_hours GROUP BY cluster) l
           JOIN gpu_usage_hourly u
             ON u.cluster = l.cluster AND u.hour > l.last - make_interval(hours => $1) AND u.hour <= l.last
           GROUP BY u.cluster ORDER BY u.cluster"#,
        hours
    )
    .fetch_all(pool)
    .await
}

/// One kube-state-metrics gap of a cluster (anomaly `ksm_gap` or `ksm_gap_bridged`): the hours it touched and
/// the most pods one of them counted.
#[derive(Debug, Clone)]
pub struct KsmGapRow {
    pub cluster: String,
    pub kind: String,
    pub subject: String,
    pub first_hour: DateTime<Utc>,
    pub hours: i64,
    pub pods: i64,
}

/// The KSM gaps of the stored hours since `since`, oldest first.
pub async fn ksm_gaps(pool: &PgPool, since: DateTime<Utc>) -> Result<Vec<KsmGapRow>, sqlx::Error> {
    sqlx::query_as!(
        KsmGapRow,
        r#"SELECT cluster, kind, subject, min(hour) AS "first_hour!", count(*) AS "hours!", max(count) AS "pods!"
           FROM ingest_anomalies WHERE hour >= $1 AND kind IN ('ksm_gap', 'ksm_gap_bridged')
           GROUP BY cluster, kind, subject ORDER BY cluster, min(hour), subject, kind"#,
        since
    )
    .fetch_all(pool)
    .await
}

pub async fn clusters(pool: &PgPool) -> Result<Vec<ClusterRow>, sqlx::Error> {
    sqlx::query_as!(
        ClusterRow,
        r#"SELECT c.name AS cluster, c.prometheus_url, w.complete_until AS "watermark?",
                  h.first_hour, h.last_hour, coalesce(h.hours, 0) AS "hours_stored!", h.last_ingested_at,
                  (SELECT count(*) FROM kept_hours k WHERE k.cluster = c.name) AS "kept_hours!",
                  c.sample_source, c.sample_source_reason
           FROM clusters c
           LEFT JOIN ingest_watermarks w ON w.cluster = c.name
           LEFT JOIN LATERAL (
               SELECT min(hour) AS first_hour, max(hour) AS last_hour, count(*) AS hours,
                      max(ingested_at) AS last_ingested_at
               FROM ingested_hours i WHERE i.cluster = c.name) h ON true
           ORDER BY c.name"#
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone)]
pub struct AnomalyRow {
    pub cluster: String,
    pub kind: String,
    pub subjects: i64,
    pub count: i64,
}

/// Anomalies of the stored hours since `since`, per cluster and kind.
pub async fn anomalies(pool: &PgPool, since: DateTime<Utc>) -> Result<Vec<AnomalyRow>, sqlx::Error> {
    sqlx::query_as!(
        AnomalyRow,
        r#"SELECT cluster, kind, count(DISTINCT subject) AS "subjects!", sum(count)::int8 AS "count!"
           FROM ingest_anomalies WHERE hour >= $1 GROUP BY cluster, kind ORDER BY cluster, kind"#,
        since
    )
    .fetch_all(pool)
    .await
}

/// A node of a cluster with an anomaly of one of the node kinds (unverified, unknown model…) since a time, with
/// the hours it had it and its capacity card-hours over them.
#[derive(Debug, Clone)]
pub struct NodeIssueRow {
    pub cluster: String,
    pub node: String,
    pub kind: String,
    pub hours: i64,
    pub card_hours: Option<f64>,
}

pub async fn node_issues(
    pool: &PgPool,
    since: DateTime<Utc>,
    kinds: &[String],
) -> Result<Vec<NodeIssueRow>, sqlx::Error> {
    sqlx::query_as!(
        NodeIssueRow,
        r#"SELECT a.cluster, a.subject AS node, a.kind, count(*) AS "hours!",
                  sum(c.card_seconds) / 3600 AS card_hours
           FROM (SELECT DISTINCT cluster, hour, subject, kind FROM ingest_anomalies
                 WHERE hour >= $1 AND kind = ANY($2)) a
           LEFT JOIN node_capacity_hourly c ON c.cluster = a.cluster AND c.hour = a.hour AND c.node = a.subject
           GROUP BY a.cluster, a.subject, a.kind ORDER BY a.cluster, a.subject, a.kind"#,
        since,
        kinds
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone)]
pub struct MergedLabelsRow {
    pub team_id: String,
    pub labels: Vec<String>,
}

/// Team ids that more than one label value makes (`NLP` and `nlp`).
pub async fn merged_team_labels(pool: &PgPool) -> Result<Vec<MergedLabelsRow>, sqlx::Error> {
    sqlx::query_as!(
        MergedLabelsRow,
        r#"SELECT team_id, array_agg(label ORDER BY label COLLATE "C") AS "labels!" FROM team_labels
           GROUP BY team_id HAVING count(*) > 1 ORDER BY team_id"#
    )
    .fetch_all(pool)
    .await
}
