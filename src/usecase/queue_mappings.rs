//! Queue → team mappings (SPEC §10): a Kueue ClusterQueue or a Volcano queue belongs to a team from a date, kept
//! like namespace mappings (dated, cluster-specific first, audited); a queue's quota rows follow when read. Also
//! their CSV import (all rows or none), previewed and applied as the namespace mappings' CMDB import is.

use chrono::NaiveDate;
use serde::Deserialize;

use super::queue_mapping_import::{self, QueueImportReport};
use super::teams::json;
use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::db::{self, audit, quota::QueueMapping};
use crate::validate::queue_mapping_file::{self, line_of};
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

/// What importing a file would do, before anything is written: each good row's action (a dry run) and every
/// problem of the file. Only a file without problems can be applied, with [`apply_previewed`].
pub struct QueuePreview {
    /// The dry run of the good rows (`None` when no row is good).
    pub report: Option<QueueImportReport>,
    /// Every problem of the file, as `row N: field` (N the line) or `body`, by line.
    pub errors: Vec<Invalid>,
    /// What the dry run decided, as [`plan_digest`] (the apply must come to the same).
    pub plan: String,
}

/// The digest of what an import decides: each row's action and team before. A preview and its apply agree
/// exactly when their digests do.
pub fn plan_digest(report: &QueueImportReport) -> String {
    let decided = serde_json::json!({ "rows": report.rows });
    crate::digest::sha256_hex(decided.to_string().as_bytes())
}

/// Decodes, parses and decides `bytes` inside `tx` (writing unless `dry_run`): the report of the good rows and
/// every problem — the file's own and its rows' (unknown teams or clusters) — sorted by line, so that a file is
/// refused with all of them at once.
async fn decide(
    tx: &mut sqlx::PgConnection,
    actor: &str,
    bytes: &[u8],
    dry_run: bool,
) -> Result<(Option<QueueImportReport>, Vec<Invalid>), Error> {
    let text = match queue_mapping_file::decode(bytes) {
        Ok(t) => t,
        Err(e) => return Ok((None, vec![e])),
    };
    let (rows, mut errors) = queue_mapping_file::parse_rows(&text);
    if rows.is_empty() {
        return Ok((None, errors));
    }
    // a refused file writes nothing: the rows are only decided then
    let write = !dry_run && errors.is_empty();
    let (report, more) = queue_mapping_import::import(tx, &rows, actor, !write).await?;
    errors.extend(more);
    errors.sort_by_key(|e| line_of(&e.field));
    Ok((Some(QueueImportReport { dry_run, ..report }), errors))
}

/// Previews an import of `bytes` (the same decoding, parsing and decisions as [`import`]); writes nothing.
pub async fn preview(s: &Services, bytes: &[u8]) -> Result<QueuePreview, Error> {
    let mut tx = s.pool.begin().await?;
    let (report, errors) = decide(&mut tx, "preview", bytes, true).await?;
    tx.rollback().await?;
    let plan = report.as_ref().map(plan_digest).unwrap_or_default();
    Ok(QueuePreview { report, errors, plan })
}

/// Imports a file of queue mappings (its bytes: UTF-8 or GBK/GB18030) by writer `by`: all rows or none, every
/// problem of the file refused at once; `dry_run` reports what each row would do and writes nothing.
pub async fn import(s: &Services, by: &Writer, bytes: &[u8], dry_run: bool) -> Result<QueueImportReport, Error> {
    import_checked(s, &by.actor(), bytes, dry_run, None).await
}

/// Imports `bytes` exactly as previewed: when the import would now decide anything else than the preview whose
/// digest is `plan` (the mappings changed meanwhile), nothing is written and it is a conflict on `file`.
pub async fn apply_previewed(s: &Services, by: &Writer, bytes: &[u8], plan: &str) -> Result<QueueImportReport, Error> {
    import_checked(s, &by.actor(), bytes, false, Some(plan)).await
}

/// [`import`], refused as a conflict when `plan` is given and the import decides otherwise.
async fn import_checked(
    s: &Services,
    actor: &str,
    bytes: &[u8],
    dry_run: bool,
    plan: Option<&str>,
) -> Result<QueueImportReport, Error> {
    let mut tx = s.pool.begin().await?;
    let (report, errors) = decide(&mut tx, actor, bytes, dry_run).await?;
    let report = match report {
        Some(r) if errors.is_empty() => r,
        _ => {
            tx.rollback().await?;
            return Err(Error::Invalid(errors));
        }
    };
    if plan.is_some_and(|p| p != plan_digest(&report)) {
        tx.rollback().await?;
        return Err(Error::Conflict {
            field: Some("file".into()),
            // the namespace import's words: the pages translate them
            message: "the mappings changed since the preview: nothing was imported; upload the file again".into(),
        });
    }
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok(report)
}
