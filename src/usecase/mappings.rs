//! Namespace → team mappings: the ones a caller may see, adding one, and importing a CMDB export (all rows or
//! none) — each change re-checks the budgets it touches.

use chrono::NaiveDate;
use serde::Deserialize;

use super::teams::json;
use super::{Error, Services};
use crate::access::Scope;
use crate::db::{self, audit, teams::Mapping};
use crate::mappings::{self, ImportError, ImportReport, RowAction};
use crate::validate::{self, Invalid, TeamId};

/// The mappings of the teams `scope` may see.
pub async fn mappings(s: &Services, scope: &Scope) -> Result<Vec<Mapping>, Error> {
    Ok(db::teams::list_mappings(&s.pool, scope).await?)
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct MappingInput {
    /// Omit for every cluster.
    pub cluster: Option<String>,
    pub namespace: String,
    pub team_id: String,
    pub valid_from: NaiveDate,
}

/// Maps a namespace to a team from a date (finance); stored usage is re-attributed. Audited.
pub async fn create_mapping(s: &Services, actor: &str, input: &MappingInput) -> Result<Mapping, Error> {
    let mut tx = s.pool.begin().await?;
    let m = insert_checked(&mut tx, input, actor, "").await?;
    tx.commit().await?;
    crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(m.valid_from)).await;
    Ok(m)
}

/// Checks and inserts one mapping inside the caller's transaction; `at` prefixes field names (CSV rows).
async fn insert_checked(
    tx: &mut sqlx::PgConnection,
    input: &MappingInput,
    actor: &str,
    at: &str,
) -> Result<Mapping, Error> {
    let named = |e: Invalid| Error::invalid(format!("{at}{}", e.field), e.message);
    let ns = validate::namespace("namespace", &input.namespace).map_err(named)?;
    let team = TeamId::parse("team_id", &input.team_id).map_err(named)?;
    let valid_from = validate::date("valid_from", input.valid_from).map_err(named)?;
    let cluster = match input.cluster.as_deref() {
        Some(c) => Some(validate::cluster("cluster", c).map_err(named)?),
        None => None,
    };
    let unknown_team = || Error::invalid(format!("{at}team_id"), format!("unknown team `{team}`"));
    if db::teams::get(&mut *tx, team.as_str()).await?.is_none() {
        return Err(unknown_team());
    }
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let m = db::teams::insert_mapping(&mut *tx, cluster.as_deref(), &ns, team.as_str(), valid_from, actor)
        .await
        .map_err(|e| if db::refuses_value(&e) { unknown_team() } else { Error::Database(e) })?
        .ok_or_else(|| Error::Conflict {
            field: Some(format!("{at}valid_from")),
            message: format!("namespace {ns} already has a mapping valid from {valid_from}"),
        })?;
    audit::record(&mut *tx, actor, "mapping.create", &format!("namespace:{ns}"), None, json(&m)).await?;
    Ok(m)
}

/// Imports a CMDB export (the file's bytes: UTF-8 or GBK/GB18030) by `actor`: all rows or none; `dry_run`
/// reports what each row would do and writes nothing. A change re-checks the budgets from its earliest day.
pub async fn import(s: &Services, actor: &str, bytes: &[u8], dry_run: bool) -> Result<ImportReport, Error> {
    let text = mappings::decode(bytes)?;
    let rows = mappings::parse(&text).map_err(Error::Invalid)?;
    let mut tx = s.pool.begin().await?;
    let report = mappings::import(&mut tx, &rows, actor, dry_run).await.map_err(|e| match e {
        ImportError::Invalid(errors) => Error::Invalid(errors),
        ImportError::Database(e) => Error::Database(e),
    })?;
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
        if let Some(since) = report.rows.iter().filter(|r| r.action != RowAction::Unchanged).map(|r| r.valid_from).min()
        {
            crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(since)).await;
        }
    }
    Ok(report)
}
