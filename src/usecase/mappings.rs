//! Namespace → team mappings: the ones a caller may see, adding one, and importing a CMDB export (all rows or
//! none) — each change re-checks the budgets it touches.

use chrono::NaiveDate;
use serde::Deserialize;

use super::mapping_import::{self, ImportError, ImportReport, RowAction};
use super::teams::json;
use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::db::{self, audit, teams::Mapping};
use crate::validate::mapping_file;
use crate::validate::{self, ClusterName, Invalid, Namespace, TeamId};

/// The mappings of the teams `scope` may see.
pub async fn mappings(s: &Services, scope: &Scope) -> Result<Vec<Mapping>, Error> {
    Ok(db::teams::list_mappings(&s.pool, scope).await?)
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MappingInput {
    /// Omit for every cluster.
    pub cluster: Option<String>,
    pub namespace: String,
    pub team_id: String,
    pub valid_from: NaiveDate,
}

/// Maps a namespace to a team from a date (finance); stored usage is re-attributed. Audited.
pub async fn create_mapping(s: &Services, by: &Writer, input: &MappingInput) -> Result<Mapping, Error> {
    let actor = &by.actor();
    let mut tx = s.pool.begin().await?;
    let m = insert_checked(&mut tx, input, actor, "").await?;
    tx.commit().await?;
    crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(m.valid_from)).await;
    Ok(m)
}

/// Checks and inserts one mapping inside the caller's transaction; `at` prefixes field names (CSV rows).
async fn insert_checked(
    tx: &mut sqlx::PgConnection,
    input: &MappingInput,
    actor: &str,
    at: &str,
) -> Result<Mapping, Error> {
    let Checked { cluster, ns, team, valid_from } = check(tx, input, at).await?;
    let unknown_team = || Error::invalid(format!("{at}team_id"), format!("unknown team `{team}`"));
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let m = db::teams::insert_mapping(&mut *tx, cluster.as_ref(), &ns, &team, valid_from, actor)
        .await
        .map_err(|e| if db::refuses_value(&e) { unknown_team() } else { Error::from(e) })?
        .ok_or_else(|| Error::Conflict {
            field: Some(format!("{at}valid_from")),
            message: format!("namespace {ns} already has a mapping valid from {valid_from}"),
        })?;
    audit::record(&mut *tx, actor, "mapping.create", &format!("namespace:{ns}"), None, json(&m)).await?;
    Ok(m)
}

/// A mapping's fields as checked.
struct Checked {
    cluster: Option<ClusterName>,
    ns: Namespace,
    team: TeamId,
    valid_from: NaiveDate,
}

/// Checks a mapping's fields and that its team exists; `at` prefixes field names (CSV rows).
async fn check(tx: &mut sqlx::PgConnection, input: &MappingInput, at: &str) -> Result<Checked, Error> {
    let named = |e: Invalid| Error::invalid(format!("{at}{}", e.field), e.message);
    let ns = Namespace::parse("namespace", &input.namespace).map_err(named)?;
    let team = TeamId::parse("team_id", &input.team_id).map_err(named)?;
    let valid_from = validate::date("valid_from", input.valid_from).map_err(named)?;
    let cluster = match input.cluster.as_deref() {
        Some(c) => Some(ClusterName::parse("cluster", c).map_err(named)?),
        None => None,
    };
    if db::teams::get(&mut *tx, &team).await?.is_none() {
        return Err(Error::invalid(format!("{at}team_id"), format!("unknown team `{team}`")));
    }
    Ok(Checked { cluster, ns, team, valid_from })
}

/// Maps a namespace to a team from a date, or points the stored mapping of that cluster, namespace and day at
/// another team (finance; the portal's form): what it did, and the mapping as stored. Audited as the import
/// audits (`mapping.create`, `mapping.update`); an equal mapping writes nothing.
pub async fn put_mapping(s: &Services, by: &Writer, input: &MappingInput) -> Result<(RowAction, Mapping), Error> {
    let actor = &by.actor();
    let mut tx = s.pool.begin().await?;
    let c = check(&mut tx, input, "").await?;
    let (action, m) = match db::teams::mapping_at(&mut tx, c.cluster.as_ref(), &c.ns, c.valid_from).await? {
        Some(m) if m.team_id == c.team.as_str() => (RowAction::Unchanged, m),
        Some(before) => {
            let m = db::teams::update_mapping_team(&mut tx, before.id, &c.team, actor).await?;
            let target = format!("namespace:{}", c.ns);
            audit::record(&mut tx, actor, "mapping.update", &target, json(&before), json(&m)).await?;
            (RowAction::Update, m)
        }
        None => (RowAction::Insert, insert_checked(&mut tx, input, actor, "").await?),
    };
    tx.commit().await?;
    if action != RowAction::Unchanged {
        crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(m.valid_from)).await;
    }
    Ok((action, m))
}

/// What importing a file would do, before anything is written: each good row's action (a dry run) and the
/// problems of the bad ones. Only a file without problems can be applied, with [`apply_previewed`].
pub struct Preview {
    /// The dry run of the good rows (`None` when no row is good).
    pub report: Option<ImportReport>,
    /// Every problem of the file, as `row N: field` (N the line) or `body`.
    pub errors: Vec<Invalid>,
    /// What the dry run decided, as [`plan_digest`] (the apply must come to the same).
    pub plan: String,
}

/// The digest of what an import decides: each row's action and team before, and how many teams it creates. A
/// preview and its apply agree exactly when their digests do.
pub fn plan_digest(report: &ImportReport) -> String {
    let decided = serde_json::json!({ "rows": report.rows, "teams_created": report.teams_created });
    crate::digest::sha256_hex(decided.to_string().as_bytes())
}

/// Previews an import of `bytes` (the same decoding, parsing and decisions as [`import`]); writes nothing.
pub async fn preview(s: &Services, bytes: &[u8]) -> Result<Preview, Error> {
    let text = match mapping_file::decode(bytes) {
        Ok(t) => t,
        Err(e) => return Ok(Preview { report: None, errors: vec![e], plan: String::new() }),
    };
    let (rows, errors) = mapping_file::parse_rows(&text);
    if rows.is_empty() {
        return Ok(Preview { report: None, errors, plan: String::new() });
    }
    let mut tx = s.pool.begin().await?;
    let report = mapping_import::import(&mut tx, &rows, "preview", true).await.map_err(import_error)?;
    tx.rollback().await?;
    let plan = plan_digest(&report);
    Ok(Preview { report: Some(report), errors, plan })
}

/// Imports `bytes` exactly as previewed: when the import would now decide anything else than the preview whose
/// digest is `plan` (the mappings changed meanwhile), nothing is written and it is a conflict on `file`.
pub async fn apply_previewed(s: &Services, by: &Writer, bytes: &[u8], plan: &str) -> Result<ImportReport, Error> {
    let actor = &by.actor();
    import_checked(s, actor, bytes, false, Some(plan)).await
}

fn import_error(e: ImportError) -> Error {
    match e {
        ImportError::Invalid(errors) => Error::Invalid(errors),
        ImportError::Database(e) => Error::from(e),
    }
}

/// Imports a CMDB export (the file's bytes: UTF-8 or GBK/GB18030) by writer `by`: all rows or none; `dry_run`
/// reports what each row would do and writes nothing. A change re-checks the budgets from its earliest day.
pub async fn import(s: &Services, by: &Writer, bytes: &[u8], dry_run: bool) -> Result<ImportReport, Error> {
    let actor = &by.actor();
    import_checked(s, actor, bytes, dry_run, None).await
}

/// [`import`], refused as a conflict when `plan` is given and the import decides otherwise.
async fn import_checked(
    s: &Services,
    actor: &str,
    bytes: &[u8],
    dry_run: bool,
    plan: Option<&str>,
) -> Result<ImportReport, Error> {
    let text = mapping_file::decode(bytes)?;
    let rows = mapping_file::parse(&text).map_err(Error::Invalid)?;
    let mut tx = s.pool.begin().await?;
    let report = mapping_import::import(&mut tx, &rows, actor, dry_run).await.map_err(import_error)?;
    if plan.is_some_and(|p| p != plan_digest(&report)) {
        tx.rollback().await?;
        return Err(Error::Conflict {
            field: Some("file".into()),
            message: "the mappings changed since the preview: nothing was imported; upload the file again".into(),
        });
    }
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
        if let Some(since) = report.rows.iter().filter(|r| r.action != RowAction::Unchanged).map(|r| r.valid_from).min()
        {
            crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(since)).await;
        }
    }
    Ok(report)
}
