//! GPU pods' hours of waiting (`pod_wait_hourly`, SPEC §10): written, replaced, archived and restored with the
//! hour's usage rows; read back as each pod's wait.

use chrono::{DateTime, TimeZone, Utc};
use sqlx::PgConnection;

use crate::metering::PendingRow;

/// How a pod's queue is stored: `cluster_queue/cq-a`.
fn queue_name(q: &crate::metering::QuotaScope) -> String {
    format!("{}/{}", q.kind.as_str(), q.name)
}

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Removes what is stored for some hours of a cluster (the caller writes their new rows).
pub async fn delete(conn: &mut PgConnection, cluster: &str, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM pod_wait_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(conn)
        .await?;
    Ok(())
}

/// Writes the wait rows of some hours (none stored for them).
pub async fn insert(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[(DateTime<Utc>, &[PendingRow])],
) -> Result<(), sqlx::Error> {
    let rows = || hours.iter().flat_map(|(h, rows)| rows.iter().map(move |r| (*h, r)));
    if rows().next().is_none() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO pod_wait_hourly (cluster, hour, namespace, pod, uid, gpu_model, cards, queue, first_pending,
             first_running, last_seen, pending_card_seconds, label_team)
         SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
             $8::text[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::float8[], $13::text[])",
        cluster,
        &rows().map(|(h, _)| h).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.namespace.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.pod.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.uid.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.gpu_model.clone()).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.cards).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.queue.as_ref().map(queue_name)).collect::<Vec<_>>() as &[Option<String>],
        &rows().map(|(_, r)| r.phases.first_pending_ms.map(at)).collect::<Vec<_>>() as &[Option<DateTime<Utc>>],
        &rows().map(|(_, r)| r.phases.first_running_ms.map(at)).collect::<Vec<_>>() as &[Option<DateTime<Utc>>],
        &rows().map(|(_, r)| at(r.phases.last_seen_ms)).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.pending_card_seconds).collect::<Vec<_>>(),
        &rows().map(|(_, r)| r.label_team.clone()).collect::<Vec<Option<String>>>() as &[Option<String>],
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Keeps the rows of some hours with the run replacing them.
pub async fn save_replaced(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hours: &[DateTime<Utc>],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO replaced_pod_wait_hourly SELECT $1, w.* FROM pod_wait_hourly w
         WHERE cluster = $2 AND hour = ANY($3)",
        run_id,
        cluster,
        hours
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the rows a run replaced for an hour differ from those stored now.
pub async fn changed(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             (SELECT namespace, pod, uid, gpu_model, cards, queue, first_pending, first_running, last_seen,
                  pending_card_seconds, label_team
              FROM replaced_pod_wait_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3
              EXCEPT SELECT namespace, pod, uid, gpu_model, cards, queue, first_pending, first_running, last_seen,
                  pending_card_seconds, label_team
              FROM pod_wait_hourly WHERE cluster = $2 AND hour = $3)
             UNION ALL
             (SELECT namespace, pod, uid, gpu_model, cards, queue, first_pending, first_running, last_seen,
                  pending_card_seconds, label_team
              FROM pod_wait_hourly WHERE cluster = $2 AND hour = $3
              EXCEPT SELECT namespace, pod, uid, gpu_model, cards, queue, first_pending, first_running, last_seen,
                  pending_card_seconds, label_team
              FROM replaced_pod_wait_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3)
           ) AS "changed!""#,
        run_id,
        cluster,
        hour
    )
    .fetch_one(conn)
    .await
}

/// Drops what a run kept of an hour (it replaced equal rows).
pub async fn forget_replaced(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM replaced_pod_wait_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Puts back the rows a run replaced for an hour (the hour's current rows already removed).
pub async fn restore(
    conn: &mut PgConnection,
    run_id: i64,
    cluster: &str,
    hour: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO pod_wait_hourly (cluster, hour, namespace, pod, uid, gpu_model, cards, queue, first_pending,
             first_running, last_seen, pending_card_seconds, label_team)
         SELECT cluster, hour, namespace, pod, uid, gpu_model, cards, queue, first_pending, first_running, last_seen,
             pending_card_seconds, label_team
         FROM replaced_pod_wait_hourly WHERE run_id = $1 AND cluster = $2 AND hour = $3",
        run_id,
        cluster,
        hour
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// One GPU pod object's wait, over all its stored hours.
#[derive(Debug, Clone, PartialEq)]
pub struct PodWait {
    pub cluster: String,
    pub uid: String,
    pub namespace: String,
    pub pod: String,
    /// Its team, as of its first row's hour.
    pub team: String,
    /// The model of the cards it started on (its first row's while it never ran).
    pub gpu_model: String,
    /// Its cards when it started (its first row's while it never ran).
    pub cards: f64,
    /// Its queue (`cluster_queue/cq-a`), where a label names one.
    pub queue: Option<String>,
    pub first_pending: Option<DateTime<Utc>>,
    pub first_running: Option<DateTime<Utc>>,
    pub last_seen: DateTime<Utc>,
}

/// The waits of the pods that started Running in `[from, to)` or were last seen there never having run.
pub async fn pod_waits(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<PodWait>, sqlx::Error> {
    sqlx::query_as!(
        PodWait,
        r#"WITH pods AS (
               SELECT cluster, uid, min(first_running) AS first_running, max(last_seen) AS last_seen,
                   min(first_pending) AS first_pending, min(hour) AS first_hour,
                   min(hour) FILTER (WHERE first_running IS NOT NULL) AS start_hour
               FROM pod_wait_hourly
               WHERE (cluster, uid) IN (SELECT cluster, uid FROM pod_wait_hourly WHERE hour >= $1 AND hour < $2)
               GROUP BY cluster, uid)
           SELECT p.cluster AS "cluster!", p.uid AS "uid!", f.namespace AS "namespace!", f.pod AS "pod!",
               team_of(p.cluster, f.namespace, f.hour, f.label_team) AS "team!",
               coalesce(s.gpu_model, f.gpu_model) AS "gpu_model!", coalesce(s.cards, f.cards) AS "cards!",
               coalesce(s.queue, f.queue) AS queue,
               p.first_pending, p.first_running, p.last_seen AS "last_seen!"
           FROM pods p
           JOIN pod_wait_hourly f ON f.cluster = p.cluster AND f.uid = p.uid AND f.hour = p.first_hour
           LEFT JOIN pod_wait_hourly s ON s.cluster = p.cluster AND s.uid = p.uid AND s.hour = p.start_hour
           WHERE (p.first_running >= $1 AND p.first_running < $2)
              OR (p.first_running IS NULL AND p.last_seen >= $1 AND p.last_seen < $2)
           ORDER BY p.cluster, p.uid"#,
        from,
        to
    )
    .fetch_all(conn)
    .await
}

/// Pending card-seconds per team over `[from, to)`.
pub async fn pending_by_team(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(String, f64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT team AS "team!", sum(pending_card_seconds ORDER BY cluster, hour, uid) AS "seconds!"
           FROM (SELECT w.*, team_of(cluster, namespace, hour, label_team) AS team
                 FROM pod_wait_hourly w WHERE hour >= $1 AND hour < $2) t
           GROUP BY team ORDER BY team"#,
        from,
        to
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.team, r.seconds)).collect())
}

/// Deletes the rows (stored and replaced) of the hours before raw retention's horizon, with the raw rows.
pub async fn delete_before_retention(conn: &mut PgConnection) -> Result<(u64, u64), sqlx::Error> {
    let stored = sqlx::query!(
        "DELETE FROM pod_wait_hourly WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(&mut *conn)
    .await?;
    let replaced = sqlx::query!(
        "DELETE FROM replaced_pod_wait_hourly
         WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(conn)
    .await?;
    Ok((stored.rows_affected(), replaced.rows_affected()))
}

/// One pod name's GPU use in a range, for the what-if replay (SPEC §10): its cards, GPU-seconds and arrival.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayUse {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    /// The most cards (Σ units × fraction) it held in an hour.
    pub cards: f64,
    /// Its GPU-seconds in the range (a name's restarts run one after another: one pod to the replay).
    pub gpu_seconds: f64,
    /// Its first Pending (or Running) sample, where a wait row has one; else its first hour with use.
    pub arrival: DateTime<Utc>,
    /// Its queue (`cluster_queue/cq-a`), where a label names one.
    pub queue: Option<String>,
}

/// The GPU pods' use in `[from, to)` per pod name and model, with when each asked for its cards.
pub async fn replay_use(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<ReplayUse>, sqlx::Error> {
    sqlx::query_as!(
        ReplayUse,
        r#"WITH u AS (
               SELECT cluster, namespace, pod, gpu_model, hour, sum(units * fraction) AS cards,
                   sum(gpu_seconds ORDER BY container, resource) AS gpu_seconds
               FROM gpu_usage_hourly WHERE hour >= $1 AND hour < $2
               GROUP BY cluster, namespace, pod, gpu_model, hour),
           p AS (
               SELECT cluster, namespace, pod, gpu_model, max(cards) AS cards,
                   sum(gpu_seconds ORDER BY hour) AS gpu_seconds, min(hour) AS first_hour
               FROM u GROUP BY cluster, namespace, pod, gpu_model),
           w AS (
               SELECT cluster, namespace, pod,
                   min(coalesce(least(first_pending, first_running), first_pending, first_running)) AS arrival,
                   max(queue) AS queue
               FROM pod_wait_hourly WHERE hour >= $1 AND hour < $2
               GROUP BY cluster, namespace, pod)
           SELECT p.cluster AS "cluster!", p.namespace AS "namespace!", p.pod AS "pod!", p.gpu_model AS "gpu_model!",
               p.cards AS "cards!", p.gpu_seconds AS "gpu_seconds!",
               greatest(coalesce(w.arrival, p.first_hour), $1) AS "arrival!", w.queue
           FROM p LEFT JOIN w USING (cluster, namespace, pod)
           ORDER BY 7, p.cluster, p.namespace, p.pod, p.gpu_model"#,
        from,
        to
    )
    .fetch_all(conn)
    .await
}

/// Per GPU model in `[from, to)`: capacity card-seconds, hours with capacity, and the GPU-seconds used.
pub async fn model_capacity(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(String, f64, i64, f64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH c AS (
               SELECT gpu_model, sum(card_seconds ORDER BY cluster, hour, node) AS card_seconds,
                   count(DISTINCT hour) AS hours
               FROM node_capacity_hourly WHERE hour >= $1 AND hour < $2 GROUP BY gpu_model),
           u AS (
               SELECT gpu_model, sum(gpu_seconds ORDER BY cluster, hour, namespace, kind) AS gpu_seconds
               FROM usage_namespace_hourly WHERE hour >= $1 AND hour < $2 GROUP BY gpu_model)
           SELECT coalesce(c.gpu_model, u.gpu_model) AS "gpu_model!", coalesce(c.card_seconds, 0) AS "card_seconds!",
               coalesce(c.hours, 0) AS "hours!", coalesce(u.gpu_seconds, 0) AS "gpu_seconds!"
           FROM c FULL JOIN u ON u.gpu_model = c.gpu_model
           ORDER BY 1"#,
        from,
        to
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.gpu_model, r.card_seconds, r.hours, r.gpu_seconds)).collect())
}

/// Pending card-seconds per GPU model over `[from, to)`: a pod's waiting counts under the model it started on (an
/// unbound Pending pod names no node); `unknown` for pods that never started on a named model.
pub async fn pending_by_model(
    conn: &mut PgConnection,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<(String, f64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT model AS "gpu_model!", sum(pending_card_seconds ORDER BY cluster, hour, uid) AS "seconds!"
           FROM (SELECT w.*, coalesce(
                     (SELECT s.gpu_model FROM pod_wait_hourly s
                      WHERE s.cluster = w.cluster AND s.uid = w.uid AND s.first_running IS NOT NULL
                      ORDER BY s.hour LIMIT 1),
                     w.gpu_model) AS model
                 FROM pod_wait_hourly w WHERE hour >= $1 AND hour < $2) t
           GROUP BY model ORDER BY model"#,
        from,
        to
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.gpu_model, r.seconds)).collect())
}
