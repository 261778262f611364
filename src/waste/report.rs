//! Loading the idle-waste list: per-pod sums from the database, priced at the rate in force at the window's end;
//! and a statement's PDF extras (the idle list and the month's utilization): computed now, or as its close froze them.

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use std::collections::BTreeMap;

use super::{CapacitySeconds, IdlePod, IdleRule, PodUsage, UtilizationReport, idle_list, utilization_report};
use crate::billing::Month;
use crate::db::{self, usage::Scope};
use crate::export::{FrozenExtras, StatementExtras};
use crate::ledger::Statement;
use crate::pricing::{ModelCatalog, RateHistory};

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
    let mut conn = pool.acquire().await?;
    let catalog = ModelCatalog::with_overrides(db::rates::aliases(&mut conn).await?);
    // a stored history that no longer validates prices nothing rather than failing the list
    let history = RateHistory::new(db::rates::versions(&mut conn).await?).unwrap_or_default();
    let day = (to - Duration::milliseconds(1)).with_timezone(&billing_tz).date_naive();
    let usage: Vec<PodUsage> = pods
        .into_iter()
        .map(|p| {
            let model = catalog.key_for(&p.gpu_model);
            PodUsage {
                rate: history.rate_at(&model, day),
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

/// What a month's PDF statement shows `scope` besides the bills, computed now: the idle pods of its teams in the
/// period's last 7 days (up to now for an open month); for a global scope only, the finance summary and the
/// month's utilization (cluster-wide figures a team lead must not see).
pub async fn statement_extras(
    pool: &PgPool,
    month: Month,
    billing_tz: chrono_tz::Tz,
    scope: &Scope,
) -> Result<StatementExtras, sqlx::Error> {
    let end = extras_end(pool, month, billing_tz).await?;
    let idle = idle_report(pool, end, 168, IdleRule::WEEKLY, false, scope, billing_tz).await?;
    let global = scope.teams.is_none();
    let utilization = if global { Some((&month_utilization(pool, month).await?.totals).into()) } else { None };
    Ok(StatementExtras { idle: idle.iter().map(Into::into).collect(), utilization, finance_summary: global })
}

/// The extras of every team, as a close freezes them: the same figures [`statement_extras`] gives a global reader.
pub async fn month_extras(pool: &PgPool, month: Month, billing_tz: chrono_tz::Tz) -> Result<FrozenExtras, sqlx::Error> {
    let end = extras_end(pool, month, billing_tz).await?;
    let idle = idle_report(pool, end, 168, IdleRule::WEEKLY, false, &Scope::all(), billing_tz).await?;
    let utilization = (&month_utilization(pool, month).await?.totals).into();
    Ok(FrozenExtras { idle: idle.iter().map(Into::into).collect(), utilization })
}

/// The extras of `st`'s PDF for `scope`: what its close froze; computed now for an open month and for a month
/// closed under layout 1 (its close froze none: its PDF shows them as the release before layouts did).
pub async fn extras_for(
    pool: &PgPool,
    st: &Statement,
    billing_tz: chrono_tz::Tz,
    scope: &Scope,
) -> Result<StatementExtras, sqlx::Error> {
    match crate::export::pdf_extras(st, scope) {
        Some(frozen) => Ok(frozen),
        None => statement_extras(pool, st.month, billing_tz, scope).await,
    }
}
