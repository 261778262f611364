//! Replica billing settings (`replica_billing_policies`) and the per-day usage they and unverified nodes apply to.

use chrono::NaiveDate;
use sqlx::{PgConnection, PgPool};

use crate::billing::{ReplicaBilling, ReplicaPolicyVersion};
use crate::validate::ClusterName;

/// Every stored setting, sorted by cluster, pool, date.
pub async fn list(conn: &mut PgConnection) -> Result<Vec<ReplicaPolicyVersion>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT cluster, pool, effective_from, policy FROM replica_billing_policies
           ORDER BY cluster, pool, effective_from"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ReplicaPolicyVersion {
            cluster: r.cluster,
            pool: (!r.pool.is_empty()).then_some(r.pool),
            from: r.effective_from,
            // the table's check admits these two names only
            policy: ReplicaBilling::parse(&r.policy).unwrap_or_default(),
        })
        .collect())
}

/// Stores a setting (replacing one of the same cluster, pool and date) and audits it, in the caller's transaction.
pub async fn set(conn: &mut PgConnection, v: &ReplicaPolicyVersion, actor: &str) -> Result<(), sqlx::Error> {
    let pool = v.pool.clone().unwrap_or_default();
    let before = sqlx::query_scalar!(
        "SELECT policy FROM replica_billing_policies WHERE cluster = $1 AND pool = $2 AND effective_from = $3",
        v.cluster,
        pool,
        v.from
    )
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query!(
        r#"INSERT INTO replica_billing_policies (cluster, pool, effective_from, policy, set_by) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (cluster, pool, effective_from) DO UPDATE SET policy = excluded.policy,
               set_by = excluded.set_by, set_at = now()"#,
        v.cluster,
        pool,
        v.from,
        v.policy.as_str(),
        actor
    )
    .execute(&mut *conn)
    .await?;
    let subject = match &v.pool {
        Some(p) => format!("replica_policy:{}/{p}/{}", v.cluster, v.from),
        None => format!("replica_policy:{}/{}", v.cluster, v.from),
    };
    crate::db::audit::record(
        conn,
        actor,
        "replica_policy.set",
        &subject,
        before.map(|b| serde_json::json!({ "policy": b })),
        serde_json::to_value(v).ok(),
    )
    .await
}

/// Usage of billing days `[from, to)` that per-node facts change on the bill, per cluster, node pool, day, team,
/// namespace, model and kind: time-sliced rows (with the replica-seconds `gpu_seconds / fraction` a whole-card
/// policy bills) and rows held on a node listed unverified (`unverified_kinds`) in that hour.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    pub cluster: String,
    pub pool: Option<String>,
    pub day: NaiveDate,
    pub team: String,
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    pub replica_seconds: f64,
    pub unverified: bool,
}

pub async fn node_usage_by_day(
    pool: &PgPool,
    from: NaiveDate,
    to: NaiveDate,
    unverified_kinds: &[String],
) -> Result<Vec<NodeUsage>, sqlx::Error> {
    sqlx::query_as!(
        NodeUsage,
        // Two narrow reads, never the month's every row: the time-sliced rows (a partial index), and the rows
        // of the few node-hours listed unverified (the primary key's cluster and hour, then the node).
        r#"WITH a AS (SELECT DISTINCT cluster, hour, subject FROM ingest_anomalies
                      WHERE kind = ANY($3) AND hour >= ($1::date - 1)::timestamptz AND hour < ($2::date + 2)::timestamptz),
                g AS (SELECT t.cluster, t.hour, t.node, t.team, t.namespace, t.gpu_model, t.kind, t.fraction,
                             t.gpu_seconds, t.effective_gpu_seconds, t.unmetered_gpu_seconds,
                             (a.subject IS NOT NULL) AS unverified
                      FROM gpu_usage_hourly t
                      LEFT JOIN a ON a.cluster = t.cluster AND a.hour = t.hour AND a.subject = t.node
                      WHERE t.kind = 'timeslice'
                        AND t.hour >= ($1::date - 1)::timestamptz AND t.hour < ($2::date + 2)::timestamptz
                      UNION ALL
                      SELECT t.cluster, t.hour, t.node, t.team, t.namespace, t.gpu_model, t.kind, t.fraction,
                             t.gpu_seconds, t.effective_gpu_seconds, t.unmetered_gpu_seconds, true
                      FROM a JOIN gpu_usage_hourly t ON t.cluster = a.cluster AND t.hour = a.hour AND t.node = a.subject
                      WHERE t.kind <> 'timeslice')
           SELECT g.cluster AS "cluster!", ns.pool AS "pool?", billing_date(g.hour) AS "day!", g.team AS "team!",
                  g.namespace AS "namespace!", g.gpu_model AS "gpu_model!", g.kind AS "kind!",
                  sum(g.gpu_seconds) AS "gpu_seconds!", sum(g.effective_gpu_seconds) AS "effective_gpu_seconds!",
                  sum(g.unmetered_gpu_seconds) AS "unmetered_gpu_seconds!",
                  sum(g.gpu_seconds / g.fraction) AS "replica_seconds!",
                  bool_or(g.unverified) AS "unverified!"
           FROM g
           LEFT JOIN node_settings ns ON ns.cluster = g.cluster AND ns.node = g.node
           WHERE billing_date(g.hour) >= $1::date AND billing_date(g.hour) < $2::date
           GROUP BY g.cluster, ns.pool, billing_date(g.hour), g.team, g.namespace, g.gpu_model, g.kind"#,
        from,
        to,
        unverified_kinds
    )
    .fetch_all(pool)
    .await
}

/// Puts a node into a node pool (`None`: out of any), keeping its other settings; audited.
pub async fn set_node_pool(
    conn: &mut PgConnection,
    cluster: &ClusterName,
    node: &str,
    pool: Option<&str>,
    actor: &str,
) -> Result<(), sqlx::Error> {
    let cluster = cluster.as_str();
    let before = sqlx::query_scalar!("SELECT pool FROM node_settings WHERE cluster = $1 AND node = $2", cluster, node)
        .fetch_optional(&mut *conn)
        .await?
        .flatten();
    sqlx::query!(
        r#"INSERT INTO node_settings (cluster, node, pool, updated_by) VALUES ($1, $2, $3, $4)
           ON CONFLICT (cluster, node) DO UPDATE SET pool = excluded.pool, updated_by = excluded.updated_by,
               updated_at = now()"#,
        cluster,
        node,
        pool,
        actor
    )
    .execute(&mut *conn)
    .await?;
    crate::db::audit::record(
        conn,
        actor,
        "node.pool",
        &format!("node:{cluster}/{node}"),
        before.map(serde_json::Value::from),
        pool.map(serde_json::Value::from),
    )
    .await
}
