//! Teams' finance codes (SPEC §11): the versions a caller may see, and a version put by finance — from the API, the
//! teams admin page and the CMDB import alike. Codes move no money: a version dated into a closed month changes
//! nothing frozen (the closed statement keeps the codes it was closed with) and restates nothing.

use chrono::NaiveDate;
use serde::Deserialize;
use sqlx::PgConnection;

use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::billing::{FinanceCodeBook, FinanceCodes};
use crate::db::audit::{self, Change};
use crate::db::{self, finance_codes::Row};
use crate::validate::{self, TeamId};

/// A version of a team's codes as sent: blank or absent codes are none; all three none clears the team's codes
/// from `valid_from`.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinanceCodesInput {
    /// The first day (billing time zone) the codes hold, `YYYY-MM-DD`.
    #[schema(example = "2026-12-01")]
    pub valid_from: String,
    #[schema(example = "CC-1001")]
    pub cost_centre: Option<String>,
    #[schema(example = "6602.01")]
    pub gl_account: Option<String>,
    #[schema(example = "北京示例科技有限公司")]
    pub legal_entity: Option<String>,
}

/// The versions of team `team` (or of every team `scope` may see), by team and first day.
pub async fn versions(s: &Services, scope: &Scope, team: Option<&TeamId>) -> Result<Vec<Row>, Error> {
    // the team first (its own connection, given back), then one connection for the versions
    if let Some(t) = team {
        super::teams::team(s, scope, t).await?;
    }
    let teams = team.map(|t| vec![t.as_str().to_string()]).or_else(|| scope.teams.clone());
    let mut conn = s.pool.acquire().await?;
    Ok(db::finance_codes::list(&mut conn, teams.as_deref()).await?)
}

/// Every team's codes, looked up by team and day (the bills' resolution).
pub(crate) async fn book(conn: &mut PgConnection) -> Result<FinanceCodeBook, sqlx::Error> {
    Ok(FinanceCodeBook::new(db::finance_codes::list(conn, None).await?.iter().map(Row::version)))
}

/// The fields of `input` checked, every problem at once.
fn parse(input: &FinanceCodesInput) -> Result<(NaiveDate, FinanceCodes), Error> {
    let day = validate::parse_date("valid_from", input.valid_from.trim());
    let codes = validate::finance_codes(
        input.cost_centre.as_deref(),
        input.gl_account.as_deref(),
        input.legal_entity.as_deref(),
    );
    match (day, codes) {
        (Ok(day), Ok(codes)) => Ok((day, codes)),
        (day, codes) => Err(Error::Invalid(day.err().into_iter().chain(codes.err().into_iter().flatten()).collect())),
    }
}

/// Puts team `team`'s codes from `input.valid_from` (finance): a new version, or the version of that day changed;
/// the codes stored already write and audit nothing. Audited as `finance_codes.put`.
pub async fn put(s: &Services, by: &Writer, team: &TeamId, input: &FinanceCodesInput) -> Result<Change<Row>, Error> {
    let (day, codes) = parse(input)?;
    let mut tx = s.pool.begin().await?;
    if db::teams::get(&mut tx, team).await?.is_none() {
        return Err(Error::NotFound(format!("team {team}")));
    }
    let done = put_checked(&mut tx, &by.actor(), team.as_str(), day, &codes).await?;
    tx.commit().await?;
    Ok(done)
}

/// Puts a checked version inside the caller's transaction (the API's, the page's, the CMDB import's) and audits
/// it; the codes stored already write and audit nothing.
pub(super) async fn put_checked(
    tx: &mut PgConnection,
    actor: &str,
    team: &str,
    day: NaiveDate,
    codes: &FinanceCodes,
) -> Result<Change<Row>, sqlx::Error> {
    let change = db::finance_codes::put(&mut *tx, team, day, codes, actor).await?;
    audit::record_change(&mut *tx, actor, "finance_codes.put", &format!("team:{team}@{day}"), &change).await?;
    Ok(change)
}
