//! Per-node configuration (`node_settings`): cards, replicas, model and sharing where nothing on the node says.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use crate::metering::{NodeSettings, SharingSetting};

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
    cluster: &str,
    node: &str,
    settings: &NodeSettings,
    actor: &str,
) -> Result<(), sqlx::Error> {
    let before = list(conn, Some(cluster)).await?.into_iter().find(|s| s.node == node);
    let empty = *settings == NodeSettings::default();
    if empty {
        sqlx::query!("DELETE FROM node_settings WHERE cluster = $1 AND node = $2", cluster, node)
            .execute(&mut *conn)
            .await?;
    } else {
        sqlx::query!(
            "INSERT INTO node_settings (cluster, node, cards, replicas, gpu_model, sharing, updated_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (cluster, node) DO UPDATE SET cards = EXCLUDED.cards, replicas = EXCLUDED.replicas,
                 gpu_model = EXCLUDED.gpu_model, sharing = EXCLUDED.sharing, updated_by = EXCLUDED.updated_by,
                 updated_at = now()",
            cluster,
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
