//! Month statements as a caller may see them: the statement under a policy (served from memory), the teams a
//! caller may ask for, and what a view or an export of it holds.

use std::sync::Arc;

use sqlx::PgPool;

use super::ledger::statement as ledger_statement;
use super::{Error, Services};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::db;
use crate::ledger::{self, Layout, Statement, TeamUnitCosts};
use crate::validate::TeamId;

/// Statements served from memory. A closed month is read once from what was stored at close and kept under its
/// content hash: it never changes, so only the (tiny) hash is read per request, never the snapshot, and nothing is
/// recomputed. An open month is computed and kept under the data version, recomputed once that moves.
#[derive(Default)]
pub struct StatementCache {
    open: crate::usecase::cache::StampedCache<(Month, PolicyChoice), Statement>,
    /// Keyed by the content hash and kept under one fixed version: a closed month never changes. Requests
    /// arriving while it is read wait for that one read instead of each decoding the snapshot.
    closed: crate::usecase::cache::StampedCache<(Month, String), Statement>,
    /// The data version under which each cached closed month was last verified against its stored hash: a
    /// snapshot altered in the database behind its triggers is found by the first request after the data version
    /// moved (or at once, when this process found it altered elsewhere), never served from memory after that.
    verified: std::sync::Mutex<std::collections::HashMap<Month, db::version::DataVersion>>,
}

impl StatementCache {
    /// `month`'s statement under `choice`: a closed month as frozen; an open one computed now, from layout 5 on
    /// with each team's unit cost of inference per model ([`month_unit_costs`]), kept under the data version
    /// (serving rows and rates move it).
    pub async fn statement(&self, s: &Services, month: Month, choice: PolicyChoice) -> Result<Arc<Statement>, Error> {
        let pool = &s.pool;
        let (version, closed_hash) = db::version::with_closed_hash(pool, month).await?;
        match closed_hash {
            None => Ok(self
                .open
                .get_or_compute_at(version, (month, choice), async || -> Result<Statement, Error> {
                    let mut st = ledger_statement(pool, month, choice).await?;
                    if st.layout >= Layout::V5 {
                        st.unit_cost = Some(month_unit_costs(s, month).await?);
                    }
                    Ok(st)
                })
                .await?),
            // The snapshot is verified against its stored hash when it is read (an altered one is an error, never
            // cached); should the stored hash change, the key changes and the month is read again.
            Some(hash) => {
                let st = self
                    .closed
                    .get_or_compute_at(db::version::DataVersion(0), (month, hash), async || {
                        ledger_statement(pool, month, PolicyChoice::NONE).await
                    })
                    .await?;
                self.verify_closed(pool, month, version).await?;
                ledger::check_frozen_policy(month, st.bills.policy, choice)?;
                Ok(st)
            }
        }
    }

    /// Verifies closed `month` against its stored hash again unless that was done under `version` already and no
    /// integrity alarm is up for it (an alarm keeps it verified on every request).
    async fn verify_closed(&self, pool: &PgPool, month: Month, version: db::version::DataVersion) -> Result<(), Error> {
        let alarmed = ledger::integrity::alarmed(month);
        let verified = || self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if !alarmed && verified().get(&month).is_some_and(|v| *v >= version) {
            return Ok(());
        }
        super::ledger::verify_closed(pool, month).await?;
        verified().insert(month, version);
        Ok(())
    }
}

/// The statement of `month` under `choice` (a closed month: only under its frozen policy), from memory.
pub async fn statement(s: &Services, month: Month, choice: PolicyChoice) -> Result<Arc<Statement>, Error> {
    s.statements.statement(s, month, choice).await
}

/// Each team's unit cost of inference of `month` per model (SPEC §9), from the serving pod-hours stored now and
/// the rates: the unit-cost report grouped by model over the month's billing days, each team's pods apart (what
/// `GET /reports/unit-cost?group_by=model` gives that team's lead). What an open month's statement shows and what
/// a close freezes (layout 5 on).
pub async fn month_unit_costs(s: &Services, month: Month) -> Result<TeamUnitCosts, Error> {
    let hours = super::unit_cost::pod_hours(s, &Scope::all(), month.first_day(), month.next().first_day()).await?;
    Ok(crate::ledger::frozen::team_unit_costs(&hours))
}

/// A team asked for must be a known team the caller may see: else not found, naming `team` (a team lead learns
/// nothing of other teams: one outside its scope is as unknown). A known team without lines this month is no error.
pub async fn check_team(s: &Services, st: &Statement, scope: &Scope, team: &TeamId) -> Result<(), Error> {
    if scope.allows(team.as_str()) && super::ledger::team_known(&s.pool, st, team).await? {
        return Ok(());
    }
    Err(Error::NotFoundField { field: "team".into(), message: format!("unknown team {team}") })
}

/// What a view or an export of a month holds: its statement, and the teams of it the caller gets (its scope,
/// narrowed to one team when asked).
pub struct Selection {
    pub statement: Arc<Statement>,
    pub scope: Scope,
    pub team: Option<String>,
}

impl Selection {
    /// Whether team `t` is in the selection (cheap to clone into a rendering thread).
    pub fn include(&self) -> impl Fn(&str) -> bool + Send + 'static {
        let (scope, team) = (self.scope.clone(), self.team.clone());
        move |t: &str| scope.allows(t) && team.as_deref().is_none_or(|only| only == t)
    }

    /// Every team, for a global reader: the exports then end with the cluster rows.
    pub fn every_team(&self) -> bool {
        self.scope.is_global() && self.team.is_none()
    }
}

/// The month's statement under `choice` and the teams of it `scope` gets, narrowed to `team` (checked with
/// [`check_team`]).
pub async fn select(
    s: &Services,
    scope: &Scope,
    month: Month,
    choice: PolicyChoice,
    team: Option<&TeamId>,
) -> Result<Selection, Error> {
    let st = statement(s, month, choice).await?;
    if let Some(t) = team {
        check_team(s, &st, scope, t).await?;
    }
    Ok(Selection { statement: st, scope: scope.clone(), team: team.map(TeamId::to_string) })
}
