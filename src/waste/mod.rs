//! The idle-waste list (闲置清单, SPEC §7): pods that hold GPUs and memory while barely using them, with the money
//! actually spent idle in the window and, for pods still running, what holding their cards costs a month. The rule and the ranking here are pure (per-pod sums in, the list out); `report` loads
//! the sums and rates.

mod budget;
mod fragmentation;
mod report;
mod utilization;

pub use budget::{Basis, crossings, forecast};
pub use fragmentation::{Fragmentation, NodeFree, NodeHourSums, fragmentation};
pub use report::{extras_for, idle_report, month_extras, month_utilization, statement_extras};
pub use utilization::{
    CapacitySeconds, DayFigures, DayTeamSums, Figures, TeamFigures, UtilizationReport, utilization_report,
};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::money::{Money, RatePerCardHour};

/// Hours in an average month (8760 / 12): the SPEC's "hours in a month" for the monthly waste.
pub const HOURS_PER_MONTH: u32 = 730;

/// When a pod counts as idle.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IdleRule {
    /// Average utilization below this share (0–1) of what it holds, over the metered time.
    pub max_utilization: f64,
    /// Peak GPU memory used above this many MiB: it holds the card, it is not merely scheduled.
    pub min_memory_mib: f64,
}

impl IdleRule {
    /// SPEC §7: 7-day average under 10 % with more than 1 GiB of memory held.
    pub const WEEKLY: IdleRule = IdleRule { max_utilization: 0.10, min_memory_mib: 1024.0 };
    /// SPEC §7's short-term alert: 2-hour average under 15 % with memory held.
    pub const SHORT_TERM: IdleRule = IdleRule { max_utilization: 0.15, min_memory_mib: 1024.0 };

    pub fn validate(self) -> Result<IdleRule, (&'static str, String)> {
        if !(self.max_utilization.is_finite() && (0.0..=1.0).contains(&self.max_utilization)) {
            return Err(("max_utilization", "must be between 0 and 1".into()));
        }
        if !(self.min_memory_mib.is_finite() && self.min_memory_mib >= 0.0) {
            return Err(("min_memory_mib", "must be 0 or more".into()));
        }
        Ok(self)
    }
}

/// What is stored about one pod over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub owner: Option<String>,
    /// Pricing key of the GPU model it holds most of.
    pub gpu_model: String,
    /// Cards held (units × fraction, the largest in the window).
    pub cards: f64,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    pub peak_fb_used_mib: Option<f64>,
    /// It still held cards in the window's last hour.
    pub still_running: bool,
    /// The current rate of its model; `None` when the model has no rate.
    pub rate: Option<RatePerCardHour>,
}

/// One entry of the idle-waste list.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IdlePod {
    pub cluster: String,
    pub team: String,
    pub owner: Option<String>,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    pub cards_held: f64,
    pub hours_held: f64,
    /// Effective ÷ metered GPU-hours.
    pub average_utilization: f64,
    pub peak_fb_used_mib: f64,
    pub still_running: bool,
    pub rate: Option<RatePerCardHour>,
    /// Money actually spent idle in the window: held card-hours × rate × (1 − utilization). The list is ranked
    /// and totalled by it.
    pub idle_spend: Money,
    /// A projection, for pods still running: cards × rate × 730 h, what holding these cards costs a month.
    /// `null` for a pod that has ended (it costs nothing more).
    pub monthly_projection: Option<Money>,
    /// Deprecated: `monthly_projection`, and 0 for an ended pod (before, ended pods projected too).
    pub monthly_waste: Money,
}

/// What an idle list adds up to: the money actually spent idle (the figure to total), and the projection of the
/// pods still running.
pub fn idle_totals(list: &[IdlePod]) -> (Money, Money) {
    let spent = list.iter().map(|p| p.idle_spend).sum();
    let projected = list.iter().filter_map(|p| p.monthly_projection).sum();
    (spent, projected)
}

/// The pods of `usage` that `rule` calls idle, most money spent idle first. A pod without any metered time is not
/// judged (its utilization is unknown, not 0 %).
pub fn idle_list(usage: &[PodUsage], rule: IdleRule, only_running: bool) -> Vec<IdlePod> {
    let mut out: Vec<IdlePod> = usage
        .iter()
        .filter(|p| !only_running || p.still_running)
        .filter_map(|p| {
            let metered = p.gpu_seconds - p.unmetered_gpu_seconds;
            let memory = p.peak_fb_used_mib?;
            if metered <= 0.0 || p.cards <= 0.0 || memory <= rule.min_memory_mib {
                return None;
            }
            let utilization = p.effective_gpu_seconds / metered;
            if utilization >= rule.max_utilization {
                return None;
            }
            let cards = Decimal::from_f64_retain(p.cards).unwrap_or_default().round_dp(6);
            let idle_card_hours =
                Decimal::from_f64_retain(p.gpu_seconds / 3600.0 * (1.0 - utilization)).unwrap_or_default().round_dp(6);
            let idle_spend = p.rate.map_or(Money::ZERO, |r| r.amount(idle_card_hours));
            let monthly_projection = p
                .still_running
                .then(|| p.rate.map_or(Money::ZERO, |r| r.amount(cards * Decimal::from(HOURS_PER_MONTH))));
            Some(IdlePod {
                cluster: p.cluster.clone(),
                team: p.team.clone(),
                owner: p.owner.clone(),
                namespace: p.namespace.clone(),
                pod: p.pod.clone(),
                gpu_model: p.gpu_model.clone(),
                cards_held: p.cards,
                hours_held: p.gpu_seconds / p.cards / 3600.0,
                average_utilization: utilization,
                peak_fb_used_mib: memory,
                still_running: p.still_running,
                rate: p.rate,
                idle_spend,
                monthly_projection,
                monthly_waste: monthly_projection.unwrap_or(Money::ZERO),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.idle_spend
            .cmp(&a.idle_spend)
            .then_with(|| a.average_utilization.total_cmp(&b.average_utilization))
            .then_with(|| (&a.namespace, &a.pod, &a.cluster).cmp(&(&b.namespace, &b.pod, &b.cluster)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    fn pod(name: &str, cards: f64, util: f64, fb: Option<f64>, rate: Option<Decimal>) -> PodUsage {
        let held = cards * 3600.0 * 24.0;
        PodUsage {
            cluster: "c".into(),
            namespace: "ns".into(),
            pod: name.into(),
            team: "t".into(),
            owner: None,
            gpu_model: "A100-80GB".into(),
            cards,
            gpu_seconds: held,
            effective_gpu_seconds: held * util,
            unmetered_gpu_seconds: 0.0,
            peak_fb_used_mib: fb,
            still_running: true,
            rate: rate.and_then(RatePerCardHour::new),
        }
    }

    #[test]
    fn idle_pods_are_ranked_by_money_not_percent() {
        let usage = [
            pod("busy", 8.0, 0.6, Some(70_000.0), Some(dec!(10))),
            pod("one-card-idle", 1.0, 0.01, Some(20_000.0), Some(dec!(10))),
            pod("four-cards-idle", 4.0, 0.05, Some(40_000.0), Some(dec!(10))),
            pod("no-memory", 2.0, 0.0, Some(500.0), Some(dec!(10))),
            pod("no-dcgm", 2.0, 0.0, None, Some(dec!(10))),
        ];
        let list = idle_list(&usage, IdleRule::WEEKLY, true);
        let names: Vec<&str> = list.iter().map(|p| p.pod.as_str()).collect();
        assert_eq!(names, ["four-cards-idle", "one-card-idle"]);
        // spent idle: 4 cards × 24 h × 10 yuan × (1 − 0.05) = 912.00; 1 × 24 × 10 × 0.99 = 237.60
        assert_eq!(list[0].idle_spend.to_string(), "912.00");
        assert_eq!(list[1].idle_spend.to_string(), "237.60");
        // projected for a pod still running: 4 cards × 10 yuan × 730 h = 29,200.00
        assert_eq!(list[0].monthly_projection.map(|m| m.to_string()).as_deref(), Some("29200.00"));
        assert_eq!(idle_totals(&list), (Money::round_fen(dec!(1149.60)), Money::round_fen(dec!(36500.00))));
        assert_eq!(list[0].hours_held, 24.0);
        // the short-term rule is looser: 15 %
        assert_eq!(idle_list(&[pod("x", 1.0, 0.12, Some(2048.0), None)], IdleRule::SHORT_TERM, true).len(), 1);
        assert!(idle_list(&[pod("x", 1.0, 0.12, Some(2048.0), None)], IdleRule::WEEKLY, true).is_empty());
    }

    #[test]
    fn an_ended_pod_has_spent_but_projects_nothing() {
        // a big pod idle for a day that has ended, and a small one still running: the ended one spent more and
        // ranks first; only the running one projects a month
        let mut ended = pod("ended", 8.0, 0.02, Some(30_000.0), Some(dec!(10)));
        ended.still_running = false;
        let running = pod("running", 1.0, 0.02, Some(30_000.0), Some(dec!(10)));
        let list = idle_list(&[running, ended], IdleRule::WEEKLY, false);
        assert_eq!(list.iter().map(|p| p.pod.as_str()).collect::<Vec<_>>(), ["ended", "running"]);
        assert_eq!(list[0].idle_spend.to_string(), "1881.60");
        assert_eq!(list[0].monthly_projection, None);
        assert!(list[0].monthly_waste.is_zero());
        assert_eq!(list[1].monthly_projection.map(|m| m.to_string()).as_deref(), Some("7300.00"));
    }

    #[test]
    fn unmetered_time_is_not_idle_time() {
        let mut p = pod("dark", 1.0, 0.0, Some(9_000.0), None);
        p.unmetered_gpu_seconds = p.gpu_seconds;
        assert!(idle_list(&[p], IdleRule::WEEKLY, true).is_empty());
    }

    #[test]
    fn rules_are_checked() {
        assert!(IdleRule { max_utilization: 1.5, min_memory_mib: 0.0 }.validate().is_err());
        assert!(IdleRule { max_utilization: 0.1, min_memory_mib: -1.0 }.validate().is_err());
        assert!(IdleRule::WEEKLY.validate().is_ok());
    }
}
