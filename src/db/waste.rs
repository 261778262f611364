//! Per-pod sums over a window, for the idle-waste list.

use chrono::{DateTime, Days, NaiveDate, NaiveTime, Utc};
use sqlx::PgPool;

use crate::access::Scope;

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

/// Every pod that held GPUs in `[from, to)` (whole hours), with its sums; `still_running` when it held them in
/// its cluster's newest stored hour of the window. Team and model are the pod's as of its last hour in the window,
/// and a scoped caller sees the pods whose team that is.
///
/// Whole UTC days of the window are read from `usage_pod_daily`, the hours before the first and after the last
/// midnight from `gpu_usage_hourly`.
pub async fn pods(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    scope: &Scope,
) -> Result<Vec<PodWindow>, sqlx::Error> {
    let w = DaySplit::of(from, to);
    sqlx::query_as!(
        PodWindow,
        r#"WITH last AS MATERIALIZED (SELECT c.name AS cluster,
                                             (SELECT max(i.hour) FROM ingested_hours i
                                              WHERE i.cluster = c.name AND i.hour >= $1 AND i.hour < $2) AS hour
                                      FROM clusters c),
                parts AS (SELECT cluster, namespace, pod, last_hour, team, gpu_model, cards, gpu_seconds,
                                 effective_gpu_seconds, unmetered_gpu_seconds, peak_fb_used_mib
                          FROM usage_pod_daily WHERE day >= $3 AND day < $4
                          UNION ALL
                          SELECT cluster, namespace, pod, hour, team, gpu_model, cards, gpu_seconds,
                                 effective_gpu_seconds, unmetered_gpu_seconds, peak_fb_used_mib
                          FROM usage_pod_hours(NULL, $1, $5)
                          UNION ALL
                          SELECT cluster, namespace, pod, hour, team, gpu_model, cards, gpu_seconds,
                                 effective_gpu_seconds, unmetered_gpu_seconds, peak_fb_used_mib
                          FROM usage_pod_hours(NULL, $6, $2)),
                -- a pod's sums over its parts, and team and model from the part holding its last hour: one sort
                -- by pod, robust to stale statistics (unlike a join on the last hour)
                w AS (SELECT DISTINCT ON (cluster, namespace, pod) cluster, namespace, pod, last_hour, team, gpu_model,
                             max(cards) OVER p AS cards, sum(gpu_seconds) OVER p AS g,
                             sum(effective_gpu_seconds) OVER p AS e, sum(unmetered_gpu_seconds) OVER p AS m,
                             max(peak_fb_used_mib) OVER p AS fb
                      FROM parts
                      WINDOW p AS (PARTITION BY cluster, namespace, pod ORDER BY last_hour DESC
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                      ORDER BY cluster, namespace, pod, last_hour DESC)
           SELECT w.cluster AS "cluster!", w.namespace AS "namespace!", w.pod AS "pod!", w.team AS "team!",
                  t.owner AS "owner?", w.gpu_model AS "gpu_model!", w.cards AS "cards!", w.g AS "gpu_seconds!",
                  w.e AS "effective_gpu_seconds!", w.m AS "unmetered_gpu_seconds!", w.fb AS peak_fb_used_mib,
                  (w.last_hour = last.hour) IS TRUE AS "still_running!"
           FROM w
           JOIN last ON last.cluster = w.cluster
           LEFT JOIN teams t ON t.id = w.team
           WHERE $7::text[] IS NULL OR w.team = ANY($7)"#,
        from,
        to,
        w.first_day,
        w.end_day,
        w.days_from,
        w.days_to,
        scope.teams.as_deref() as Option<&[String]>
    )
    .fetch_all(pool)
    .await
}

/// A window of whole hours cut at UTC midnights: the hours `[from, days_from)`, the whole days
/// `[first_day, end_day)` (none when the window holds no whole day), the hours `[days_to, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DaySplit {
    days_from: DateTime<Utc>,
    days_to: DateTime<Utc>,
    first_day: NaiveDate,
    end_day: NaiveDate,
}

impl DaySplit {
    fn of(from: DateTime<Utc>, to: DateTime<Utc>) -> DaySplit {
        let midnight = |d: NaiveDate| d.and_time(NaiveTime::MIN).and_utc();
        let floor = from.date_naive();
        let first_day = if midnight(floor) == from { floor } else { floor + Days::new(1) };
        let end_day = to.date_naive();
        if first_day < end_day {
            DaySplit { days_from: midnight(first_day), days_to: midnight(end_day), first_day, end_day }
        } else {
            // no whole day: all of it from the hours, the second hour range empty
            DaySplit { days_from: to, days_to: to, first_day, end_day: first_day }
        }
    }
}

/// The end of the newest stored hour before `t` (any cluster).
pub async fn stored_until(pool: &PgPool, t: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT max(hour) + interval '1 hour' AS "until" FROM ingested_hours WHERE hour < $1"#, t)
        .fetch_one(pool)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn windows_are_cut_at_utc_midnights() {
        // a week up to 16:00: 8 hours, 6 whole days, 16 hours
        let w = DaySplit::of(t("2026-11-23T16:00:00Z"), t("2026-11-30T16:00:00Z"));
        assert_eq!((w.days_from, w.days_to), (t("2026-11-24T00:00:00Z"), t("2026-11-30T00:00:00Z")));
        assert_eq!((w.first_day, w.end_day), (d("2026-11-24"), d("2026-11-30")));
        // whole days only
        let w = DaySplit::of(t("2026-11-23T00:00:00Z"), t("2026-11-30T00:00:00Z"));
        assert_eq!((w.days_from, w.days_to), (t("2026-11-23T00:00:00Z"), t("2026-11-30T00:00:00Z")));
        assert_eq!((w.first_day, w.end_day), (d("2026-11-23"), d("2026-11-30")));
        // inside one day, and across one midnight without a whole day: hours only
        for (from, to) in
            [("2026-11-30T02:00:00Z", "2026-11-30T04:00:00Z"), ("2026-11-29T22:00:00Z", "2026-11-30T03:00:00Z")]
        {
            let w = DaySplit::of(t(from), t(to));
            assert_eq!((w.days_from, w.days_to), (t(to), t(to)), "{from}");
            assert_eq!(w.first_day, w.end_day, "{from}");
        }
    }
}
