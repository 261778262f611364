//! A team's home as its lead reads it: this month's spend against its budget and forecast, the last twelve
//! months, usage by namespace and by GPU model, the idle and the low-efficiency pods, the month's unit cost of
//! inference per model (SPEC §9) — all within the caller's scope narrowed to the one team.

use chrono::{DateTime, Utc};

use super::{Error, Services};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::db::usage::GroupBy;
use crate::ledger::UnitCostLine;
use crate::money::Money;
use crate::usecase::usage::UsageRow;
use crate::validate::TeamId;
use crate::waste::{IdlePod, IdleRule, WastefulPod};

/// How many months the trend shows (the current one included).
pub const TREND_MONTHS: usize = 12;
/// How many low-efficiency pods the home lists.
pub const LOW_EFFICIENCY_TOP: i64 = 10;
/// The idle list's window: SPEC §7's week.
pub const IDLE_HOURS: u32 = 168;

#[derive(Debug, Clone)]
pub struct TeamHome {
    pub team: String,
    pub name: String,
    pub owner: Option<String>,
    pub month: Month,
    pub spent: Money,
    pub budget: Option<Money>,
    /// The month's total at the current run rate.
    pub forecast: Money,
    /// Oldest first: each month's statement total for the team.
    pub trend: Vec<(Month, Money)>,
    pub by_namespace: Vec<UsageRow>,
    pub by_model: Vec<UsageRow>,
    pub idle: Vec<IdlePod>,
    pub idle_monthly: Money,
    pub low_efficiency: Vec<WastefulPod>,
    /// The month's unit cost of inference per model of the team's serving pods, as its statement prints it (empty:
    /// the team serves nothing, or the month was closed before statements had it).
    pub unit_costs: Vec<UnitCostLine>,
    /// The team's quota scopes in the month (SPEC §10); `None`: it has none.
    pub quota: Option<super::quotas::TeamQuota>,
    /// Its GPU pods' queue wait in the month; `None`: none waited nor started.
    pub wait: Option<super::quotas::TeamWait>,
}

/// The home of `team` in `month` for a caller of `scope` at `now`: not found when the team is unknown or outside
/// the scope. A past month reads as it ended (its usage, idle and low-efficiency pods up to its last hour).
pub async fn team_home(
    s: &Services,
    scope: &Scope,
    team: &TeamId,
    month: Month,
    now: DateTime<Utc>,
) -> Result<TeamHome, Error> {
    let st = super::statements::statement(s, month, PolicyChoice::NONE).await?;
    super::statements::check_team(s, &st, scope, team).await?;
    let team = team.as_str();
    let only = Scope::teams(vec![team.to_string()]);
    let spent = st.team_total(team);
    let budgets = super::budgets::budgets(s, &only, month).await?;
    let budget = budgets.iter().find(|b| b.budget.team_id == team);
    let fixed = st.team_restated(team) + st.team_adjusted(team);
    let forecast = crate::waste::forecast(spent, fixed, crate::usecase::alerts::elapsed(month, s.billing_tz, now));
    let mut trend = Vec::with_capacity(TREND_MONTHS);
    let mut m = month;
    for _ in 0..TREND_MONTHS {
        let st = super::statements::statement(s, m, PolicyChoice::NONE).await?;
        trend.push((m, st.team_total(team)));
        m = m.prev();
    }
    trend.reverse();
    let (from, end) = month.bounds(s.billing_tz);
    let until = now.min(end);
    let by_namespace = super::usage::usage(s, &only, from, until, GroupBy::Namespace, None).await?;
    let by_model = super::usage::usage(s, &only, from, until, GroupBy::Model, None).await?;
    let to = crate::ingest::window::floor_hour(until);
    let idle = super::idle::idle_pods(s, &only, to, IDLE_HOURS, IdleRule::WEEKLY, true).await?.as_ref().clone();
    let idle_monthly = idle.iter().filter_map(|p| p.monthly_projection).sum();
    let low_efficiency = super::reports::low_utilization(s, &only, from, to, LOW_EFFICIENCY_TOP).await?;
    // the statement's (cached, the whole month's): what the lead's statement prints and what a close freezes
    let unit_costs = st.unit_cost_of(team).to_vec();
    let quota = super::quotas::quota_report(s, &only, month).await?.teams.into_iter().next();
    let wait = super::quotas::queue_report(s, &only, month).await?.teams.into_iter().next();
    let info = st.teams.get(team);
    Ok(TeamHome {
        team: team.to_string(),
        name: info.map_or_else(|| team.to_string(), |i| i.name.clone()),
        owner: info.and_then(|i| i.owner.clone()),
        month,
        spent,
        budget: budget.map(|b| Money::from_decimal(b.budget.amount)),
        forecast,
        trend,
        by_namespace,
        by_model,
        idle,
        idle_monthly,
        low_efficiency,
        unit_costs,
        quota,
        wait,
    })
}
