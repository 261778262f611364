//! The ledger's types and pure rules: a month's statement (its bills, the restatements of earlier closed months it
//! carries, open or closed), the immutable snapshot a close stores and reads back, what a close freezes besides the
//! bills ([`frozen`]), the layout it is rendered with ([`layout`]), what stands in the way of a close
//! ([`readiness`]), a closed month's integrity alarm ([`integrity`]), finance's approved adjustments
//! ([`adjustment`]). Computing, reading and closing months on the
//! database are the use cases' ([`crate::usecase::ledger`]).

pub mod adjustment;
pub mod frozen;
pub mod integrity;
pub mod layout;
pub mod line_id;
pub mod readiness;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::billing::{BillPolicy, Month, MonthBills, PolicyChoice, RestatementLine};
use crate::db;
use crate::money::Money;
pub use adjustment::{Adjustment, AdjustmentStatus};
pub use frozen::{FrozenExtras, TeamUnitCosts, UnitCostLine};
pub use layout::Layout;
use readiness::{Blocker, Readiness};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("the stored rate history is inconsistent: {0}")]
    Rates(String),
    #[error("month {0} is closed already")]
    AlreadyClosed(Month),
    #[error("month {0} has not ended yet")]
    NotEnded(Month),
    /// The month is not complete (SPEC §6): what stands in the way, for a close without an override.
    #[error("month {} is not ready to close: {} blocker(s)", .0.month, .0.blockers.len())]
    NotReady(Box<Readiness>),
    /// An override without a usable reason.
    #[error("{0}")]
    OverrideReason(crate::validate::Invalid),
    /// A closed month asked for under a policy other than the one it was closed with: its statements exist under
    /// the frozen policy only (a draft under another policy is for open months).
    #[error("month {month} is closed under {field} {frozen}; its statements are frozen with it (not {asked})")]
    PolicyMismatch { month: Month, field: &'static str, asked: &'static str, frozen: &'static str },
    #[error("the snapshot of {0} cannot be read: {1}")]
    Snapshot(String, serde_json::Error),
    /// A closed month's snapshot no longer has the content hash stored at close: it was altered behind the
    /// application's back. Never served.
    #[error(
        "closed month {month} fails its integrity check: content hash stored {stored}, snapshot hashes to {actual}"
    )]
    Integrity { month: String, stored: String, actual: String },
}

impl From<db::rates::RateBookError> for LedgerError {
    fn from(e: db::rates::RateBookError) -> Self {
        match e {
            db::rates::RateBookError::Database(e) => LedgerError::Database(e),
            db::rates::RateBookError::Inconsistent(e) => LedgerError::Rates(e.to_string()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MonthStatus {
    Open,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TeamInfo {
    pub name: String,
    pub owner: Option<String>,
}

/// A month's statement: the bills, and the restatements of earlier closed months shown on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    pub month: Month,
    pub status: MonthStatus,
    pub closed_at: Option<DateTime<Utc>>,
    pub closed_by: Option<String>,
    pub bills: MonthBills,
    pub restatements: Vec<RestatementLine>,
    pub teams: BTreeMap<String, TeamInfo>,
    /// A closed month's content hash (sha256 hex of the frozen snapshot, stored at close and checked whenever
    /// the statement is read); `None` for an open month.
    #[serde(default)]
    pub content_hash: Option<String>,
    /// A month closed although it was not complete: the reason given and what stood in the way then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_override: Option<CloseOverride>,
    /// The layout its representations are rendered with: a closed month's as frozen (1 for a snapshot stored
    /// before layouts existed), an open month's the current one.
    #[serde(default = "layout_v1")]
    pub layout: Layout,
    /// What the close froze besides the bills (the PDF's idle list and utilization); `None` for an open month and
    /// for a month closed under layout 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<FrozenExtras>,
    /// Layout 5 on: each team's unit cost of inference of the month per model, printed beside its lines — a
    /// closed month's as its close froze it (`frozen.unit_cost`), an open month's computed with the statement
    /// (`crate::usecase::statements`); `None` before layout 5 and where nobody computed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_cost: Option<TeamUnitCosts>,
    /// The approved adjustments booked to this month (SPEC §11), by id: each a line of its team's total — of this
    /// month, or a restatement of an earlier closed month approved after its close. A close freezes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adjustments: Vec<Adjustment>,
    /// An open month's adjustments awaiting approval that would be booked to it: shown on the draft, in no total.
    /// Never frozen (a close leaves them pending; approved later, they restate the month on the next open one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_adjustments: Vec<Adjustment>,
    /// The teams' finance-code versions the month's lines were computed with (SPEC §11; each team's version in
    /// effect on the month's first day and those beginning within it): a close freezes them, and a closed month is
    /// recomputed under them, so a version dated into it later moves none of its lines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finance_codes: Vec<crate::billing::FinanceCodeVersion>,
}

fn layout_v1() -> Layout {
    Layout::V1
}

/// Why a month was closed although its readiness listed blockers, printed on its statements for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CloseOverride {
    pub reason: String,
    /// Who closed it.
    pub by: String,
    /// What stood in the way at the close.
    pub blockers: Vec<Blocker>,
}

/// How a month is to be closed.
#[derive(Debug, Clone)]
pub struct CloseRequest {
    /// The bill policy to freeze: always named by the caller (finance decides it at the close, never a default
    /// configured earlier by someone else).
    pub policy: BillPolicy,
    /// Close even though the month is not complete, for this reason (kept in the audit log and on the statement).
    pub override_reason: Option<String>,
}

impl Statement {
    /// `team`'s finance codes on the month's last day (SPEC §11): those of its lines not computed per day (its
    /// unallocated share, restatements and adjustments booked in the month; each usage and reservation line has its
    /// days' own) — the latest of its versions the month was computed with, none where it has none or they were
    /// cleared.
    pub fn month_end_codes(&self, team: &str) -> Option<&crate::billing::FinanceCodes> {
        let latest = self.finance_codes.iter().filter(|v| v.team == team).max_by_key(|v| v.valid_from)?;
        (!latest.codes.is_empty()).then_some(&latest.codes)
    }

    /// Every team on this statement — with a bill or with restatements — sorted by id.
    pub fn team_ids(&self) -> Vec<&str> {
        let mut teams: Vec<&str> = self
            .bills
            .teams
            .iter()
            .map(|t| t.team.as_str())
            .chain(self.restatements.iter().map(|r| r.team.as_str()))
            .chain(self.adjustments.iter().chain(&self.pending_adjustments).map(|a| a.team.as_str()))
            .collect();
        teams.sort_unstable();
        teams.dedup();
        teams
    }

    /// A team's restatement lines on this statement.
    pub fn restatements_of<'a>(&'a self, team: &'a str) -> impl Iterator<Item = &'a RestatementLine> + 'a {
        self.restatements.iter().filter(move |r| r.team == team)
    }

    /// Σ of the team's restatements of earlier closed months shown on this statement.
    pub fn team_restated(&self, team: &str) -> Money {
        self.restatements_of(team).map(|r| r.amount_delta).sum()
    }

    /// The team's unit cost of inference per model on this statement: layout 5 on, empty for a team without
    /// serving pods (nothing is printed for it) and for a month of an earlier layout.
    pub fn unit_cost_of(&self, team: &str) -> &[UnitCostLine] {
        match &self.unit_cost {
            Some(teams) if self.layout >= Layout::V5 => teams.get(team).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// A team's approved adjustments on this statement.
    pub fn adjustments_of<'a>(&'a self, team: &'a str) -> impl Iterator<Item = &'a Adjustment> + 'a {
        self.adjustments.iter().filter(move |a| a.team == team)
    }

    /// A team's adjustments awaiting approval shown on this (open) statement.
    pub fn pending_adjustments_of<'a>(&'a self, team: &'a str) -> impl Iterator<Item = &'a Adjustment> + 'a {
        self.pending_adjustments.iter().filter(move |a| a.team == team)
    }

    /// Σ of the team's approved adjustments on this statement.
    pub fn team_adjusted(&self, team: &str) -> Money {
        adjustment::team_sum(&self.adjustments, team)
    }

    /// Whether the statement carries any approved adjustment.
    pub fn has_adjustments(&self) -> bool {
        !self.adjustments.is_empty()
    }

    /// Whether a face showing `teams` prints the adjustments column: only where one of them has an approved
    /// adjustment — so a statement without any (every month closed before adjustments existed) keeps its bytes, and a
    /// reader learns nothing of other teams' adjustments (nor does a team's statement depend on them).
    pub fn adjusted_among<'a>(&self, mut teams: impl Iterator<Item = &'a str>) -> bool {
        teams.any(|t| self.adjustments_of(t).next().is_some())
    }

    /// What the team owes on this statement: its bill plus its restatements and its approved adjustments.
    pub fn team_total(&self, team: &str) -> Money {
        let bill = self.bills.teams.iter().find(|t| t.team == team).map_or(Money::ZERO, |t| t.total);
        bill + self.team_restated(team) + self.team_adjusted(team)
    }
}

/// The stored form of a closed month (versioned so that old snapshots stay readable). Version 1: the statement
/// only, rendered by layout 1. Version 2: also the layout it is rendered with and the extras its PDF prints, so
/// every figure of every representation is in here, under the content hash.
#[derive(Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub version: u32,
    /// Absent in version 1 (layout 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<Layout>,
    pub bills: MonthBills,
    pub restatements: Vec<RestatementLine>,
    pub teams: BTreeMap<String, TeamInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_override: Option<CloseOverride>,
    /// Absent in version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras: Option<FrozenExtras>,
    /// The approved adjustments booked to the month; absent when there were none (every snapshot stored before
    /// adjustments existed reads as it was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adjustments: Vec<Adjustment>,
    /// The teams' finance-code versions the month was computed with ([`Statement::finance_codes`]); absent when
    /// there were none (every snapshot stored before codes existed reads as it was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finance_codes: Vec<crate::billing::FinanceCodeVersion>,
}

/// The snapshot version new closes store.
pub const SNAPSHOT_VERSION: u32 = 2;

/// A closed month's snapshot, only if it still has the content hash stored at close.
pub fn read_snapshot(c: &db::bills::ClosedMonth) -> Result<Snapshot, LedgerError> {
    if !c.intact() {
        // loud: someone altered a closed month in the database (the triggers refuse it, so with them bypassed)
        return Err(integrity::mismatch(&c.month, &c.content_hash, &c.actual_hash));
    }
    serde_json::from_value(c.snapshot.clone()).map_err(|e| LedgerError::Snapshot(c.month.clone(), e))
}

/// A closed month's statement from its stored row, only if the row still has the content hash stored at close.
pub fn from_closed(month: Month, c: &db::bills::ClosedMonth) -> Result<Statement, LedgerError> {
    let s = read_snapshot(c)?;
    Ok(Statement {
        month,
        status: MonthStatus::Closed,
        closed_at: Some(c.closed_at),
        closed_by: Some(c.closed_by.clone()),
        bills: s.bills,
        restatements: s.restatements,
        teams: s.teams,
        content_hash: Some(c.content_hash.clone()),
        close_override: s.close_override,
        layout: s.layout.unwrap_or(Layout::V1),
        unit_cost: s.extras.as_ref().and_then(|e| e.unit_cost.clone()),
        frozen: s.extras,
        adjustments: s.adjustments,
        pending_adjustments: Vec::new(),
        finance_codes: s.finance_codes,
    })
}

/// A closed month (frozen under `frozen`) may be asked for under its frozen policy only.
pub fn check_frozen_policy(month: Month, frozen: BillPolicy, choice: PolicyChoice) -> Result<(), LedgerError> {
    match choice.conflict(frozen) {
        None => Ok(()),
        Some((field, asked, frozen)) => Err(LedgerError::PolicyMismatch { month, field, asked, frozen }),
    }
}

/// The longest override reason accepted.
pub const OVERRIDE_REASON_MAX: usize = 2000;
