//! What each team was promised and what its GPU pods waited (SPEC §10): a month's quota scopes — guaranteed,
//! used within the guarantee, borrowed, reserved idle card-hours — and its queue wait — Pending card-hours, pods
//! that waited among those first Running in the month, the median and p90 of their waits, pods that never ran —
//! per team within the caller's scope.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Error, Services};
use crate::access::Scope;
use crate::billing::Month;
use crate::db;
use crate::metering::{PodPhases, WaitStats, wait_stats};

fn hours(card_seconds: f64) -> f64 {
    card_seconds / 3600.0
}

/// A quota figure set in card-hours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QuotaHours {
    /// ∫ guaranteed quota dt.
    pub guaranteed_card_hours: f64,
    /// Used within the guarantee: min(used, guaranteed), hour by hour.
    pub used_within_card_hours: f64,
    /// Used above the guarantee: max(0, used − guaranteed), hour by hour.
    pub borrowed_card_hours: f64,
    /// Guaranteed and not used.
    pub reserved_idle_card_hours: f64,
}

impl QuotaHours {
    fn add(&mut self, s: &db::quota::ScopeSums) {
        self.guaranteed_card_hours += hours(s.guaranteed);
        self.used_within_card_hours += hours(s.used_within);
        self.borrowed_card_hours += hours(s.borrowed);
        self.reserved_idle_card_hours += hours(s.reserved_idle);
    }
}

/// One quota scope of a team in the month.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ScopeQuota {
    /// `namespace` (a ResourceQuota of a namespace in no queue), `cluster_queue` (Kueue) or `volcano_queue`.
    pub scope_kind: String,
    pub scope: String,
    #[serde(flatten)]
    pub figures: QuotaHours,
}

/// A team's quotas in the month: the sums over its scopes, each split hour by hour on its own.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TeamQuota {
    pub team: String,
    #[serde(flatten)]
    pub figures: QuotaHours,
    pub scopes: Vec<ScopeQuota>,
}

/// `GET /reports/quotas/{month}`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QuotaReport {
    /// YYYY-MM in the billing time zone.
    pub month: String,
    pub teams: Vec<TeamQuota>,
    /// Over the teams shown.
    pub total: QuotaHours,
}

/// The month's quotas per team within `scope`.
pub async fn quota_report(s: &Services, scope: &Scope, month: Month) -> Result<QuotaReport, Error> {
    let mut conn = s.pool.acquire().await?;
    let sums = db::quota::sums(&mut conn, month.bounds(s.billing_tz)).await?;
    let mut teams: BTreeMap<String, TeamQuota> = BTreeMap::new();
    let mut total = QuotaHours::default();
    for r in sums.iter().filter(|r| scope.allows(&r.team)) {
        let t = teams.entry(r.team.clone()).or_insert_with(|| TeamQuota {
            team: r.team.clone(),
            figures: QuotaHours::default(),
            scopes: Vec::new(),
        });
        let mut figures = QuotaHours::default();
        figures.add(r);
        t.figures.add(r);
        total.add(r);
        t.scopes.push(ScopeQuota { scope_kind: r.scope_kind.clone(), scope: r.scope.clone(), figures });
    }
    Ok(QuotaReport { month: month.to_string(), teams: teams.into_values().collect(), total })
}

/// A team's queue wait in the month.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TeamWait {
    pub team: String,
    /// ∫ q·f while Pending, over the month's hours.
    pub pending_card_hours: f64,
    /// GPU pods first Running in the month.
    pub pods_started: u64,
    /// Of those, the pods that waited (a wait > 0).
    pub pods_waited: u64,
    /// The median wait of the pods that waited, by nearest rank, in seconds.
    pub median_wait_seconds: Option<f64>,
    /// Their 90th percentile wait, by nearest rank, in seconds.
    pub p90_wait_seconds: Option<f64>,
    /// GPU pods last seen in the month without ever Running (counted apart).
    pub never_ran: u64,
}

impl TeamWait {
    fn new(team: String, pending_card_seconds: f64, stats: WaitStats) -> Self {
        let seconds = |ms: Option<i64>| ms.map(|ms| ms as f64 / 1000.0);
        TeamWait {
            team,
            pending_card_hours: hours(pending_card_seconds),
            pods_started: stats.pods_started,
            pods_waited: stats.pods_waited,
            median_wait_seconds: seconds(stats.median_wait_ms),
            p90_wait_seconds: seconds(stats.p90_wait_ms),
            never_ran: stats.never_ran,
        }
    }
}

/// `GET /reports/queue/{month}`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueueReport {
    /// YYYY-MM in the billing time zone.
    pub month: String,
    pub teams: Vec<TeamWait>,
    /// Over the teams shown (the percentiles over all their pods, not of the teams' percentiles).
    pub total: TeamWait,
}

/// The month's queue wait per team within `scope`.
pub async fn queue_report(s: &Services, scope: &Scope, month: Month) -> Result<QueueReport, Error> {
    let bounds = month.bounds(s.billing_tz);
    let mut conn = s.pool.acquire().await?;
    let pending = db::waits::pending_by_team(&mut conn, bounds).await?;
    let pods = db::waits::pod_waits(&mut conn, bounds).await?;
    let mut by_team: BTreeMap<String, (f64, Vec<PodPhases>)> = BTreeMap::new();
    for (team, seconds) in pending.into_iter().filter(|(t, _)| scope.allows(t)) {
        by_team.entry(team).or_default().0 += seconds;
    }
    for p in pods.into_iter().filter(|p| scope.allows(&p.team)) {
        by_team.entry(p.team).or_default().1.push(PodPhases {
            first_pending_ms: p.first_pending.map(|t| t.timestamp_millis()),
            first_running_ms: p.first_running.map(|t| t.timestamp_millis()),
            last_seen_ms: p.last_seen.timestamp_millis(),
        });
    }
    let total_pending = by_team.values().map(|(s, _)| s).sum::<f64>();
    let total = wait_stats(by_team.values().flat_map(|(_, pods)| pods.iter().filter_map(PodPhases::wait)));
    let teams = by_team
        .into_iter()
        .map(|(team, (seconds, pods))| {
            TeamWait::new(team, seconds, wait_stats(pods.iter().filter_map(PodPhases::wait)))
        })
        .collect();
    Ok(QueueReport { month: month.to_string(), teams, total: TeamWait::new("total".into(), total_pending, total) })
}
