//! Hourly usage: replacing one hour of a cluster, and summing stored rows for reports.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};

use crate::access::Scope;
use crate::metering::HourOutput;
use crate::validate::ClusterName;

/// Serialises writers of the same cluster-hour (several workers may overlap); released at commit. Take the hours
/// of a batch in ascending order, so two writers of overlapping batches cannot deadlock.
pub async fn lock_hour(conn: &mut PgConnection, cluster: &str, hour: DateTime<Utc>) -> Result<(), sqlx::Error> {
    let hour_index = (hour.timestamp() / 3600) as i32;
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext($1), $2)", cluster, hour_index).execute(conn).await?;
    Ok(())
}

/// The hours of a batch and what they held: the (hour, namespace, pod) of rows removed or written, so the rollups
/// are rebuilt for those days, namespaces and pods only.
#[derive(Debug, Default)]
struct Touched {
    hours: Vec<DateTime<Utc>>,
    pods: BTreeSet<(DateTime<Utc>, String, String)>,
}

/// Removes everything stored for some hours (usage, its namespace rollup, capacity, anomalies) and returns the pods
/// the usage rows were of; the daily rollups are rebuilt by [`rebuild_rollups`] once the new rows are in.
async fn delete_hours(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<BTreeSet<(DateTime<Utc>, String, String)>, sqlx::Error> {
    let removed = sqlx::query!(
        "DELETE FROM gpu_usage_hourly WHERE cluster = $1 AND hour = ANY($2) RETURNING hour, namespace, pod",
        cluster,
        hours
    )
    .fetch_all(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM usage_namespace_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM node_capacity_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM ingest_anomalies WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(&mut *conn)
        .await?;
    super::serving::delete(conn, cluster, hours).await?;
    super::quota::delete(conn, cluster, hours).await?;
    super::waits::delete(conn, cluster, hours).await?;
    // what the nodes were taken to be goes with the hour's rows (an undo restores rows, not those facts)
    super::node_facts::delete(conn, cluster, hours).await?;
    Ok(removed.into_iter().map(|r| (r.hour, r.namespace, r.pod)).collect())
}

/// Removes everything stored for an hour; its rollups are rebuilt by [`rebuild_hour_rollups`] once the hour's
/// new rows are in (an undo puts replaced rows back this way).
pub async fn delete_hour(conn: &mut PgConnection, cluster: &str, hour: DateTime<Utc>) -> Result<(), sqlx::Error> {
    delete_hours(conn, cluster, &[hour]).await.map(drop)
}

/// The namespace × hour rollup of some hours, from their stored rows (none stored for them yet), each sum in a
/// fixed order so that any path rebuilding it gets the same bits.
async fn rollup_namespace_hours(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO usage_namespace_hourly (cluster, hour, namespace, team, gpu_model, kind, gpu_seconds,
             effective_gpu_seconds, unmetered_gpu_seconds)
         SELECT cluster, hour, namespace, max(team), gpu_model, kind,
             sum(gpu_seconds ORDER BY pod, container, resource),
             sum(effective_gpu_seconds ORDER BY pod, container, resource),
             sum(unmetered_gpu_seconds ORDER BY pod, container, resource)
         FROM gpu_usage_hourly WHERE cluster = $1 AND hour = ANY($2)
         GROUP BY cluster, hour, namespace, gpu_model, kind",
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Rebuilds the rollups some hours feed from their stored rows: namespace × hour, then the billing days (for the
/// namespaces touched; a day's capacity whole) and the UTC pod-days (for the pods touched) they belong to.
async fn rebuild_rollups(conn: &mut PgConnection, cluster: &str, touched: &Touched) -> Result<(), sqlx::Error> {
    let hours = &touched.hours;
    rollup_namespace_hours(conn, cluster, hours).await?;
    let namespaces: BTreeSet<(DateTime<Utc>, &str)> =
        touched.pods.iter().map(|(h, namespace, _)| (*h, namespace.as_str())).collect();
    let (ns_hours, ns_names): (Vec<DateTime<Utc>>, Vec<String>) =
        namespaces.into_iter().map(|(h, n)| (h, n.to_string())).unzip();
    sqlx::query!(
        "SELECT count(refresh_daily_namespaces($1, d.day, coalesce(n.namespaces, '{}')))
         FROM (SELECT DISTINCT billing_date(h) AS day FROM unnest($2::timestamptz[]) h) d
         LEFT JOIN (SELECT billing_date(t.h) AS day, array_agg(DISTINCT t.ns) AS namespaces
                    FROM unnest($3::timestamptz[], $4::text[]) AS t (h, ns) GROUP BY 1) n USING (day)",
        cluster,
        hours,
        &ns_hours,
        &ns_names
    )
    .fetch_one(&mut *conn)
    .await?;
    let pod_days: BTreeSet<(chrono::NaiveDate, &str, &str)> =
        touched.pods.iter().map(|(h, namespace, pod)| (h.date_naive(), namespace.as_str(), pod.as_str())).collect();
    let mut days = Vec::with_capacity(pod_days.len());
    let mut pod_namespaces = Vec::with_capacity(pod_days.len());
    let mut pods = Vec::with_capacity(pod_days.len());
    for (day, namespace, pod) in pod_days {
        days.push(day);
        pod_namespaces.push(namespace.to_string());
        pods.push(pod.to_string());
    }
    sqlx::query!(
        "SELECT count(refresh_pod_daily_pods($1, t.day, t.namespaces, t.pods))
         FROM (SELECT d AS day, array_agg(ns) AS namespaces, array_agg(pod) AS pods
               FROM unnest($2::date[], $3::text[], $4::text[]) AS u (d, ns, pod) GROUP BY d) t",
        cluster,
        &days,
        &pod_namespaces,
        &pods
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(())
}

/// Rebuilds the rollups an hour feeds from its stored rows (after [`delete_hour`] and putting rows back: an undo,
/// rare, so the whole billing day and UTC day are rebuilt rather than tracking the pods the hour held before).
pub async fn rebuild_hour_rollups(
    conn: &mut PgConnection,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    rollup_namespace_hours(conn, cluster, &[hour]).await?;
    sqlx::query!("SELECT refresh_daily($1, billing_date($2))", cluster, hour).execute(&mut *conn).await?;
    sqlx::query!("SELECT refresh_pod_daily($1, ($2 AT TIME ZONE 'UTC')::date)", cluster, hour)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Makes the monthly partitions (migrations/20261210000100_month_partitions.sql) of the months some hours fall in,
/// in a transaction of its own: call it before the batch's transaction (making a partition locks its table's
/// DEFAULT partition until commit). A no-op but for a catalog lookup when they exist; a row of a month without its
/// partition lands in the DEFAULT one, not an error. Refuses hours before the retention horizon.
pub async fn ensure_month_partitions(pool: &PgPool, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    let (Some(from), Some(to)) = (hours.iter().min(), hours.iter().max()) else {
        return Ok(());
    };
    sqlx::query!("SELECT ensure_month_partitions($1, $2)", from, to).fetch_one(pool).await?;
    Ok(())
}

/// One metered hour of a batch.
#[derive(Debug, Clone, Copy)]
pub struct HourRows<'a> {
    pub hour: DateTime<Utc>,
    pub out: &'a HourOutput,
}

/// Replaces everything stored for one cluster-hour with `out`. Idempotent: the same `out` gives the same rows.
pub async fn replace_hour(
    conn: &mut PgConnection,
    cluster: &str,
    hour: DateTime<Utc>,
    out: &HourOutput,
) -> Result<(), sqlx::Error> {
    replace_hours(conn, cluster, &[HourRows { hour, out }]).await
}

/// Replaces everything stored for some hours of one cluster with their metered rows, in the caller's transaction:
/// one statement per table for all of them, then the rollups once, for what the hours held before and hold now.
/// Idempotent: the same rows give the same tables.
pub async fn replace_hours(conn: &mut PgConnection, cluster: &str, batch: &[HourRows<'_>]) -> Result<(), sqlx::Error> {
    if batch.is_empty() {
        return Ok(());
    }
    let hours: Vec<DateTime<Utc>> = batch.iter().map(|b| b.hour).collect();
    // raw rows dropped by `cardhour retention` cannot come back (their months' rollups are kept as they are)
    sqlx::query!(r#"SELECT raw_retention_check(min(h)) AS "ok?" FROM unnest($1::timestamptz[]) h"#, &hours)
        .fetch_one(&mut *conn)
        .await?;
    let mut touched = Touched { pods: delete_hours(conn, cluster, &hours).await?, hours };
    for b in batch {
        touched.pods.extend(b.out.rows.iter().map(|r| (b.hour, r.key.namespace.clone(), r.key.pod.clone())));
    }

    let rows = || batch.iter().flat_map(|b| b.out.rows.iter().map(move |r| (b.hour, r)));
    let text = |f: fn(&crate::metering::UsageRow) -> String| rows().map(|(_, r)| f(r)).collect::<Vec<String>>();
    let num = |f: fn(&crate::metering::UsageRow) -> f64| rows().map(|(_, r)| f(r)).collect::<Vec<f64>>();
    sqlx::query!(
        "INSERT INTO gpu_usage_hourly (cluster, hour, namespace, pod, container, resource, gpu_model, kind, mig_profile,
             node, units, fraction, gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source,
             peak_fb_used_mib, label_team, memory_share, bridged_gpu_seconds, team)
         WITH u AS MATERIALIZED (
             SELECT * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                 $8::text[], $9::text[], $10::text[], $11::float8[], $12::float8[], $13::float8[], $14::float8[],
                 $15::float8[], $16::text[], $17::float8[], $18::text[], $19::float8[], $20::float8[])
                 AS u (hour, namespace, pod, container, resource, gpu_model, kind, mig_profile, node, units, fraction,
                       gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib,
                       label_team, memory_share, bridged_gpu_seconds)),
         -- team_of once per namespace, hour and label (hundreds in a batch), not once per row (thousands); both
         -- materialized, or the planner evaluates team_of after the join, once per row again
         t AS MATERIALIZED (
             SELECT d.namespace, d.hour, d.label_team, team_of($1, d.namespace, d.hour, d.label_team) AS team
             FROM (SELECT DISTINCT namespace, hour, label_team FROM u) d)
         SELECT $1, u.hour, u.namespace, u.pod, u.container, u.resource, u.gpu_model, u.kind, u.mig_profile, u.node,
             u.units, u.fraction, u.gpu_seconds, u.effective_gpu_seconds, u.unmetered_gpu_seconds, u.util_source,
             u.peak_fb_used_mib, u.label_team, u.memory_share, u.bridged_gpu_seconds, t.team
         FROM u JOIN t ON t.namespace = u.namespace AND t.hour = u.hour
             AND t.label_team IS NOT DISTINCT FROM u.label_team",
        cluster,
        &rows().map(|(h, _)| h).collect::<Vec<_>>(),
        &text(|x| x.key.namespace.clone()),
        &text(|x| x.key.pod.clone()),
        &text(|x| x.key.container.clone()),
        &text(|x| x.resource.clone()),
        &text(|x| x.gpu_model.clone()),
        &text(|x| x.kind.to_string()),
        &rows().map(|(_, x)| x.mig_profile.clone()).collect::<Vec<Option<String>>>() as &[Option<String>],
        &text(|x| x.node.clone()),
        &num(|x| x.units),
        &num(|x| x.fraction),
        &num(|x| x.gpu_seconds),
        &num(|x| x.effective_gpu_seconds),
        &num(|x| x.unmetered_gpu_seconds),
        &text(|x| x.util_source.as_str().to_string()),
        &rows().map(|(_, x)| x.peak_fb_used_mib).collect::<Vec<Option<f64>>>() as &[Option<f64>],
        &rows().map(|(_, x)| x.label_team.clone()).collect::<Vec<Option<String>>>() as &[Option<String>],
        &rows().map(|(_, x)| x.memory_share).collect::<Vec<Option<f64>>>() as &[Option<f64>],
        &num(|x| x.bridged_gpu_seconds),
    )
    .execute(&mut *conn)
    .await?;

    let caps = || batch.iter().flat_map(|b| b.out.capacity.iter().map(move |c| (b.hour, c)));
    sqlx::query!(
        "INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds, offered_card_seconds,
             offered_source)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::float8[], $6::float8[], $7::float8[],
             $8::text[])",
        cluster,
        &caps().map(|(h, _)| h).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.node.clone()).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.gpu_model.clone()).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.cards).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.card_seconds).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.offered_card_seconds).collect::<Vec<_>>(),
        &caps().map(|(_, x)| x.offered_source.as_str().to_string()).collect::<Vec<_>>(),
    )
    .execute(&mut *conn)
    .await?;

    let anomalies = || batch.iter().flat_map(|b| b.out.anomalies.iter().map(move |a| (b.hour, a)));
    sqlx::query!(
        "INSERT INTO ingest_anomalies (cluster, hour, kind, subject, count)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::int8[])",
        cluster,
        &anomalies().map(|(h, _)| h).collect::<Vec<_>>(),
        &anomalies().map(|(_, x)| x.kind.as_str().to_string()).collect::<Vec<_>>(),
        &anomalies().map(|(_, x)| x.subject.clone()).collect::<Vec<_>>(),
        &anomalies().map(|(_, x)| x.count as i64).collect::<Vec<_>>(),
    )
    .execute(&mut *conn)
    .await?;

    let serving: Vec<_> = batch.iter().map(|b| (b.hour, b.out.serving.as_slice())).collect();
    super::serving::insert(conn, cluster, &serving).await?;
    let quota: Vec<_> = batch.iter().map(|b| (b.hour, b.out.quota.as_slice())).collect();
    super::quota::insert(conn, cluster, &quota).await?;
    let waits: Vec<_> = batch.iter().map(|b| (b.hour, b.out.pending.as_slice())).collect();
    super::waits::insert(conn, cluster, &waits).await?;

    rebuild_rollups(conn, cluster, &touched).await?;
    register_label_teams(conn, cluster, &touched.hours).await?;

    sqlx::query!(
        "INSERT INTO ingested_hours (cluster, hour, scrape_interval_ms, usage_rows)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::int8[], $4::int4[])
         ON CONFLICT (cluster, hour) DO UPDATE SET scrape_interval_ms = EXCLUDED.scrape_interval_ms,
             usage_rows = EXCLUDED.usage_rows, ingested_at = now()",
        cluster,
        &touched.hours,
        &batch.iter().map(|b| b.out.interval_ms).collect::<Vec<Option<i64>>>() as &[Option<i64>],
        &batch.iter().map(|b| b.out.rows.len() as i32).collect::<Vec<_>>(),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Analyzes the ingest's tables (and partitions) that changed by more than a fifth, and at least `min_rows` rows,
/// since their statistics were taken; returns their names. Between batches of a large backfill, so the planner
/// does not plan on the statistics of a table that was empty when autovacuum last looked.
pub async fn analyze_stale(pool: &PgPool, min_rows: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT analyze_stale_ingest_tables($1) AS "table!""#, min_rows).fetch_all(pool).await
}

/// Registers the teams the hour's team labels make (SPEC §4: the first label seen names the team; a team that
/// exists keeps its name) and notes every label with its team, so that labels making one team can be reported.
async fn register_label_teams(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO teams (id, name)
         SELECT DISTINCT ON (id) id, left(label, 200)
         FROM (SELECT label, team_id_of_label(label) AS id
               FROM (SELECT DISTINCT label_team AS label FROM gpu_usage_hourly
                     WHERE cluster = $1 AND hour = ANY($2)) d) l
         WHERE id IS NOT NULL ORDER BY id, label COLLATE \"C\"
         ON CONFLICT (id) DO NOTHING",
        cluster,
        hours
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO team_labels (label, team_id, first_hour, last_hour)
         SELECT label, team_id, first_hour, last_hour
         FROM (SELECT label, team_id_of_label(label) AS team_id, first_hour, last_hour
               FROM (SELECT label_team AS label, min(hour) AS first_hour, max(hour) AS last_hour
                     FROM gpu_usage_hourly WHERE cluster = $1 AND hour = ANY($2) AND label_team IS NOT NULL
                     GROUP BY label_team) g) l
         WHERE team_id IS NOT NULL
         ON CONFLICT (label) DO UPDATE SET first_hour = least(team_labels.first_hour, EXCLUDED.first_hour),
             last_hour = greatest(team_labels.last_hour, EXCLUDED.last_hour)
         WHERE team_labels.first_hour > EXCLUDED.first_hour OR team_labels.last_hour < EXCLUDED.last_hour",
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// How stored usage is grouped for a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Team,
    Namespace,
    Pod,
    Model,
}

impl GroupBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Namespace => "namespace",
            Self::Pod => "pod",
            Self::Model => "model",
        }
    }
}

/// Summed stored usage of one group; the keys not grouped by are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageTotal {
    pub team: Option<String>,
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub gpu_model: Option<String>,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// Sums of stored usage over `[from, to)`, grouped, optionally for one cluster, within `scope`. `billing_tz`
/// lets a range of whole billing days read the daily rollup.
pub async fn totals(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    group_by: GroupBy,
    cluster: Option<&ClusterName>,
    scope: &Scope,
    billing_tz: chrono_tz::Tz,
) -> Result<Vec<UsageTotal>, sqlx::Error> {
    let cluster = cluster.map(ClusterName::as_str);
    let midnight = |t: DateTime<Utc>| {
        let local = t.with_timezone(&billing_tz);
        (local.time() == chrono::NaiveTime::MIN).then(|| local.date_naive())
    };
    let days = midnight(from).zip(midnight(to));
    let teams = scope.teams.as_deref() as Option<&[String]>;
    if group_by == GroupBy::Pod {
        return sqlx::query_as!(
            UsageTotal,
            r#"SELECT NULL::text AS team, namespace AS "namespace?", pod AS "pod?", NULL::text AS gpu_model,
                      sum(gpu_seconds) AS "gpu_seconds!",
                      sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                      sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
               FROM gpu_usage_hourly
               WHERE hour >= $1 AND hour < $2 AND ($3::text IS NULL OR cluster = $3)
                 AND ($4::text[] IS NULL OR team = ANY($4))
               GROUP BY namespace, pod
               ORDER BY namespace, pod"#,
            from,
            to,
            cluster,
            teams,
        )
        .fetch_all(pool)
        .await;
    }
    if let Some((from_day, to_day)) = days {
        // whole billing days: the daily rollup (~24× fewer rows)
        return sqlx::query_as!(
            UsageTotal,
            r#"SELECT CASE WHEN $3 = 'team' THEN team END AS team,
                      CASE WHEN $3 = 'namespace' THEN namespace END AS namespace,
                      NULL::text AS pod,
                      CASE WHEN $3 = 'model' THEN gpu_model END AS gpu_model,
                      sum(gpu_seconds) AS "gpu_seconds!",
                      sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                      sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
               FROM usage_namespace_daily
               WHERE day >= $1 AND day < $2 AND ($4::text IS NULL OR cluster = $4)
                 AND ($5::text[] IS NULL OR team = ANY($5))
               GROUP BY 1, 2, 3, 4
               ORDER BY 1, 2, 3, 4"#,
            from_day,
            to_day,
            group_by.as_str(),
            cluster,
            teams,
        )
        .fetch_all(pool)
        .await;
    }
    // team, namespace and model read the per-namespace rollup
    sqlx::query_as!(
        UsageTotal,
        r#"SELECT CASE WHEN $3 = 'team' THEN team END AS team,
                  CASE WHEN $3 = 'namespace' THEN namespace END AS namespace,
                  NULL::text AS pod,
                  CASE WHEN $3 = 'model' THEN gpu_model END AS gpu_model,
                  sum(gpu_seconds) AS "gpu_seconds!",
                  sum(effective_gpu_seconds) AS "effective_gpu_seconds!",
                  sum(unmetered_gpu_seconds) AS "unmetered_gpu_seconds!"
           FROM usage_namespace_hourly
           WHERE hour >= $1 AND hour < $2 AND ($4::text IS NULL OR cluster = $4)
             AND ($5::text[] IS NULL OR team = ANY($5))
           GROUP BY 1, 2, 3, 4
           ORDER BY 1, 2, 3, 4"#,
        from,
        to,
        group_by.as_str(),
        cluster,
        teams,
    )
    .fetch_all(pool)
    .await
}

/// Allocated and capacity card-seconds of one GPU model (DCGM name) over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelAllocation {
    pub gpu_model: String,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    pub capacity_seconds: f64,
}

pub async fn model_allocation(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<ModelAllocation>, sqlx::Error> {
    sqlx::query_as!(
        ModelAllocation,
        r#"WITH u AS (SELECT gpu_model, sum(gpu_seconds) AS g, sum(effective_gpu_seconds) AS e,
                             sum(unmetered_gpu_seconds) AS m
                      FROM usage_namespace_hourly WHERE hour >= $1 AND hour < $2 GROUP BY gpu_model),
                c AS (SELECT gpu_model, sum(card_seconds) AS s
                      FROM node_capacity_hourly WHERE hour >= $1 AND hour < $2 GROUP BY gpu_model)
           SELECT coalesce(u.gpu_model, c.gpu_model) AS "gpu_model!",
                  coalesce(u.g, 0) AS "gpu_seconds!", coalesce(u.e, 0) AS "effective_gpu_seconds!",
                  coalesce(u.m, 0) AS "unmetered_gpu_seconds!", coalesce(c.s, 0) AS "capacity_seconds!"
           FROM u FULL JOIN c ON u.gpu_model = c.gpu_model
           ORDER BY 1"#,
        from,
        to
    )
    .fetch_all(pool)
    .await
}
