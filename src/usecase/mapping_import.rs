//! CMDB imports of namespace → team mappings (SPEC §4), for the API, the pages and the command line alike, once
//! the file is read and checked ([`crate::validate::mapping_file`]): idempotent — a row equal to the stored mapping
//! is `unchanged` (no write, no audit entry), a row naming another team for a stored cluster, namespace and day is
//! an `update`, a new one an `insert`. A dry run reports the same per row and writes nothing. A file with finance
//! code columns sets each row's team's codes from its day the same way (SPEC §11).
use chrono::NaiveDate;
use serde::Serialize;
use sqlx::PgConnection;

use crate::db::{self, audit, teams::Mapping, teams::Team};
use crate::validate::Invalid;
use crate::validate::mapping_file::{ImportRow, same_key};

/// What an import does (or, dry, would do) with a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RowAction {
    /// A new mapping.
    Insert,
    /// The stored mapping of this cluster, namespace and day pointed at another team.
    Update,
    /// Equal to what is stored (or to an earlier row of the file): nothing written.
    Unchanged,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RowOutcome {
    /// The row's line in the file (the header is line 1).
    pub line: usize,
    pub action: RowAction,
    pub cluster: Option<String>,
    pub namespace: String,
    pub team: String,
    pub valid_from: NaiveDate,
    /// An update's team before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_team: Option<String>,
    /// What the row's finance codes do to its team's version of `valid_from` (absent: the row has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finance_codes: Option<RowAction>,
    /// The row's codes (the preview page prints them; the API's answer is the action).
    #[serde(skip)]
    pub codes: Option<crate::billing::FinanceCodes>,
}

/// What an import did (or, dry, would do); the API answers it as `api::views::ImportReport`.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// Nothing was written.
    pub dry_run: bool,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Teams the file names that did not exist (created with the row's `team_name` and `owner`).
    pub teams_created: usize,
    /// Versions of teams' finance codes inserted or changed by the file's code columns.
    pub finance_codes_set: usize,
    /// One per row, in file order.
    pub rows: Vec<RowOutcome>,
    /// The mappings written (inserted or updated), as stored; empty on a dry run.
    pub mappings: Vec<Mapping>,
}

impl ImportReport {
    /// Whether the import wrote anything.
    pub fn changed(&self) -> bool {
        !self.dry_run && (self.inserted + self.updated + self.teams_created + self.finance_codes_set) > 0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Rows (or the file) refused: every problem, by `row N: field`.
    #[error("{} problem(s) in the file", .0.len())]
    Invalid(Vec<Invalid>),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

/// Imports `rows` inside the caller's transaction (all or nothing: the caller commits, or rolls back on an error);
/// `dry_run` decides and reports the same, writing nothing. Writes are audited as `team.put`, `mapping.create` and
/// `mapping.update`; unchanged rows write nothing at all.
pub(super) async fn import(
    tx: &mut PgConnection,
    rows: &[ImportRow],
    actor: &str,
    dry_run: bool,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport {
        dry_run,
        inserted: 0,
        updated: 0,
        unchanged: 0,
        teams_created: 0,
        finance_codes_set: 0,
        rows: Vec::new(),
        mappings: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut new_teams: Vec<&str> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if db::teams::get(&mut *tx, &row.team).await?.is_none() && !new_teams.contains(&row.team.as_str()) {
            let name = row.team_name.clone().unwrap_or_else(|| row.team.to_string());
            let team = Team { id: row.team.to_string(), name, owner: row.owner.clone() };
            new_teams.push(row.team.as_str());
            // a concurrent import may create it first: then it is not ours to count or audit
            if !dry_run {
                if db::teams::create(&mut *tx, &team).await? {
                    audit::record(&mut *tx, actor, "team.put", &format!("team:{}", team.id), None, json(&team)).await?;
                    report.teams_created += 1;
                }
            } else {
                report.teams_created += 1;
            }
        }
        let earlier = rows[..i].iter().any(|r| same_key(r, row));
        let stored = db::teams::mapping_at(&mut *tx, row.cluster.as_ref(), &row.namespace, row.valid_from).await?;
        let (action, previous_team) = match &stored {
            _ if earlier => (RowAction::Unchanged, None),
            None => (RowAction::Insert, None),
            Some(m) if m.team_id == row.team.as_str() => (RowAction::Unchanged, None),
            Some(m) => (RowAction::Update, Some(m.team_id.clone())),
        };
        if !dry_run {
            let target = format!("namespace:{}", row.namespace);
            match (action, &stored) {
                (RowAction::Insert, _) => {
                    let m = db::teams::insert_mapping(
                        &mut *tx,
                        row.cluster.as_ref(),
                        &row.namespace,
                        &row.team,
                        row.valid_from,
                        actor,
                    )
                    .await?;
                    let Some(m) = m else {
                        // mapped concurrently between our read and our insert
                        errors.push(Invalid::new(
                            format!("row {}: valid_from", row.line),
                            format!(
                                "namespace {} was mapped from {} concurrently; import again",
                                row.namespace, row.valid_from
                            ),
                        ));
                        continue;
                    };
                    audit::record(&mut *tx, actor, "mapping.create", &target, None, json(&m)).await?;
                    report.mappings.push(m);
                }
                (RowAction::Update, Some(before)) => {
                    let m = db::teams::update_mapping_team(&mut *tx, before.id, &row.team, actor).await?;
                    audit::record(&mut *tx, actor, "mapping.update", &target, json(before), json(&m)).await?;
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
        // the row's finance codes: its team's version of the row's day (an earlier row of the file set it already)
        let codes_action = match &row.codes {
            None => None,
            Some(_)
                if rows[..i]
                    .iter()
                    .any(|r| r.team == row.team && r.valid_from == row.valid_from && r.codes.is_some()) =>
            {
                Some(RowAction::Unchanged)
            }
            Some(codes) => {
                let stored = db::finance_codes::get(&mut *tx, row.team.as_str(), row.valid_from).await?;
                let action = match stored {
                    None => RowAction::Insert,
                    Some(v) if v.codes() == *codes => RowAction::Unchanged,
                    Some(_) => RowAction::Update,
                };
                if action != RowAction::Unchanged {
                    report.finance_codes_set += 1;
                    if !dry_run {
                        let (team, day) = (row.team.as_str(), row.valid_from);
                        super::finance_codes::put_checked(&mut *tx, actor, team, day, codes).await?;
                    }
                }
                Some(action)
            }
        };
        report.rows.push(RowOutcome {
            line: row.line,
            action,
            cluster: row.cluster.as_ref().map(ToString::to_string),
            namespace: row.namespace.to_string(),
            team: row.team.to_string(),
            valid_from: row.valid_from,
            previous_team,
            finance_codes: codes_action,
            codes: row.codes.clone(),
        });
    }
    if !errors.is_empty() {
        return Err(ImportError::Invalid(errors));
    }
    Ok(report)
}

fn json<T: Serialize>(v: &T) -> Option<serde_json::Value> {
    serde_json::to_value(v).ok().filter(|v| !v.is_null())
}
