//! The months a reader browses: the current billing month and the ones before it, each open or closed — and a
//! month's overview as finance reads it under a bill policy (totals with their total row, the forecast from the
//! hours the data covers, the change against the previous month compared like with like, utilization).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::{BillPolicy, Month, MonthBills, MonthTotals, PolicyChoice};
use crate::ledger::{MonthStatus, Statement};
use crate::money::Money;
use crate::waste::{Covered, Figures};

/// How many months the bills list goes back (the current one included).
pub const LISTED: usize = 13;

#[derive(Debug, Clone, PartialEq)]
pub struct MonthEntry {
    pub month: Month,
    pub status: MonthStatus,
}

/// The month of `now` in the billing time zone.
pub fn current(s: &Services, now: DateTime<Utc>) -> Month {
    Month::containing(now, s.billing_tz)
}

/// The current month and the [`LISTED`]` − 1` before it, newest first, each with its status (one small read each:
/// the status is whether the month has a stored close).
pub async fn months(s: &Services, now: DateTime<Utc>) -> Result<Vec<MonthEntry>, Error> {
    let mut out = Vec::with_capacity(LISTED);
    let mut m = current(s, now);
    for _ in 0..LISTED {
        let (_, hash) = crate::db::version::with_closed_hash(&s.pool, m).await?;
        out.push(MonthEntry { month: m, status: if hash.is_some() { MonthStatus::Closed } else { MonthStatus::Open } });
        m = m.prev();
    }
    Ok(out)
}

/// One team's line of the overview.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamSpend {
    pub team: String,
    pub name: String,
    pub total: Money,
    /// The team's total in the previous month, under the same policy (see [`Comparison`]).
    pub previous: Money,
    /// The team's month extrapolated from the covered hours (an open month under way; else its total).
    pub forecast: Money,
}

/// A month as finance reads it at a glance (global readers), under the policy of the view: the statement's totals
/// (a closed month: its frozen policy), the total row, the forecast of an open month from the hours its data
/// covers, the previous month compared like with like, and the month's utilization figures.
#[derive(Debug, Clone)]
pub struct Overview {
    pub month: Month,
    pub status: MonthStatus,
    /// The policy the figures are under.
    pub policy: BillPolicy,
    pub teams: Vec<TeamSpend>,
    /// The teams table's total row.
    pub totals: MonthTotals,
    pub total: Money,
    pub previous_total: Money,
    pub capacity_cost: Money,
    pub allocated: Money,
    pub unallocated: Money,
    pub platform_kept: Money,
    /// Usage above the counted capacity (never a negative unallocated).
    pub capacity_shortfall: Option<Money>,
    /// For the month under way (open, not ended): its total extrapolated from the hours its data covers.
    pub forecast: Option<MonthForecast>,
    /// What the change against the previous month compares.
    pub comparison: Comparison,
    pub figures: Figures,
}

/// A month's spend extrapolated from the hours its data covers, per cluster (SPEC §7's run rate, on data, not on
/// the clock: it moves only when data does), and what it is based on.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MonthForecast {
    #[schema(value_type = String, example = "2026-12")]
    pub month: Month,
    /// The total now and extrapolated.
    pub total: Money,
    pub forecast: Money,
    /// Each team's forecast.
    pub teams: BTreeMap<String, Money>,
    /// What it is based on: each cluster's hours covered out of the month's.
    pub clusters: BTreeMap<String, Covered>,
    /// Σ hours covered and Σ hours of the month over the clusters (what a page says it is based on).
    pub hours_covered: i64,
    pub hours_of_month: i64,
}

/// What a month-over-month change compares.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Comparison {
    #[schema(value_type = String)]
    pub previous_month: Month,
    /// Both months under this policy (a previous month closed under another is re-read under it from its frozen
    /// figures: the same lines and capacity, the unallocated cost kept or spread as this policy says).
    pub policy: BillPolicyView,
    /// Whether the previous month was frozen under another policy than the one compared.
    pub previous_repoliced: bool,
    /// `whole_months`: both months complete (every hour of each covered), totals against totals;
    /// `covered_hours`: at least one is not, so each is extrapolated from the hours its data covers to its whole
    /// month (a 3-day month beside a 5-day one compares their run rates, not 3 days with 5).
    pub basis: ComparisonBasis,
    pub current: Money,
    pub previous: Money,
    pub current_hours_covered: i64,
    pub current_hours_of_month: i64,
    pub previous_hours_covered: i64,
    pub previous_hours_of_month: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonBasis {
    WholeMonths,
    CoveredHours,
}

/// A bill policy by its API names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct BillPolicyView {
    pub mode: String,
    pub unallocated: String,
}

impl From<BillPolicy> for BillPolicyView {
    fn from(p: BillPolicy) -> Self {
        BillPolicyView { mode: p.mode.as_str().into(), unallocated: p.unallocated.as_str().into() }
    }
}

/// The overview of `month` under `choice` (an open month: a draft under it; a closed month: only its frozen
/// policy) at `now` (global readers).
pub async fn overview(
    s: &Services,
    scope: &Scope,
    month: Month,
    choice: PolicyChoice,
    now: DateTime<Utc>,
) -> Result<Overview, Error> {
    global_only(scope)?;
    let st = super::statements::statement(s, month, choice).await?;
    let policy = st.bills.policy;
    let under_way = st.status == MonthStatus::Open && now < month.bounds(s.billing_tz).1;
    let fc = month_forecast(s, &st, now).await?;
    let cmp = compare(s, &st, &fc, now).await?;
    let prev_teams = previous_teams(s, month.prev(), policy).await?;
    let teams: Vec<TeamSpend> = st
        .team_ids()
        .into_iter()
        .map(|t| TeamSpend {
            team: t.to_string(),
            name: st.teams.get(t).map_or_else(|| t.to_string(), |i| i.name.clone()),
            total: st.team_total(t),
            previous: prev_teams.get(t).copied().unwrap_or(Money::ZERO),
            forecast: fc.teams.get(t).copied().unwrap_or_else(|| st.team_total(t)),
        })
        .collect();
    let totals = MonthTotals::of_teams(
        st.team_ids()
            .into_iter()
            .map(|t| (st.bills.teams.iter().find(|b| b.team == t), st.team_restated(t), st.team_adjusted(t))),
    );
    let figures = super::reports::month_utilization_of(s, month).await?.totals;
    let b = &st.bills;
    Ok(Overview {
        month,
        status: st.status,
        policy,
        total: totals.total,
        previous_total: prev_teams.values().copied().sum(),
        teams,
        totals,
        capacity_cost: b.capacity_cost,
        allocated: b.allocated,
        unallocated: b.unallocated,
        platform_kept: b.platform_kept,
        capacity_shortfall: b.capacity_shortfall,
        forecast: under_way.then_some(fc),
        comparison: cmp,
        figures,
    })
}

/// The forecast of `month` under `choice` from the hours its data covers (global readers): what a page shows
/// beside an open month's totals, with what it is based on.
pub async fn forecast(
    s: &Services,
    scope: &Scope,
    month: Month,
    choice: PolicyChoice,
    now: DateTime<Utc>,
) -> Result<MonthForecast, Error> {
    global_only(scope)?;
    let st = super::statements::statement(s, month, choice).await?;
    month_forecast(s, &st, now).await
}

/// Each cluster's covered hours of `month` (every registered cluster).
async fn covered(s: &Services, month: Month, now: DateTime<Utc>) -> Result<BTreeMap<String, Covered>, Error> {
    let (from, to) = month.bounds(s.billing_tz);
    let counts = crate::db::readiness::coverage_counts(&s.pool, from, to).await?;
    Ok(crate::ledger::readiness::coverage(&counts, from, to, now)
        .into_iter()
        .map(|c| (c.cluster, Covered { hours_covered: c.hours_covered, hours_of_month: c.hours_of_month }))
        .collect())
}

/// Each team's priced usage per cluster in `month` (card-seconds × the day's rate): the weights of a forecast.
async fn weights(s: &Services, month: Month) -> Result<BTreeMap<String, Vec<(String, Decimal)>>, Error> {
    let rows = crate::db::reports::usage_by_cluster_team(&s.pool, month.first_day(), month.next().first_day()).await?;
    let book = super::idle::rate_book(s).await?;
    let mut by_team: BTreeMap<String, BTreeMap<String, Decimal>> = BTreeMap::new();
    for r in rows {
        let Some(rate) = book.price(&r.gpu_model, r.day).1 else { continue };
        let seconds = Decimal::from_f64_retain(r.gpu_seconds).unwrap_or_default();
        *by_team.entry(r.team).or_default().entry(r.cluster).or_default() += seconds * rate.as_decimal();
    }
    Ok(by_team.into_iter().map(|(t, c)| (t, c.into_iter().collect())).collect())
}

/// The forecast of a statement's month: each team's total extrapolated per cluster by covered hours.
async fn month_forecast(s: &Services, st: &Statement, now: DateTime<Utc>) -> Result<MonthForecast, Error> {
    let covered = covered(s, st.month, now).await?;
    let weights = weights(s, st.month).await?;
    let teams: BTreeMap<String, Money> = st
        .team_ids()
        .into_iter()
        .map(|t| {
            let w = weights.get(t).map(Vec::as_slice).unwrap_or(&[]);
            // restatements and adjustments are fixed amounts: never extrapolated
            let fixed = st.team_restated(t) + st.team_adjusted(t);
            (t.to_string(), crate::waste::covered_forecast(st.team_total(t), fixed, w, &covered))
        })
        .collect();
    let total: Money = st.team_ids().into_iter().map(|t| st.team_total(t)).sum();
    Ok(MonthForecast {
        month: st.month,
        total,
        forecast: teams.values().copied().sum(),
        teams,
        hours_covered: covered.values().map(|c| c.hours_covered).sum(),
        hours_of_month: covered.values().map(|c| c.hours_of_month).sum(),
        clusters: covered,
    })
}

/// The previous month's bills under `policy`: its statement (an open month, a draft under it), or its frozen
/// bills re-read under it when it was closed under another.
async fn previous_bills(s: &Services, prev: Month, policy: BillPolicy) -> Result<(Statement, bool), Error> {
    let frozen = super::statements::statement(s, prev, PolicyChoice::NONE).await?;
    if frozen.status == MonthStatus::Open {
        return Ok((
            super::statements::statement(s, prev, PolicyChoice::exactly(policy)).await?.as_ref().clone(),
            false,
        ));
    }
    let repoliced = frozen.bills.policy != policy;
    let mut st = frozen.as_ref().clone();
    st.bills = repolicy(&st.bills, policy);
    Ok((st, repoliced))
}

fn repolicy(bills: &MonthBills, policy: BillPolicy) -> MonthBills {
    if bills.policy == policy { bills.clone() } else { bills.under(policy) }
}

/// The previous month's team totals under `policy`.
async fn previous_teams(s: &Services, prev: Month, policy: BillPolicy) -> Result<BTreeMap<String, Money>, Error> {
    let (st, _) = previous_bills(s, prev, policy).await?;
    Ok(st.team_ids().into_iter().map(|t| (t.to_string(), st.team_total(t))).collect())
}

/// The month-over-month comparison of a statement's month: both months under its policy, whole months when both
/// are complete, else each extrapolated from its covered hours.
async fn compare(s: &Services, st: &Statement, fc: &MonthForecast, now: DateTime<Utc>) -> Result<Comparison, Error> {
    let policy = st.bills.policy;
    let (prev, previous_repoliced) = previous_bills(s, st.month.prev(), policy).await?;
    let pfc = month_forecast(s, &prev, now).await?;
    let complete = |f: &MonthForecast| f.hours_of_month > 0 && f.hours_covered >= f.hours_of_month;
    let whole = complete(fc) && complete(&pfc);
    let (current, previous) = if whole { (fc.total, pfc.total) } else { (fc.forecast, pfc.forecast) };
    Ok(Comparison {
        previous_month: st.month.prev(),
        policy: policy.into(),
        previous_repoliced,
        basis: if whole { ComparisonBasis::WholeMonths } else { ComparisonBasis::CoveredHours },
        current,
        previous,
        current_hours_covered: fc.hours_covered,
        current_hours_of_month: fc.hours_of_month,
        previous_hours_covered: pfc.hours_covered,
        previous_hours_of_month: pfc.hours_of_month,
    })
}
