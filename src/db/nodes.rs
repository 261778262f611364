//! Per-node configuration (`node_settings`): cards, replicas, model and sharing where nothing on the node says.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use crate::metering::{NodeSettings, SharingSetting};
use crate::validate::ClusterName;

/// One stored node setting, as listed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StoredNodeSettings {
    pub cluster: String,
    pub node: String,
    pub cards: Option<i32>,
    pub replicas: Option<i32>,
    pub gpu_model: Option<String>,
    pub sharing: Option<String>,
    pub updated_by: String,
    pub updated_at: DateTime<Utc>,
}

impl StoredNodeSettings {
    pub fn settings(&self) -> NodeSettings {
        NodeSettings {
            cards: self.cards.and_then(|c| u32::try_from(c).ok()),
            replicas: self.replicas.and_then(|r| u32::try_from(r).ok()),
            gpu_model: self.gpu_model.clone(),
            sharing: self.sharing.as_deref().and_then(|s| s.parse::<SharingSetting>().ok()),
        }
    }
}

pub async fn list(conn: &mut PgConnection, cluster: Option<&str>) -> Result<Vec<StoredNodeSettings>, sqlx::Error> {
    sqlx::query_as!(
        StoredNodeSettings,
        "SELECT cluster, node, cards, replicas, gpu_model, sharing, updated_by, updated_at FROM node_settings
         WHERE $1::text IS NULL OR cluster = $1 ORDER BY cluster, node",
        cluster
    )
    .fetch_all(conn)
    .await
}

/// The settings of a cluster's nodes, for its metering.
pub async fn for_cluster(
    conn: &mut PgConnection,
    cluster: &str,
) -> Result<BTreeMap<String, NodeSettings>, sqlx::Error> {
    Ok(list(conn, Some(cluster)).await?.into_iter().map(|s| (s.node.clone(), s.settings())).collect())
}

/// Sets (or with every field empty, removes) one node's settings; audited in the same transaction.
pub async fn set(
    conn: &mut PgConnection,
    cluster: &ClusterName,
    node: &str,
    settings: &NodeSettings,
    actor: &str,
) -> Result<(), sqlx::Error> {
    let before = list(conn, Some(cluster.as_str())).await?.into_iter().find(|s| s.node == node);
    let empty = *settings == NodeSettings::default();
    if empty {
        sqlx::query!("DELETE FROM node_settings WHERE cluster = $1 AND node = $2", cluster.as_str(), node)
            .execute(&mut *conn)
            .await?;
    } else {
        sqlx::query!(
            "INSERT INTO node_settings (cluster, node, cards, replicas, gpu_model, sharing, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (cluster, node) DO UPDATE SET cards = EXCLUDED.cards, replicas = EXCLUDED.replicas,
                 gpu_model = EXCLUDED.gpu_model, sharing = EXCLUDED.sharing, updated_by = EXCLUDED.updated_by,
                 updated_at = now()",
            cluster.as_str(),
            node,
            settings.cards.map(|c| c as i32),
            settings.replicas.map(|r| r as i32),
            settings.gpu_model.as_deref(),
            settings.sharing.map(SharingSetting::as_str),
            actor
        )
        .execute(&mut *conn)
        .await?;
    }
    let json = |s: &NodeSettings| serde_json::to_value(s).ok();
    crate::db::audit::record(
        conn,
        actor,
        "node.settings",
        &format!("node:{cluster}/{node}"),
        before.map(|b| b.settings()).as_ref().and_then(json),
        (!empty).then(|| json(settings)).flatten(),
    )
    .await
}

/// A node's usage in one hour, per team, namespace, model, kind and fraction (what a change of its settings
/// re-meters).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsageHour {
    pub hour: DateTime<Utc>,
    pub team: String,
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub fraction: f64,
    pub gpu_seconds: f64,
}

/// Node `node` of `cluster`: its stored usage over `[from, to)`.
pub async fn usage(
    pool: &sqlx::PgPool,
    cluster: &ClusterName,
    node: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<NodeUsageHour>, sqlx::Error> {
    sqlx::query_as!(
        NodeUsageHour,
        r#"SELECT hour, coalesce(team, 'unassigned') AS "team!", namespace, gpu_model, kind, fraction,
                  sum(gpu_seconds) AS "gpu_seconds!"
           FROM gpu_usage_hourly
           WHERE cluster = $1 AND node = $2 AND hour >= $3 AND hour < $4
           GROUP BY hour, team, namespace, gpu_model, kind, fraction
           ORDER BY hour, team, namespace, gpu_model, kind"#,
        cluster.as_str(),
        node,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// A node's capacity in one hour.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCapacityHour {
    pub hour: DateTime<Utc>,
    pub gpu_model: String,
    pub cards: f64,
    pub card_seconds: f64,
    pub offered_card_seconds: f64,
}

/// Node `node` of `cluster`: its stored capacity over `[from, to)`.
pub async fn capacity(
    pool: &sqlx::PgPool,
    cluster: &ClusterName,
    node: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<NodeCapacityHour>, sqlx::Error> {
    sqlx::query_as!(
        NodeCapacityHour,
        r#"SELECT hour, gpu_model, cards, card_seconds, coalesce(offered_card_seconds, card_seconds) AS "offered_card_seconds!"
           FROM node_capacity_hourly
           WHERE cluster = $1 AND node = $2 AND hour >= $3 AND hour < $4 ORDER BY hour"#,
        cluster.as_str(),
        node,
        from,
        to
    )
    .fetch_all(pool)
    .await
}

/// A node a month's data marks: whose model nothing names, or whose cards could not be counted (`kinds`), with
/// the hours so marked and the card-hours held and offered on it in `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkedNode {
    pub cluster: String,
    pub node: String,
    pub kind: String,
    pub hours: i64,
    pub gpu_model: Option<String>,
    pub held_card_seconds: f64,
    pub capacity_card_seconds: f64,
}

pub async fn marked(
    pool: &sqlx::PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    kinds: &[String],
) -> Result<Vec<MarkedNode>, sqlx::Error> {
    sqlx::query_as!(
        MarkedNode,
        r#"SELECT a.cluster, a.subject AS node, a.kind, count(DISTINCT a.hour) AS "hours!",
                  (SELECT c.gpu_model FROM node_capacity_hourly c
                   WHERE c.cluster = a.cluster AND c.node = a.subject AND c.hour >= $1 AND c.hour < $2
                   ORDER BY c.hour DESC LIMIT 1) AS gpu_model,
                  coalesce((SELECT sum(u.gpu_seconds) FROM gpu_usage_hourly u
                            WHERE u.cluster = a.cluster AND u.node = a.subject AND u.hour >= $1 AND u.hour < $2), 0)
                      AS "held_card_seconds!",
                  coalesce((SELECT sum(c.card_seconds) FROM node_capacity_hourly c
                            WHERE c.cluster = a.cluster AND c.node = a.subject AND c.hour >= $1 AND c.hour < $2), 0)
                      AS "capacity_card_seconds!"
           FROM ingest_anomalies a
           WHERE a.hour >= date_trunc('hour', $1::timestamptz) AND a.hour < $2 AND a.kind = ANY($3)
           GROUP BY a.cluster, a.subject, a.kind ORDER BY a.cluster, a.subject, a.kind"#,
        from,
        to,
        kinds
    )
    .fetch_all(pool)
    .await
}
