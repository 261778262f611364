//! What a month's PDF statement prints besides the bills — the idle pods of its last week, the month's
//! utilization, the data coverage, the budgets and the previous month, and (frozen from layout 5 on) each team's
//! unit cost of inference per model — computed now, or as its close froze them.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::{Error, Services};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::db;
use crate::export::{Coverage, FrozenExtras, Layout, PreviousMonth, StatementExtras};
use crate::ledger::{MonthStatus, Statement};
use crate::money::Money;
use crate::waste::IdleRule;

/// The week a month's extras cover: the 7 days up to the period's end, or up to the newest stored hour when the
/// month is still being ingested.
async fn extras_end(s: &Services, month: Month) -> Result<DateTime<Utc>, Error> {
    let end = month.bounds(s.billing_tz).1.min(crate::ingest::window::floor_hour(Utc::now()));
    Ok(db::waste::stored_until(&s.pool, end).await?.map_or(end, |until| until.min(end)))
}

/// Each cluster's data coverage of the month: hours ingested against hours elapsed (up to the month's end, or the
/// current hour of an unfinished month).
pub async fn month_coverage(s: &Services, month: Month) -> Result<Vec<Coverage>, Error> {
    let (from, to) = month.bounds(s.billing_tz);
    let elapsed_to = to.min(crate::ingest::window::floor_hour(Utc::now()) + Duration::hours(1)).max(from);
    let hours_elapsed = u32::try_from((elapsed_to - from).num_hours()).unwrap_or(0);
    Ok(db::reports::coverage(&s.pool, from, to)
        .await?
        .into_iter()
        .map(|c| Coverage {
            cluster: c.cluster,
            first_hour: c.first_hour,
            last_hour: c.last_hour,
            hours_present: u32::try_from(c.hours).unwrap_or(u32::MAX),
            hours_elapsed,
        })
        .collect())
}

/// The month's budgets of the teams of `scope`.
async fn month_budgets(s: &Services, month: Month, scope: &Scope) -> Result<BTreeMap<String, Money>, Error> {
    Ok(db::budgets::for_month(&s.pool, month, scope)
        .await?
        .into_iter()
        .map(|b| (b.team_id, Money::from_decimal(b.amount)))
        .collect())
}

/// The previous month's team totals (of `scope`), as its statement reads now; `None` when it has no team.
async fn previous_month(s: &Services, month: Month, scope: &Scope) -> Result<Option<PreviousMonth>, Error> {
    let prev = month.prev();
    let st = super::statements::statement(s, prev, PolicyChoice::NONE).await?;
    let teams: BTreeMap<_, _> =
        st.team_ids().into_iter().filter(|t| scope.allows(t)).map(|t| (t.to_string(), st.team_total(t))).collect();
    Ok((!teams.is_empty()).then(|| PreviousMonth { month: prev, closed: st.status == MonthStatus::Closed, teams }))
}

/// What a month's PDF statement shows `scope` besides the bills, computed now: the idle pods of its teams in the
/// period's last 7 days (up to now for an open month); for a global scope only, the finance summary and the
/// month's utilization (cluster-wide figures a team lead must not see); from layout 3 on also the coverage, the
/// budgets and the previous month.
pub async fn statement_extras(
    s: &Services,
    month: Month,
    layout: Layout,
    scope: &Scope,
) -> Result<StatementExtras, Error> {
    let end = extras_end(s, month).await?;
    // the cached idle list, as the pages read it: a statement viewed again computes nothing again
    let idle = super::idle::idle_pods(s, scope, end, 168, IdleRule::WEEKLY, false).await?;
    let global = scope.is_global();
    let utilization =
        if global { Some((&super::reports::month_utilization_of(s, month).await?.totals).into()) } else { None };
    let mut extras = StatementExtras {
        idle: idle.iter().map(Into::into).collect(),
        utilization,
        finance_summary: global,
        ..Default::default()
    };
    if layout >= Layout::V3 {
        extras.coverage = month_coverage(s, month).await?;
        extras.budgets = month_budgets(s, month, scope).await?;
        extras.previous = previous_month(s, month, scope).await?;
    }
    if layout >= Layout::V4 {
        extras.time_zone = Some(s.billing_tz);
    }
    Ok(extras)
}

/// The extras of every team, as a close freezes them: the same figures [`statement_extras`] gives a global reader.
pub async fn month_extras(s: &Services, month: Month) -> Result<FrozenExtras, Error> {
    let end = extras_end(s, month).await?;
    let all = Scope::all();
    let idle = super::idle::idle_report(s, end, 168, IdleRule::WEEKLY, false, &all).await?;
    let utilization = (&super::reports::month_utilization_of(s, month).await?.totals).into();
    let v3 = Layout::CURRENT >= Layout::V3;
    Ok(FrozenExtras {
        idle: idle.iter().map(Into::into).collect(),
        utilization,
        coverage: if v3 { Some(month_coverage(s, month).await?) } else { None },
        budgets: if v3 { Some(month_budgets(s, month, &all).await?) } else { None },
        previous: if v3 { previous_month(s, month, &all).await? } else { None },
        time_zone: (Layout::CURRENT >= Layout::V4).then(|| s.billing_tz.name().to_string()),
        unit_cost: if Layout::CURRENT >= Layout::V5 {
            Some(super::statements::month_unit_costs(s, month).await?)
        } else {
            None
        },
    })
}

/// The extras of `st`'s PDF for `scope`: what its close froze; computed now for an open month and for a month
/// closed under layout 1 (its close froze none: its PDF shows them as the release before layouts did).
pub async fn extras_for(s: &Services, st: &Statement, scope: &Scope) -> Result<StatementExtras, Error> {
    match crate::export::pdf_extras(st, scope) {
        Some(frozen) => Ok(frozen),
        None => statement_extras(s, st.month, st.layout, scope).await,
    }
}
