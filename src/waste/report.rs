//! Loading the idle-waste list: per-pod sums from the database, priced at the rate in force at the window's end.

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use std::collections::BTreeMap;

use super::{CapacitySeconds, IdlePod, IdleRule, PodUsage, UtilizationReport, idle_list, utilization_report};
use crate::billing::Month;
use crate::db::{self, usage::Scope};
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

/// What a month's PDF statement shows `scope` besides the bills: the idle pods of its teams in the period's last 7
/// days (up to now for an open month); for a global scope only, the finance summary and the month's utilization
/// (cluster-wide figures a team lead must not see).
pub async fn statement_extras(
    pool: &PgPool,
    month: Month,
    billing_tz: chrono_tz::Tz,
    scope: &Scope,
) -> Result<crate::export::StatementExtras, sqlx::Error> {
    // the week up to the period's end, or up to the newest stored hour when the month is still being ingested
    let end = month.bounds(billing_tz).1.min(crate::ingest::window::floor_hour(Utc::now()));
    let end = db::waste::stored_until(pool, end).await?.map_or(end, |until| until.min(end));
    let idle = idle_report(pool, end, 168, IdleRule::WEEKLY, false, scope, billing_tz).await?;
    let global = scope.teams.is_none();
    let utilization = if global { Some(month_utilization(pool, month).await?.totals) } else { None };
    Ok(crate::export::StatementExtras { idle, utilization, finance_summary: global })
}
