//! The idle-waste list (闲置清单, SPEC §7): pods that hold GPUs and memory while barely using them, with what
//! that costs a month. The rule and the ranking here are pure (per-pod sums in, the list out); `report` loads
//! the sums and rates.

mod budget;
mod fragmentation;
mod report;
mod utilization;

pub use budget::{Basis, crossings, forecast};
pub use fragmentation::{Fragmentation, NodeFree, NodeHourSums, fragmentation};
pub use report::{idle_report, month_utilization, statement_extras};
pub use utilization::{DayFigures, DayTeamSums, Figures, TeamFigures, UtilizationReport, utilization_report};

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
    /// cards × rate × 730 h: what holding these cards costs a month.
    pub monthly_waste: Money,
}

/// The pods of `usage` that `rule` calls idle, most money wasted first. A pod without any metered time is not
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
            let monthly_waste = p.rate.map_or(Money::ZERO, |r| r.amount(cards * Decimal::from(HOURS_PER_MONTH)));
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
                monthly_waste,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.monthly_waste
            .cmp(&a.monthly_waste)
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
        // 4 cards × 10 yuan × 730 h = 29,200.00
        assert_eq!(list[0].monthly_waste.to_string(), "29200.00");
        assert_eq!(list[0].hours_held, 24.0);
        // the short-term rule is looser: 15 %
        assert_eq!(idle_list(&[pod("x", 1.0, 0.12, Some(2048.0), None)], IdleRule::SHORT_TERM, true).len(), 1);
        assert!(idle_list(&[pod("x", 1.0, 0.12, Some(2048.0), None)], IdleRule::WEEKLY, true).is_empty());
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
