//! Imports of queue → team mappings (SPEC §10, issue 29), for the API, the page and the command line alike, once
//! the file is read and checked ([`crate::validate::queue_mapping_file`]); decided as a CMDB import of namespace
//! mappings is ([`super::mapping_import`]): a row equal to the stored mapping is `unchanged` (no write, no audit
//! entry), a row naming another team for a stored cluster, queue and day is an `update`, a new one an `insert`.
//! Unlike a namespace import it creates no team: a row naming an unknown team (or cluster) is a problem of its row.
use chrono::NaiveDate;
use serde::Serialize;
use sqlx::PgConnection;

use super::mapping_import::RowAction;
use super::teams::json;
use crate::db::{self, audit, quota::QueueMapping};
use crate::validate::queue_mapping_file::{QueueImportRow, same_key};
use crate::validate::{ClusterName, Invalid};

/// What an import does (or, dry, would do) with a row.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QueueRowOutcome {
    /// The row's line in the file (the header is line 1).
    pub line: usize,
    pub action: RowAction,
    /// `null`: every cluster.
    pub cluster: Option<String>,
    /// `cluster_queue` (Kueue) or `volcano_queue`.
    pub queue_kind: String,
    pub queue: String,
    pub team: String,
    pub valid_from: NaiveDate,
    /// An update's team before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_team: Option<String>,
}

/// What an import did (or, dry, would do); the API answers it as `api::quotas::QueueImportReport`.
#[derive(Debug, Clone, Serialize)]
pub struct QueueImportReport {
    /// Nothing was written.
    pub dry_run: bool,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// One per row decided, in file order.
    pub rows: Vec<QueueRowOutcome>,
    /// The mappings written (inserted or updated), as stored; empty on a dry run.
    pub mappings: Vec<QueueMapping>,
}

impl QueueImportReport {
    fn new(dry_run: bool) -> Self {
        Self { dry_run, inserted: 0, updated: 0, unchanged: 0, rows: Vec::new(), mappings: Vec::new() }
    }

    /// Whether the import wrote anything.
    pub fn changed(&self) -> bool {
        !self.dry_run && self.inserted + self.updated > 0
    }
}

/// Decides every row inside the caller's transaction and, unless `dry_run` or a row has a problem, writes them
/// (audited as `queue_mapping.create` and `queue_mapping.update`, as the single `POST /queue-mappings` audits);
/// the caller commits only when the problems are none, so the import is all rows or none. Returns what each row
/// does and the problems of the rows the file's checks could not see (an unknown team or cluster, a mapping made
/// concurrently), as `row N: field`.
pub(super) async fn import(
    tx: &mut PgConnection,
    rows: &[QueueImportRow],
    actor: &str,
    dry_run: bool,
) -> Result<(QueueImportReport, Vec<Invalid>), sqlx::Error> {
    let mut report = QueueImportReport::new(dry_run);
    let mut errors = Vec::new();
    // each team and cluster looked up once, however many rows name it
    let mut teams: Vec<(String, bool)> = Vec::new();
    let mut clusters: Vec<(String, bool)> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let known_team = match teams.iter().find(|(t, _)| t == row.team.as_str()) {
            Some((_, known)) => *known,
            None => {
                let known = db::teams::get(&mut *tx, &row.team).await?.is_some();
                teams.push((row.team.to_string(), known));
                known
            }
        };
        let known_cluster = match row.cluster.as_ref().map(ClusterName::as_str) {
            None => true,
            Some(c) => match clusters.iter().find(|(k, _)| k == c) {
                Some((_, known)) => *known,
                None => {
                    let known = db::quota::mapping_cluster_known(&mut *tx, c).await?;
                    clusters.push((c.to_string(), known));
                    known
                }
            },
        };
        if !known_team {
            // a queue mapping names a team, it does not make one (a namespace import may: its file has names)
            errors.push(Invalid::new(format!("row {}: team", row.line), format!("unknown team `{}`", row.team)));
        }
        if let (false, Some(c)) = (known_cluster, &row.cluster) {
            errors.push(Invalid::new(
                format!("row {}: cluster", row.line),
                format!("unknown cluster `{c}` (leave it blank for every cluster)"),
            ));
        }
        if !(known_team && known_cluster) {
            continue;
        }
        let cluster = row.cluster.as_ref().map(ClusterName::as_str);
        let earlier = rows[..i].iter().any(|r| same_key(r, row));
        let stored =
            db::quota::mapping_at(&mut *tx, cluster, row.queue_kind, row.queue.as_str(), row.valid_from).await?;
        let (action, previous_team) = match &stored {
            _ if earlier => (RowAction::Unchanged, None),
            None => (RowAction::Insert, None),
            Some(m) if m.team_id == row.team.as_str() => (RowAction::Unchanged, None),
            Some(m) => (RowAction::Update, Some(m.team_id.clone())),
        };
        // once a row is refused nothing will be committed: the rest are only decided, for the report
        if !dry_run && errors.is_empty() {
            let subject = format!("queue:{}/{}", row.queue_kind, row.queue);
            match (action, &stored) {
                (RowAction::Insert, _) => {
                    let new = db::quota::NewQueueMapping {
                        cluster,
                        queue_kind: row.queue_kind,
                        queue: row.queue.as_str(),
                        team_id: row.team.as_str(),
                        valid_from: row.valid_from,
                        created_by: actor,
                    };
                    let Some(m) = db::quota::insert_mapping(&mut *tx, &new).await? else {
                        // mapped concurrently between our read and our insert
                        errors.push(Invalid::new(
                            format!("row {}: valid_from", row.line),
                            format!(
                                "queue {} was mapped from {} concurrently; import again",
                                row.queue, row.valid_from
                            ),
                        ));
                        continue;
                    };
                    audit::record(&mut *tx, actor, "queue_mapping.create", &subject, None, json(&m)).await?;
                    report.mappings.push(m);
                }
                (RowAction::Update, Some(before)) => {
                    let m = db::quota::update_mapping_team(&mut *tx, before.id, row.team.as_str(), actor).await?;
                    audit::record(&mut *tx, actor, "queue_mapping.update", &subject, json(before), json(&m)).await?;
                    report.mappings.push(m);
                }
                _ => {}
            }
        }
        match action {
            RowAction::Insert => report.inserted += 1,
            RowAction::Update => report.updated += 1,
            RowAction::Unchanged => report.unchanged += 1,
        }
        report.rows.push(QueueRowOutcome {
            line: row.line,
            action,
            cluster: cluster.map(str::to_string),
            queue_kind: row.queue_kind.to_string(),
            queue: row.queue.to_string(),
            team: row.team.to_string(),
            valid_from: row.valid_from,
            previous_team,
        });
    }
    Ok((report, errors))
}
