//! Queue → team mappings (SPEC §10): a Kueue ClusterQueue or a Volcano queue belongs to a team from a date, kept
//! like namespace mappings (dated, cluster-specific first, audited); a queue's quota rows follow when read.

use chrono::NaiveDate;
use serde::Deserialize;

use super::teams::json;
use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::db::{self, audit, quota::QueueMapping};
use crate::validate::{self, ClusterName, Invalid, QueueName, TeamId};

/// What kind of queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// A Kueue ClusterQueue.
    ClusterQueue,
    /// A Volcano queue.
    VolcanoQueue,
}

impl QueueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            QueueKind::ClusterQueue => "cluster_queue",
            QueueKind::VolcanoQueue => "volcano_queue",
        }
    }
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueMappingInput {
    /// Omit for every cluster.
    pub cluster: Option<String>,
    pub queue_kind: QueueKind,
    /// The ClusterQueue's or the Volcano queue's name.
    pub queue: String,
    pub team_id: String,
    pub valid_from: NaiveDate,
}

/// The queue mappings of the teams `scope` may see.
pub async fn queue_mappings(s: &Services, scope: &Scope) -> Result<Vec<QueueMapping>, Error> {
    let mut conn = s.pool.acquire().await?;
    let all = db::quota::list_mappings(&mut conn).await?;
    Ok(all.into_iter().filter(|m| scope.allows(&m.team_id)).collect())
}

/// Maps a queue to a team from a date (finance). Audited.
pub async fn create_queue_mapping(s: &Services, by: &Writer, input: &QueueMappingInput) -> Result<QueueMapping, Error> {
    let named = |e: Invalid| Error::invalid(e.field, e.message);
    let queue = QueueName::parse("queue", &input.queue).map_err(named)?;
    let team = TeamId::parse("team_id", &input.team_id).map_err(named)?;
    let valid_from = validate::date("valid_from", input.valid_from).map_err(named)?;
    let cluster = input.cluster.as_deref().map(|c| ClusterName::parse("cluster", c)).transpose().map_err(named)?;
    let actor = by.actor();
    let mut tx = s.pool.begin().await?;
    if db::teams::get(&mut tx, &team).await?.is_none() {
        return Err(Error::invalid("team_id", format!("unknown team `{team}`")));
    }
    let new = db::quota::NewQueueMapping {
        cluster: cluster.as_ref().map(ClusterName::as_str),
        queue_kind: input.queue_kind.as_str(),
        queue: queue.as_str(),
        team_id: team.as_str(),
        valid_from,
        created_by: &actor,
    };
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let m = db::quota::insert_mapping(&mut tx, &new)
        .await
        .map_err(|e| {
            if db::refuses_value(&e) { Error::invalid("cluster", "unknown cluster or team") } else { Error::from(e) }
        })?
        .ok_or_else(|| Error::Conflict {
            field: Some("valid_from".into()),
            message: format!("queue {queue} is already mapped from {valid_from}"),
        })?;
    let subject = format!("queue:{}/{queue}", input.queue_kind.as_str());
    audit::record(&mut tx, &actor, "queue_mapping.create", &subject, None, json(&m)).await?;
    tx.commit().await?;
    Ok(m)
}
