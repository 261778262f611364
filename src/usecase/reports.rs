//! Reports: the pods that wasted the most GPU-hours, a month's utilization per day and team, the team ranking by
//! efficiency, and the fragmentation of free capacity in an hour.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::{Month, PolicyChoice};
use crate::db;
use crate::money::Money;
use crate::waste::{CapacitySeconds, Fragmentation, PodSums, UtilizationReport, WastefulPod, utilization_report};

/// The `top` pods of `[from, to)` with the most wasted GPU-hours within `scope`, priced at the rates in force at
/// the range's end (as the idle list is).
pub async fn low_utilization(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    top: i64,
) -> Result<Vec<WastefulPod>, Error> {
    let pods = db::reports::most_wasteful_pods(&s.pool, from, to, top, scope).await?;
    let book = super::idle::rate_book(s).await?;
    let day = super::idle::pricing_day(to, s.billing_tz);
    Ok(pods
        .into_iter()
        .map(|t| {
            let (gpu_model, rate) = book.price(&t.gpu_model, day);
            crate::waste::wasteful_pod(PodSums {
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

/// The utilization report of a month (billing days, all clusters): what the cluster-wide views and a close read.
pub(super) async fn month_utilization_of(s: &Services, month: Month) -> Result<UtilizationReport, Error> {
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
    Ok(utilization_report(&usage, &capacity))
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
    Ok(crate::waste::fragmentation(&nodes))
}

/// Oversubscription (SPEC §7) per node, GPU model and cluster per day over `[from, to)`; cluster-wide readers only.
pub async fn oversubscription(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    cluster: Option<&str>,
) -> Result<crate::waste::OversubscriptionReport, Error> {
    global_only(scope)?;
    Ok(db::oversubscription::report(&s.pool, from, to, s.billing_tz, cluster).await?)
}
