//! Sums behind the management reports: per pod over a range, and per billing day and team over a month.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;

use crate::access::Scope;

#[derive(Debug, Clone, PartialEq)]
pub struct PodTotal {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub owner: Option<String>,
    /// The stored model name of its last hour in the range.
    pub gpu_model: String,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// The `top` pods of `[from, to)` with the most wasted (metered but unused) card-seconds, within `scope`; team and
/// model are those of the pod's last hour, the owner its team's.
pub async fn most_wasteful_pods(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    top: i64,
    scope: &Scope,
) -> Result<Vec<PodTotal>, sqlx::Error> {
    sqlx::query_as!(
        PodTotal,
        r#"WITH p AS (SELECT cluster, namespace, pod,
                             (array_agg(team ORDER BY hour DESC, gpu_seconds DESC))[1] AS team,
                             (array_agg(gpu_model ORDER BY hour DESC, gpu_seconds DESC))[1] AS gpu_model,
                             sum(gpu_seconds) AS g, sum(effective_gpu_seconds) AS e, sum(unmetered_gpu_seconds) AS m
                      FROM gpu_usage_hourly
                      WHERE hour >= $1 AND hour < $2 AND ($4::text[] IS NULL OR team = ANY($4))
                      GROUP BY cluster, namespace, pod
                      ORDER BY sum(gpu_seconds - unmetered_gpu_seconds - effective_gpu_seconds) DESC, namespace, pod
                      LIMIT $3)
           SELECT p.cluster AS "cluster!", p.namespace AS "namespace!", p.pod AS "pod!", p.team AS "team!",
                  t.owner AS "owner?", p.gpu_model AS "gpu_model!", p.g AS "gpu_seconds!",
                  p.e AS "effective_gpu_seconds!", p.m AS "unmetered_gpu_seconds!"
           FROM p LEFT JOIN teams t ON t.id = p.team
           ORDER BY p.g - p.m - p.e DESC, p.namespace, p.pod"#,
        from,
        to,
        top,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone, PartialEq)]
pub struct DayTeam {
    pub day: NaiveDate,
    pub team: String,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// Usage per billing day and team over days `[from, to)`, all clusters.
pub async fn usage_by_day_team(pool: &PgPool, from: NaiveDate, to: NaiveDate) -> Result<Vec<DayTeam>, sqlx::Error> {
    sqlx::query_as!(
        DayTeam,
        r#"SELECT day, team, sum(gpu_seconds) AS "gpu_seconds!", sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                  sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
           FROM usage_namespace_daily WHERE day >= $1 AND day < $2
           GROUP BY day, team ORDER BY day, team"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeHour {
    pub cluster: String,
    pub node: String,
    pub gpu_model: String,
    pub cards: f64,
    pub allocated_seconds: f64,
}

/// Each node's physical cards and the card-seconds allocated on it in `hour`.
pub async fn nodes_in_hour(pool: &PgPool, hour: DateTime<Utc>) -> Result<Vec<NodeHour>, sqlx::Error> {
    sqlx::query_as!(
        NodeHour,
        r#"SELECT c.cluster AS "cluster!", c.node AS "node!", c.gpu_model AS "gpu_model!", c.cards AS "cards!",
                  coalesce((SELECT sum(u.gpu_seconds) FROM gpu_usage_hourly u
                            WHERE u.cluster = c.cluster AND u.hour = c.hour AND u.node = c.node), 0) AS "allocated_seconds!"
           FROM node_capacity_hourly c WHERE c.hour = $1
           ORDER BY c.cluster, c.node"#,
        hour
    )
    .fetch_all(pool)
    .await
}

/// The newest stored hour (any cluster) before `t`.
pub async fn newest_hour_before(pool: &PgPool, t: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT max(hour) AS "hour" FROM ingested_hours WHERE hour < $1"#, t).fetch_one(pool).await
}

#[derive(Debug, Clone, PartialEq)]
pub struct CoverageRow {
    pub cluster: String,
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    pub hours: i64,
}

/// Every cluster's first and last ingested hour in `[from, to)` and how many hours of it are ingested.
pub async fn coverage(pool: &PgPool, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<CoverageRow>, sqlx::Error> {
    sqlx::query_as!(
        CoverageRow,
        r#"SELECT c.name AS "cluster!", min(i.hour) AS first_hour, max(i.hour) AS last_hour,
                  count(i.hour) AS "hours!"
           FROM clusters c LEFT JOIN ingested_hours i ON i.cluster = c.name AND i.hour >= $1 AND i.hour < $2
           GROUP BY c.name ORDER BY c.name"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterTeamDay {
    pub cluster: String,
    pub team: String,
    pub gpu_model: String,
    pub day: NaiveDate,
    pub gpu_seconds: f64,
}

/// Usage per cluster, team, GPU model and billing day over days `[from, to)`: what weighs each cluster's part of
/// a team's spend (a forecast scales each by its cluster's covered hours).
pub async fn usage_by_cluster_team(
    pool: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<ClusterTeamDay>, sqlx::Error> {
    sqlx::query_as!(
        ClusterTeamDay,
        r#"SELECT cluster, team, gpu_model, day, sum(gpu_seconds) AS "gpu_seconds!"
           FROM usage_namespace_daily WHERE day >= $1 AND day < $2
           GROUP BY cluster, team, gpu_model, day ORDER BY cluster, team, gpu_model, day"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}
