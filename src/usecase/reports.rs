//! Reports: the pods that wasted the most GPU-hours, a month's utilization per day and team, the team ranking by
//! efficiency, the fragmentation of free capacity in an hour and oversubscription per day — with the ranges and
//! hours each one is asked for (the API and the pages default and check them alike).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::db;
use crate::ingest::window::floor_hour;
use crate::money::Money;
use crate::validate::{self, ClusterName, Invalid, TimeInput};
use crate::waste::{CapacitySeconds, Fragmentation, PodSums, UtilizationReport, WastefulPod, utilization_report};

/// How many pods the low-utilization top N lists unless asked.
pub const DEFAULT_TOP: i64 = 10;

/// The range of the low-utilization top N: `to` (default: the hour `now` is in), `from` (default: 7 days before
/// `to`), at most [`validate::MAX_POD_RANGE_DAYS`] long (one row per pod), and `top` (1–500, default 10).
pub fn low_utilization_range(
    from: Option<TimeInput>,
    to: Option<TimeInput>,
    top: Option<i64>,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>, i64), Invalid> {
    let to = to.map(|t| t.resolve("to", tz)).transpose()?.unwrap_or_else(|| floor_hour(now));
    let from = from.map(|t| t.resolve("from", tz)).transpose()?.unwrap_or(to - Duration::days(7));
    validate::range(from, to, validate::MAX_POD_RANGE_DAYS)?;
    let top = validate::bounded("top", top.unwrap_or(DEFAULT_TOP), 1, validate::TOP_MAX)?;
    Ok((from, to, top))
}

/// The range of the oversubscription report: `to` (default: the hour `now` is in) and `from` (default: 7 days
/// before `to`), `from` before `to`.
pub fn oversubscription_range(
    from: Option<TimeInput>,
    to: Option<TimeInput>,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), Invalid> {
    let to = match to.map(|t| t.resolve("to", tz)).transpose()? {
        Some(t) => validate::instant("to", t)?,
        None => floor_hour(now),
    };
    let from = match from.map(|t| t.resolve("from", tz)).transpose()? {
        Some(f) => validate::instant("from", f)?,
        None => to - Duration::days(7),
    };
    if from >= to {
        return Err(Invalid::new("from", "must be before `to`"));
    }
    Ok((from, to))
}

/// The hour the fragmentation report judges: a whole hour as asked, or `None` (the newest stored hour).
pub fn fragmentation_hour(hour: Option<TimeInput>, tz: chrono_tz::Tz) -> Result<Option<DateTime<Utc>>, Invalid> {
    match hour.map(|h| h.resolve("hour", tz)).transpose()? {
        Some(h) if floor_hour(h) != h => Err(Invalid::new("hour", "must be a whole hour")),
        Some(h) => Ok(Some(validate::instant("hour", h)?)),
        None => Ok(None),
    }
}

/// The `top` pods of `[from, to)` with the most wasted GPU-hours within `scope`, priced at the rates in force at
/// the range's end (as the idle list is).
pub async fn low_utilization(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    top: i64,
) -> Result<Vec<WastefulPod>, Error> {
    let key = (from, to, top, scope.teams.clone());
    // kept until the data changes: every team home reads its month's list
    let list =
        s.low_utilization.get_or_compute(&s.pool, key, async || compute_low_utilization(s, scope, from, to, top).await);
    Ok(list.await?.as_ref().clone())
}

/// What a low-utilization list's answer depends on besides the stored data: range, length, the caller's teams.
pub type LowUtilizationKey = (DateTime<Utc>, DateTime<Utc>, i64, Option<Vec<String>>);

async fn compute_low_utilization(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    top: i64,
) -> Result<Vec<WastefulPod>, Error> {
    let pods = db::reports::most_wasteful_pods(&s.pool, from, to, top, scope).await?;
    let book = super::idle::rate_book(s).await?;
    let day = super::idle::pricing_day(to, s.billing_tz);
    let range_seconds = (to - from).num_seconds();
    Ok(pods
        .into_iter()
        .map(|t| {
            let (gpu_model, rate) = book.price(&t.gpu_model, day);
            crate::waste::wasteful_pod(
                PodSums {
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
                },
                range_seconds,
            )
        })
        .collect())
}

/// The utilization report of a month (billing days, all clusters): what the cluster-wide views and a close read.
pub(super) async fn month_utilization_of(s: &Services, month: Month) -> Result<UtilizationReport, Error> {
    let compute = async || {
        let (from, to) = (month.first_day(), month.next().first_day());
        let usage = db::reports::usage_by_day_team(&s.pool, from, to).await?;
        let mut capacity: BTreeMap<_, CapacitySeconds> = BTreeMap::new();
        for c in db::bills::capacity_by_day(&s.pool, from, to).await? {
            *capacity.entry(c.day).or_default() +=
                CapacitySeconds { capacity: c.card_seconds, offered: c.offered_card_seconds };
        }
        let usage: Vec<_> = usage
            .into_iter()
            .map(|u| (u.day, u.team, u.gpu_seconds, u.effective_gpu_seconds, u.unmetered_gpu_seconds))
            .collect();
        Ok::<_, Error>(utilization_report(&usage, &capacity))
    };
    // kept until the data changes, as the statements are: every home and report view reads it
    Ok(s.utilization.get_or_compute(&s.pool, month, compute).await?.as_ref().clone())
}

/// The month's allocation rate, utilization and effective rate, per billing day and per team (global readers).
pub async fn month_utilization(s: &Services, scope: &Scope, month: Month) -> Result<UtilizationReport, Error> {
    global_only(scope)?;
    month_utilization_of(s, month).await
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TeamRank {
    /// 1 = the most efficient.
    pub rank: usize,
    pub team: String,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    /// Effective ÷ metered GPU-hours; teams without metered time rank last.
    pub utilization: Option<f64>,
    /// The team's total on the month's statement.
    pub cost: Money,
}

/// Teams ranked by efficiency (utilization), with GPU-hours, effective GPU-hours and cost (global readers).
pub async fn team_ranking(s: &Services, scope: &Scope, month: Month) -> Result<Vec<TeamRank>, Error> {
    let report = month_utilization(s, scope, month).await?;
    let st = super::statements::statement(s, month, PolicyChoice::NONE).await?;
    let mut teams = report.teams;
    teams.sort_by(|a, b| {
        b.utilization.unwrap_or(-1.0).total_cmp(&a.utilization.unwrap_or(-1.0)).then_with(|| a.team.cmp(&b.team))
    });
    Ok(teams
        .into_iter()
        .enumerate()
        .map(|(i, t)| TeamRank {
            rank: i + 1,
            cost: st.team_total(&t.team),
            team: t.team,
            gpu_hours: t.gpu_hours,
            effective_gpu_hours: t.effective_gpu_hours,
            utilization: t.utilization,
        })
        .collect())
}

/// Free cards per node in `hour` (default: the newest stored hour), the largest free whole-card block and how
/// fragmented free capacity is (global readers).
pub async fn fragmentation(s: &Services, scope: &Scope, hour: Option<DateTime<Utc>>) -> Result<Fragmentation, Error> {
    Ok(fragmentation_at(s, scope, hour).await?.1)
}

/// [`fragmentation`] with the hour it judged.
pub async fn fragmentation_at(
    s: &Services,
    scope: &Scope,
    hour: Option<DateTime<Utc>>,
) -> Result<(DateTime<Utc>, Fragmentation), Error> {
    global_only(scope)?;
    let hour = match hour {
        Some(h) => h,
        None => db::reports::newest_hour_before(&s.pool, Utc::now())
            .await?
            .ok_or_else(|| Error::NotFound("any stored hour".into()))?,
    };
    let nodes: Vec<_> = db::reports::nodes_in_hour(&s.pool, hour)
        .await?
        .into_iter()
        .map(|n| (n.cluster, n.node, n.gpu_model, n.cards, n.allocated_seconds))
        .collect();
    Ok((hour, crate::waste::fragmentation(&nodes)))
}

/// Oversubscription (SPEC §7) per node, GPU model and cluster per day over `[from, to)`; cluster-wide readers only.
pub async fn oversubscription(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&ClusterName>,
) -> Result<crate::waste::OversubscriptionReport, Error> {
    global_only(scope)?;
    Ok(db::oversubscription::report(&s.pool, from, to, s.billing_tz, cluster).await?)
}

/// How a month's time-sliced replicas were billed, beside its oversubscription: the settings in effect and what
/// whole-card billing recovered above the cards' cost — the month's statement's own figures.
#[derive(Debug, Clone, PartialEq)]
pub struct MonthReplicaBilling {
    pub month: Month,
    /// The dated settings in effect (none: every replica at its fraction, the default).
    pub policies: Vec<crate::billing::ReplicaPolicyVersion>,
    /// `None` when nothing was billed as whole cards.
    pub over_recovery: Option<Money>,
}

/// How many months [`replica_billing`] reads at most: the newest of a longer range.
pub const REPLICA_BILLING_MONTHS: usize = 12;

/// The replica billing of the billing months `[from, to)` touches (the newest [`REPLICA_BILLING_MONTHS`] of
/// them), oldest first (global readers).
pub async fn replica_billing(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MonthReplicaBilling>, Error> {
    global_only(scope)?;
    let first = Month::containing(from, s.billing_tz);
    let mut month = Month::containing(to - Duration::milliseconds(1), s.billing_tz);
    let mut out = Vec::new();
    while month >= first && out.len() < REPLICA_BILLING_MONTHS {
        let st = super::statements::statement(s, month, PolicyChoice::NONE).await?;
        out.push(MonthReplicaBilling {
            month,
            policies: st.bills.replica_policies.clone().unwrap_or_default(),
            over_recovery: st.bills.over_recovery,
        });
        month = month.prev();
    }
    out.reverse();
    Ok(out)
}
