//! Per-pod sums over a window, for the idle-waste list.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::usage::Scope;

#[derive(Debug, Clone, PartialEq)]
pub struct PodWindow {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub owner: Option<String>,
    pub gpu_model: String,
    pub cards: f64,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    pub peak_fb_used_mib: Option<f64>,
    pub still_running: bool,
}

/// Every pod that held GPUs in `[from, to)`, with its sums; `still_running` when it held them in its cluster's
/// newest stored hour of the window.
pub async fn pods(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    scope: &Scope,
) -> Result<Vec<PodWindow>, sqlx::Error> {
    sqlx::query_as!(
        PodWindow,
        r#"WITH last AS (SELECT cluster, max(hour) AS hour FROM ingested_hours
                         WHERE hour >= $1 AND hour < $2 GROUP BY cluster),
                w AS (SELECT cluster, namespace, pod, max(hour) AS last_hour, max(units * fraction) AS cards,
                             sum(gpu_seconds) AS g, sum(effective_gpu_seconds) AS e,
                             sum(unmetered_gpu_seconds) AS m, max(peak_fb_used_mib) AS fb
                      FROM gpu_usage_hourly
                      WHERE hour >= $1 AND hour < $2 AND ($3::text[] IS NULL OR team = ANY($3))
                      GROUP BY cluster, namespace, pod)
           -- team and model as of the pod's last hour in the window (one index lookup per pod)
           SELECT w.cluster AS "cluster!", w.namespace AS "namespace!", w.pod AS "pod!", l.team AS "team!",
                  t.owner AS "owner?", l.gpu_model AS "gpu_model!", w.cards AS "cards!", w.g AS "gpu_seconds!",
                  w.e AS "effective_gpu_seconds!", w.m AS "unmetered_gpu_seconds!", w.fb AS peak_fb_used_mib,
                  (w.last_hour = last.hour) AS "still_running!"
           FROM w
           JOIN last ON last.cluster = w.cluster
           CROSS JOIN LATERAL (SELECT x.team, x.gpu_model FROM gpu_usage_hourly x
                               WHERE x.cluster = w.cluster AND x.hour = w.last_hour AND x.namespace = w.namespace
                                 AND x.pod = w.pod
                               ORDER BY x.gpu_seconds DESC LIMIT 1) l
           LEFT JOIN teams t ON t.id = l.team
           ORDER BY w.cluster, w.namespace, w.pod"#,
        from,
        to,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

/// The end of the newest stored hour before `t` (any cluster).
pub async fn stored_until(pool: &PgPool, t: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT max(hour) + interval '1 hour' AS "until" FROM ingested_hours WHERE hour < $1"#, t)
        .fetch_one(pool)
        .await
}
