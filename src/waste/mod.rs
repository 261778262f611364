//! The idle-waste list (闲置清单, SPEC §7): pods that hold GPUs and memory while barely using them, with the money
//! actually spent idle in the window and, for pods still running, what holding their cards costs a month. The rule and the ranking here are pure (per-pod sums in, the list out);
//! [`crate::usecase::idle`] loads the sums and rates.

mod budget;
mod capacity_plan;
mod fragmentation;
mod oversubscription;
mod utilization;

pub use budget::{Basis, Covered, covered_forecast, crossings, forecast};
pub use capacity_plan::{ReplayOutcome, ReplayPod, WhatIf, replay, schedule, what_if};
pub use fragmentation::{Fragmentation, NodeFree, NodeHourSums, fragmentation};
pub use oversubscription::{
    CapacityDay, HeldDay, OversubscriptionReport, OversubscriptionRow, oversubscription, promised_memory_seconds,
    promised_seconds,
};
pub use utilization::{
    CapacitySeconds, DayFigures, DayTeamSums, Figures, TeamFigures, UtilizationReport, utilization_report,
};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::money::{Money, RatePerCardHour, card_hours_from_seconds};

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

/// `x` rounded half away from zero to `dp` decimals, as the nearest `f64`: what a reader is shown of a measured
/// quantity (JSON prints `0.0984`, never `0.09838000000000002`). Non-finite values pass unchanged.
pub fn round_for_display(x: f64, dp: u32) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    Decimal::from_f64_retain(x)
        .map(|d| d.round_dp_with_strategy(dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero))
        .and_then(|d| d.to_f64())
        .unwrap_or(x)
}

/// Serializers rounding at the JSON boundary: card-hours and cards to 3 decimals, ratios to 4, MiB to 1.
mod shown {
    use serde::Serializer;

    use super::round_for_display;

    pub fn dp3<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round_for_display(*x, 3))
    }

    pub fn dp4<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round_for_display(*x, 4))
    }

    pub fn dp1<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round_for_display(*x, 1))
    }

    pub fn opt_dp4<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match x {
            Some(x) => s.serialize_some(&round_for_display(*x, 4)),
            None => s.serialize_none(),
        }
    }
}

/// One entry of the idle-waste list. Measured quantities are rounded in the JSON (cards and hours to 3 decimals,
/// utilization to 4, memory to 1); the figures behind the money are not.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IdlePod {
    pub cluster: String,
    pub team: String,
    pub owner: Option<String>,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    #[serde(serialize_with = "shown::dp3")]
    pub cards_held: f64,
    #[serde(serialize_with = "shown::dp3")]
    pub hours_held: f64,
    /// Effective ÷ metered GPU-hours.
    #[serde(serialize_with = "shown::dp4")]
    pub average_utilization: f64,
    #[serde(serialize_with = "shown::dp1")]
    pub peak_fb_used_mib: f64,
    pub still_running: bool,
    pub rate: Option<RatePerCardHour>,
    /// Money actually spent idle in the window: held (metered) card-hours × rate × (1 − utilization), the
    /// low-utilization report's `wasted_amount` for the same pod and window ([`idle_money`]). The list is ranked
    /// and totalled by it.
    pub idle_spend: Money,
    /// A projection, for pods still running: cards × rate × 730 h, what holding these cards costs a month.
    /// `null` for a pod that has ended (it costs nothing more).
    pub monthly_projection: Option<Money>,
    /// Deprecated: `monthly_projection`, and 0 for an ended pod (before, ended pods projected too).
    pub monthly_waste: Money,
}

/// What is stored about one pod over a range, for the low-utilization top N.
#[derive(Debug, Clone, PartialEq)]
pub struct PodSums {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub owner: Option<String>,
    /// Pricing key of the model of its last hour in the range.
    pub gpu_model: String,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    /// The rate of its model at the range's end; `None` when the model has no rate.
    pub rate: Option<RatePerCardHour>,
}

/// One row of the low-utilization top N: a pod's GPU-hours and what of them was measured idle, with its money.
/// Hours are rounded to 3 decimals and the utilization to 4 in the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WastefulPod {
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    /// The team's owner (负责人), when the team names one.
    pub owner: Option<String>,
    /// Pricing key of the GPU model of the pod's last hour in the range (`unknown` when no source named it).
    pub gpu_model: String,
    #[serde(serialize_with = "shown::dp3")]
    pub gpu_hours: f64,
    #[serde(serialize_with = "shown::dp3")]
    pub effective_gpu_hours: f64,
    #[serde(serialize_with = "shown::dp3")]
    pub unmetered_gpu_hours: f64,
    /// Metered GPU-hours − effective GPU-hours: what was held and measured idle (unmetered time is not counted).
    #[serde(serialize_with = "shown::dp3")]
    pub wasted_gpu_hours: f64,
    /// Effective ÷ metered GPU-hours (0–1); `null` without metered time.
    #[serde(serialize_with = "shown::opt_dp4")]
    #[schema(value_type = Option<f64>)]
    pub utilization: Option<f64>,
    /// The rate priced at: the model's at the range's end; `null` when the model has no rate.
    pub rate: Option<RatePerCardHour>,
    /// The money of the wasted GPU-hours: wasted card-hours × rate, to the fen (0 when unpriced).
    pub wasted_amount: Money,
    /// The same waste at a month's pace: wasted card-hours × 730 h ÷ the range's hours × rate, to the fen (0 when
    /// unpriced). A projection: what wasting like this for a month costs.
    pub wasted_per_month: Money,
}

/// What a pod spent idle over a window, the one figure the idle list and the low-utilization report print for it
/// (SPEC §7: held card-hours × rate × (1 − utilization)): the held card-hours that were metered, times one minus
/// the utilization measured over them — that is metered − effective card-hours (time without a utilization
/// sample is not judged: it is neither idle nor busy), × the rate, to the fen (0.00 unpriced). Returns the idle
/// card-hours and the money.
pub fn idle_money(
    gpu_seconds: f64,
    effective_gpu_seconds: f64,
    unmetered_gpu_seconds: f64,
    rate: Option<RatePerCardHour>,
) -> (Decimal, Money) {
    let metered = gpu_seconds - unmetered_gpu_seconds;
    let idle_card_hours = card_hours_from_seconds((metered - effective_gpu_seconds).max(0.0));
    // unpriced: 0.00, written with its two decimals like every amount
    (idle_card_hours, rate.map_or(Money::round_fen(Decimal::ZERO), |r| r.amount(idle_card_hours)))
}

/// A pod's row of the low-utilization top N from its sums over a range `range_seconds` long.
pub fn wasteful_pod(p: PodSums, range_seconds: i64) -> WastefulPod {
    let metered = p.gpu_seconds - p.unmetered_gpu_seconds;
    let wasted = (metered - p.effective_gpu_seconds).max(0.0);
    let (wasted_card_hours, wasted_amount) =
        idle_money(p.gpu_seconds, p.effective_gpu_seconds, p.unmetered_gpu_seconds, p.rate);
    let per_month = wasted_card_hours * Decimal::from(HOURS_PER_MONTH * 3600) / Decimal::from(range_seconds.max(1));
    WastefulPod {
        wasted_amount,
        wasted_per_month: p.rate.map_or(Money::round_fen(Decimal::ZERO), |r| r.amount(per_month)),
        cluster: p.cluster,
        namespace: p.namespace,
        pod: p.pod,
        team: p.team,
        owner: p.owner,
        gpu_model: p.gpu_model,
        gpu_hours: p.gpu_seconds / 3600.0,
        effective_gpu_hours: p.effective_gpu_seconds / 3600.0,
        unmetered_gpu_hours: p.unmetered_gpu_seconds / 3600.0,
        wasted_gpu_hours: wasted / 3600.0,
        utilization: (metered > 0.0).then(|| p.effective_gpu_seconds / metered),
        rate: p.rate,
    }
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
            // one figure per pod: the low-utilization report's wasted amount over the same window
            let (_, idle_spend) = idle_money(p.gpu_seconds, p.effective_gpu_seconds, p.unmetered_gpu_seconds, p.rate);
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
    fn one_figure_per_pod_in_the_idle_list_and_the_low_utilization_report() {
        // 2 cards held 24 h, 0.5 h of it unmetered, 4 % busy over the metered time, 12.5 yuan: idle card-hours =
        // (48 − 1) × 0.96 = 45.12; × 12.5 = 564.00 in both
        let mut p = pod("p", 2.0, 0.0, Some(4096.0), Some(dec!(12.5)));
        p.unmetered_gpu_seconds = 3600.0;
        p.effective_gpu_seconds = (p.gpu_seconds - 3600.0) * 0.04;
        let idle = idle_list(std::slice::from_ref(&p), IdleRule::WEEKLY, false);
        let sums = PodSums {
            cluster: p.cluster.clone(),
            namespace: p.namespace.clone(),
            pod: p.pod.clone(),
            team: p.team.clone(),
            owner: None,
            gpu_model: p.gpu_model.clone(),
            gpu_seconds: p.gpu_seconds,
            effective_gpu_seconds: p.effective_gpu_seconds,
            unmetered_gpu_seconds: p.unmetered_gpu_seconds,
            rate: p.rate,
        };
        let low = wasteful_pod(sums, 7 * 24 * 3600);
        assert_eq!(idle[0].idle_spend.to_string(), "564.00");
        assert_eq!(low.wasted_amount, idle[0].idle_spend);
    }

    #[test]
    fn unmetered_time_is_not_idle_time() {
        let mut p = pod("dark", 1.0, 0.0, Some(9_000.0), None);
        p.unmetered_gpu_seconds = p.gpu_seconds;
        assert!(idle_list(&[p], IdleRule::WEEKLY, true).is_empty());
    }

    #[test]
    fn wasteful_pods_carry_money_and_print_rounded() {
        // 10 h of 1 card, 0.9838 h effective, 1 h unmetered: 9 metered h, 8.0162 h wasted × 12.5 = 100.2025 → 100.20
        let p = PodSums {
            cluster: "c".into(),
            namespace: "ns".into(),
            pod: "p".into(),
            team: "t".into(),
            owner: Some("张三".into()),
            gpu_model: "A100-80GB".into(),
            gpu_seconds: 36_000.0,
            effective_gpu_seconds: 0.9838 * 3600.0,
            unmetered_gpu_seconds: 3600.0,
            rate: RatePerCardHour::new(dec!(12.5)),
        };
        let w = wasteful_pod(p.clone(), 36_000);
        assert_eq!(w.wasted_amount.to_string(), "100.20");
        // at a month's pace over a 10 h range: 8.0162 h × 730 / 10 h × 12.5 = 7,314.7825 → 7,314.78
        assert_eq!(w.wasted_per_month.to_string(), "7314.78");
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["wasted_gpu_hours"], serde_json::json!(8.016));
        assert_eq!(v["effective_gpu_hours"], serde_json::json!(0.984));
        // 0.9838 / 9 = 0.10931… → 0.1093
        assert_eq!(v["utilization"], serde_json::json!(0.1093));
        assert_eq!(
            (v["owner"].as_str(), v["gpu_model"].as_str(), v["rate"].as_str()),
            (Some("张三"), Some("A100-80GB"), Some("12.5000"))
        );
        // unpriced: no money, said by a null rate
        let w = wasteful_pod(PodSums { rate: None, ..p }, 36_000);
        assert!(w.rate.is_none());
        assert_eq!((w.wasted_amount.to_string(), w.wasted_per_month.to_string()), ("0.00".into(), "0.00".into()));
        assert_eq!(round_for_display(0.09838000000000002, 4), 0.0984);
        assert!(round_for_display(f64::NAN, 3).is_nan());
    }

    #[test]
    fn rules_are_checked() {
        assert!(IdleRule { max_utilization: 1.5, min_memory_mib: 0.0 }.validate().is_err());
        assert!(IdleRule { max_utilization: 0.1, min_memory_mib: -1.0 }.validate().is_err());
        assert!(IdleRule::WEEKLY.validate().is_ok());
    }
}
