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
                w AS (SELECT u.cluster, u.namespace, u.pod, (array_agg(u.team ORDER BY u.hour DESC))[1] AS team,
                             (array_agg(u.gpu_model ORDER BY u.gpu_seconds DESC))[1] AS gpu_model,
                             max(u.units * u.fraction) AS cards, sum(u.gpu_seconds) AS g,
                             sum(u.effective_gpu_seconds) AS e, sum(u.unmetered_gpu_seconds) AS m,
                             max(u.peak_fb_used_mib) AS fb, bool_or(u.hour = last.hour) AS running
                      FROM gpu_usage_hourly u JOIN last ON last.cluster = u.cluster
                      WHERE u.hour >= $1 AND u.hour < $2 AND ($3::text[] IS NULL OR u.team = ANY($3))
                      GROUP BY u.cluster, u.namespace, u.pod)
           SELECT w.cluster AS "cluster!", w.namespace AS "namespace!", w.pod AS "pod!", w.team AS "team!",
                  t.owner AS "owner?", w.gpu_model AS "gpu_model!", w.cards AS "cards!", w.g AS "gpu_seconds!",
                  w.e AS "effective_gpu_seconds!", w.m AS "unmetered_gpu_seconds!", w.fb AS peak_fb_used_mib,
                  w.running AS "still_running!"
           FROM w LEFT JOIN teams t ON t.id = w.team
           ORDER BY w.cluster, w.namespace, w.pod"#,
        from,
        to,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}
