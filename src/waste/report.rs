//! Loading the idle-waste list: per-pod sums from the database, priced at the rate in force at the window's end;
//! and a statement's PDF extras (the idle list and the month's utilization): computed now, or as its close froze them.

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use std::collections::BTreeMap;

use super::{
    CapacitySeconds, IdlePod, IdleRule, PodSums, PodUsage, UtilizationReport, WastefulPod, idle_list,
    utilization_report, wasteful_pod,
};
use crate::billing::Month;
use crate::db::{self, usage::Scope};
use crate::export::{Coverage, FrozenExtras, Layout, PreviousMonth, StatementExtras};
use crate::ledger::Statement;
use crate::money::RatePerCardHour;
use crate::pricing::{ModelCatalog, RateHistory};

/// Prices pods at the rate in force on one billing day: the stored aliases and rate history.
struct Pricer {
    catalog: ModelCatalog,
    history: RateHistory,
    day: chrono::NaiveDate,
}

impl Pricer {
    /// The rates in force on the billing day of the last instant before `to`.
    async fn at(pool: &PgPool, to: DateTime<Utc>, billing_tz: chrono_tz::Tz) -> Result<Pricer, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        let catalog = ModelCatalog::with_overrides(db::rates::aliases(&mut conn).await?);
        // a stored history that no longer validates prices nothing rather than failing the list
        let history = RateHistory::new(db::rates::versions(&mut conn).await?).unwrap_or_default();
        let day = (to - Duration::milliseconds(1)).with_timezone(&billing_tz).date_naive();
        Ok(Pricer { catalog, history, day })
    }

    /// The pricing key of a stored model name and its rate.
    fn price(&self, gpu_model: &str) -> (String, Option<RatePerCardHour>) {
        let model = self.catalog.key_for(gpu_model);
        let rate = self.history.rate_at(&model, self.day);
        (model, rate)
    }
}

/// The idle pods of the `hours` before `to` (a whole hour), within `scope`, priced in `billing_tz`.
pub async fn idle_report(
    pool: &PgPool,
    to: DateTime<Utc>,
    hours: u32,
    rule: IdleRule,
    only_running: bool,
    scope: &Scope,
    billing_tz: chrono_tz::Tz,
) -> Result<Vec<IdlePod>, sqlx::Error> {
    let from = to - Duration::hours(i64::from(hours));
    let pods = db::waste::pods(pool, from, to, scope).await?;
    let pricer = Pricer::at(pool, to, billing_tz).await?;
    let usage: Vec<PodUsage> = pods
        .into_iter()
        .map(|p| {
            let (model, rate) = pricer.price(&p.gpu_model);
            PodUsage {
                rate,
                cluster: p.cluster,
                namespace: p.namespace,
                pod: p.pod,
                team: p.team,
                owner: p.owner,
                gpu_model: model,
                cards: p.cards,
                gpu_seconds: p.gpu_seconds,
                effective_gpu_seconds: p.effective_gpu_seconds,
                unmetered_gpu_seconds: p.unmetered_gpu_seconds,
                peak_fb_used_mib: p.peak_fb_used_mib,
                still_running: p.still_running,
            }
        })
        .collect();
    Ok(idle_list(&usage, rule, only_running))
}

/// The `top` pods of `[from, to)` with the most wasted GPU-hours within `scope`, priced at the rates in force at
/// the range's end (as the idle list is).
pub async fn low_utilization(
    pool: &PgPool,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    top: i64,
    scope: &Scope,
    billing_tz: chrono_tz::Tz,
) -> Result<Vec<WastefulPod>, sqlx::Error> {
    let pods = db::reports::most_wasteful_pods(pool, from, to, top, scope).await?;
    let pricer = Pricer::at(pool, to, billing_tz).await?;
    Ok(pods
        .into_iter()
        .map(|t| {
            let (gpu_model, rate) = pricer.price(&t.gpu_model);
            wasteful_pod(PodSums {
                cluster: t.cluster,
                namespace: t.namespace,
                pod: t.pod,
                team: t.team,
                owner: t.owner,
                gpu_model,
                gpu_seconds: t.gpu_seconds,
                effective_gpu_seconds: t.effective_gpu_seconds,
                unmetered_gpu_seconds: t.unmetered_gpu_seconds,
                rate,
            })
        })
        .collect())
}

/// The utilization report of a month (billing days, all clusters).
pub async fn month_utilization(pool: &PgPool, month: Month) -> Result<UtilizationReport, sqlx::Error> {
    let (from, to) = (month.first_day(), month.next().first_day());
    let usage = db::reports::usage_by_day_team(pool, from, to).await?;
    let mut capacity: BTreeMap<_, CapacitySeconds> = BTreeMap::new();
    for c in db::bills::capacity_by_day(pool, from, to).await? {
        *capacity.entry(c.day).or_default() +=
            CapacitySeconds { capacity: c.card_seconds, offered: c.offered_card_seconds };
    }
    let usage: Vec<_> = usage
        .into_iter()
        .map(|u| (u.day, u.team, u.gpu_seconds, u.effective_gpu_seconds, u.unmetered_gpu_seconds))
        .collect();
    Ok(utilization_report(&usage, &capacity))
}

/// The week a month's extras cover: the 7 days up to the period's end, or up to the newest stored hour when the
/// month is still being ingested.
async fn extras_end(pool: &PgPool, month: Month, billing_tz: chrono_tz::Tz) -> Result<DateTime<Utc>, sqlx::Error> {
    let end = month.bounds(billing_tz).1.min(crate::ingest::window::floor_hour(Utc::now()));
    Ok(db::waste::stored_until(pool, end).await?.map_or(end, |until| until.min(end)))
}

/// Each cluster's data coverage of the month: hours ingested against hours elapsed (up to the month's end, or the
/// current hour of an unfinished month).
pub async fn month_coverage(
    pool: &PgPool,
    month: Month,
    billing_tz: chrono_tz::Tz,
) -> Result<Vec<Coverage>, sqlx::Error> {
    let (from, to) = month.bounds(billing_tz);
    let elapsed_to = to.min(crate::ingest::window::floor_hour(Utc::now()) + Duration::hours(1)).max(from);
    let hours_elapsed = u32::try_from((elapsed_to - from).num_hours()).unwrap_or(0);
    Ok(db::reports::coverage(pool, from, to)
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
async fn month_budgets(
    pool: &PgPool,
    month: Month,
    scope: &Scope,
) -> Result<BTreeMap<String, crate::money::Money>, sqlx::Error> {
    Ok(db::budgets::for_month(pool, &month.to_string(), scope)
        .await?
        .into_iter()
        .map(|b| (b.team_id, crate::money::Money::from_decimal(b.amount)))
        .collect())
}

/// The previous month's team totals (of `scope`), as its statement reads now; `None` when it has no team.
async fn previous_month(
    pool: &PgPool,
    month: Month,
    scope: &Scope,
) -> Result<Option<PreviousMonth>, crate::ledger::LedgerError> {
    let prev = month.prev();
    let st = crate::ledger::statement(pool, prev, crate::billing::PolicyChoice::NONE).await?;
    let teams: BTreeMap<_, _> =
        st.team_ids().into_iter().filter(|t| scope.allows(t)).map(|t| (t.to_string(), st.team_total(t))).collect();
    Ok((!teams.is_empty()).then(|| PreviousMonth {
        month: prev,
        closed: st.status == crate::ledger::MonthStatus::Closed,
        teams,
    }))
}

/// What a month's PDF statement shows `scope` besides the bills, computed now: the idle pods of its teams in the
/// period's last 7 days (up to now for an open month); for a global scope only, the finance summary and the
/// month's utilization (cluster-wide figures a team lead must not see); from layout 3 on also the coverage, the
/// budgets and the previous month.
pub async fn statement_extras(
    pool: &PgPool,
    month: Month,
    layout: Layout,
    billing_tz: chrono_tz::Tz,
    scope: &Scope,
) -> Result<StatementExtras, crate::ledger::LedgerError> {
    let end = extras_end(pool, month, billing_tz).await?;
    let idle = idle_report(pool, end, 168, IdleRule::WEEKLY, false, scope, billing_tz).await?;
    let global = scope.teams.is_none();
    let utilization = if global { Some((&month_utilization(pool, month).await?.totals).into()) } else { None };
    let mut extras = StatementExtras {
        idle: idle.iter().map(Into::into).collect(),
        utilization,
        finance_summary: global,
        ..Default::default()
    };
    if layout >= Layout::V3 {
        extras.coverage = month_coverage(pool, month, billing_tz).await?;
        extras.budgets = month_budgets(pool, month, scope).await?;
        extras.previous = previous_month(pool, month, scope).await?;
    }
    Ok(extras)
}

/// The extras of every team, as a close freezes them: the same figures [`statement_extras`] gives a global reader.
pub async fn month_extras(
    pool: &PgPool,
    month: Month,
    billing_tz: chrono_tz::Tz,
) -> Result<FrozenExtras, crate::ledger::LedgerError> {
    let end = extras_end(pool, month, billing_tz).await?;
    let idle = idle_report(pool, end, 168, IdleRule::WEEKLY, false, &Scope::all(), billing_tz).await?;
    let utilization = (&month_utilization(pool, month).await?.totals).into();
    let v3 = Layout::CURRENT >= Layout::V3;
    Ok(FrozenExtras {
        idle: idle.iter().map(Into::into).collect(),
        utilization,
        coverage: if v3 { Some(month_coverage(pool, month, billing_tz).await?) } else { None },
        budgets: if v3 { Some(month_budgets(pool, month, &Scope::all()).await?) } else { None },
        previous: if v3 { previous_month(pool, month, &Scope::all()).await? } else { None },
    })
}

/// The extras of `st`'s PDF for `scope`: what its close froze; computed now for an open month and for a month
/// closed under layout 1 (its close froze none: its PDF shows them as the release before layouts did).
pub async fn extras_for(
    pool: &PgPool,
    st: &Statement,
    billing_tz: chrono_tz::Tz,
    scope: &Scope,
) -> Result<StatementExtras, crate::ledger::LedgerError> {
    match crate::export::pdf_extras(st, scope) {
        Some(frozen) => Ok(frozen),
        None => statement_extras(pool, st.month, st.layout, billing_tz, scope).await,
    }
}
