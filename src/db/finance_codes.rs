//! Teams' dated finance codes (SPEC §11): every version, one team's, and a version put (created, changed or as
//! stored already) under the row's lock, for its audit entry.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::PgConnection;

use super::audit::Change;
use crate::billing::{FinanceCodeVersion, FinanceCodes};

/// A stored version of a team's codes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub team_id: String,
    pub valid_from: NaiveDate,
    pub cost_centre: Option<String>,
    pub gl_account: Option<String>,
    pub legal_entity: Option<String>,
    pub set_by: String,
    pub set_at: DateTime<Utc>,
}

impl Row {
    pub fn codes(&self) -> FinanceCodes {
        FinanceCodes {
            cost_centre: self.cost_centre.clone(),
            gl_account: self.gl_account.clone(),
            legal_entity: self.legal_entity.clone(),
        }
    }

    pub fn version(&self) -> FinanceCodeVersion {
        FinanceCodeVersion { team: self.team_id.clone(), valid_from: self.valid_from, codes: self.codes() }
    }
}

/// Every version of every team (or of the teams listed), by team and first day.
pub async fn list(conn: &mut PgConnection, teams: Option<&[String]>) -> Result<Vec<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        r#"SELECT team_id, valid_from, cost_centre, gl_account, legal_entity, set_by, set_at FROM team_finance_codes
           WHERE $1::text[] IS NULL OR team_id = ANY($1) ORDER BY team_id, valid_from"#,
        teams
    )
    .fetch_all(conn)
    .await
}

/// Puts team `team`'s version of `valid_from`: a new one, a change of the stored one (read under its lock first, so
/// concurrent puts see each other's as `before`), or the codes stored already (nothing written).
pub async fn put(
    conn: &mut PgConnection,
    team: &str,
    valid_from: NaiveDate,
    codes: &FinanceCodes,
    by: &str,
) -> Result<Change<Row>, sqlx::Error> {
    let created = sqlx::query_as!(
        Row,
        r#"INSERT INTO team_finance_codes (team_id, valid_from, cost_centre, gl_account, legal_entity, set_by)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (team_id, valid_from) DO NOTHING
           RETURNING team_id, valid_from, cost_centre, gl_account, legal_entity, set_by, set_at"#,
        team,
        valid_from,
        codes.cost_centre,
        codes.gl_account,
        codes.legal_entity,
        by
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = created {
        return Ok(Change::Created(row));
    }
    let before = sqlx::query_as!(
        Row,
        r#"SELECT team_id, valid_from, cost_centre, gl_account, legal_entity, set_by, set_at FROM team_finance_codes
           WHERE team_id = $1 AND valid_from = $2 FOR UPDATE"#,
        team,
        valid_from
    )
    .fetch_one(&mut *conn)
    .await?;
    if before.codes() == *codes {
        return Ok(Change::Unchanged(before));
    }
    let after = sqlx::query_as!(
        Row,
        r#"UPDATE team_finance_codes SET cost_centre = $3, gl_account = $4, legal_entity = $5, set_by = $6,
                  set_at = now()
           WHERE team_id = $1 AND valid_from = $2
           RETURNING team_id, valid_from, cost_centre, gl_account, legal_entity, set_by, set_at"#,
        team,
        valid_from,
        codes.cost_centre,
        codes.gl_account,
        codes.legal_entity,
        by
    )
    .fetch_one(conn)
    .await?;
    Ok(Change::Changed { before, after })
}

/// Team `team`'s version of `valid_from`, if stored.
pub async fn get(conn: &mut PgConnection, team: &str, valid_from: NaiveDate) -> Result<Option<Row>, sqlx::Error> {
    sqlx::query_as!(
        Row,
        r#"SELECT team_id, valid_from, cost_centre, gl_account, legal_entity, set_by, set_at FROM team_finance_codes
           WHERE team_id = $1 AND valid_from = $2"#,
        team,
        valid_from
    )
    .fetch_optional(conn)
    .await
}
