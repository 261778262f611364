//! The months a reader browses: the current billing month and the ones before it, each open or closed — and a
//! month's overview as finance reads it (totals, forecast, change vs the previous month, utilization).

use chrono::{DateTime, Utc};

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::ledger::MonthStatus;
use crate::money::Money;
use crate::waste::Figures;

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
        let (_, hash) = crate::db::version::with_closed_hash(&s.pool, &m.to_string()).await?;
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
    pub previous: Money,
}

/// A month as finance reads it at a glance (global readers): the statement's totals under the default policy
/// (the closed policy for a closed month), the forecast of an open month at its run rate, the previous month for
/// comparison and the month's utilization figures.
#[derive(Debug, Clone)]
pub struct Overview {
    pub month: Month,
    pub status: MonthStatus,
    pub teams: Vec<TeamSpend>,
    pub total: Money,
    pub previous_total: Money,
    pub capacity_cost: Money,
    pub allocated: Money,
    pub unallocated: Money,
    pub platform_kept: Money,
    /// For the month under way (open, not ended): its total at the current run rate for the whole month.
    pub forecast: Option<Money>,
    pub figures: Figures,
}

pub async fn overview(s: &Services, scope: &Scope, month: Month, now: DateTime<Utc>) -> Result<Overview, Error> {
    global_only(scope)?;
    let st = super::statements::statement(s, month, PolicyChoice::NONE).await?;
    let prev = super::statements::statement(s, month.prev(), PolicyChoice::NONE).await?;
    let teams: Vec<TeamSpend> = st
        .team_ids()
        .into_iter()
        .map(|t| TeamSpend {
            team: t.to_string(),
            name: st.teams.get(t).map_or_else(|| t.to_string(), |i| i.name.clone()),
            total: st.team_total(t),
            previous: prev.team_total(t),
        })
        .collect();
    let total: Money = teams.iter().map(|t| t.total).sum();
    let previous_total: Money = prev.team_ids().into_iter().map(|t| prev.team_total(t)).sum();
    // a forecast is for the month under way: an ended month's total is what it is, closed or not
    let under_way = now < month.bounds(s.billing_tz).1;
    let forecast = (st.status == MonthStatus::Open && under_way)
        .then(|| crate::waste::forecast(total, crate::alerts::elapsed(month, s.billing_tz, now)));
    let figures = super::reports::month_utilization_of(s, month).await?.totals;
    let b = &st.bills;
    Ok(Overview {
        month,
        status: st.status,
        teams,
        total,
        previous_total,
        capacity_cost: b.capacity_cost,
        allocated: b.allocated,
        unallocated: b.unallocated,
        platform_kept: b.platform_kept,
        forecast,
        figures,
    })
}
