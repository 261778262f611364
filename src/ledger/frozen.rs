//! What a close freezes besides the statement (SPEC §6 "What a close freezes"): the figures the PDF prints next to
//! the bills — the idle pods of the period's last week and the month's utilization — as data in the snapshot, so a
//! closed month's PDF never reads live data. Types of their own, not the API's `IdlePod` / `Figures`: what is
//! stored must keep reading when an API type gains, renames or drops a field.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::billing::Month;
use crate::money::{Money, RatePerCardHour};
use crate::waste::{Figures, IdlePod};

/// The frozen extras of a closed month (every team's: a reader gets its own part, `crate::export::ScopedExtras`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FrozenExtras {
    /// The idle-waste list of the period's last 7 days, every team's, ranked as the list is.
    pub idle: Vec<IdleLine>,
    /// The month's utilization, cluster-wide (printed on the finance summary only).
    pub utilization: UtilizationFigures,
    /// Layout 3 on: each cluster's data coverage of the month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Vec<Coverage>>,
    /// Layout 3 on: every team's budget of the month (teams without one absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<BTreeMap<String, Money>>,
    /// Layout 3 on: the previous month's team totals, as its statement read at the close.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousMonth>,
    /// Layout 4 on: the billing time zone (IANA name) its times print in, frozen so that a later change of the
    /// setting never changes a closed month's bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// How much of a month one cluster's stored data covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub cluster: String,
    /// The first and last ingested hour in the month (start of the hour); `None` when none is.
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    /// Hours of the month ingested.
    pub hours_present: u32,
    /// Hours of the month elapsed (up to the month's end, or now for the current month).
    pub hours_elapsed: u32,
}

/// The month before a statement's, as its statement read: each team's total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousMonth {
    pub month: Month,
    /// Closed (final) or open (still moving).
    pub closed: bool,
    pub teams: BTreeMap<String, Money>,
}

/// One idle pod, with every figure a statement prints of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleLine {
    pub cluster: String,
    pub team: String,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    pub cards_held: f64,
    pub hours_held: f64,
    /// 0–1.
    pub average_utilization: f64,
    pub rate: Option<RatePerCardHour>,
    pub idle_spend: Money,
    /// `None` for a pod that has ended.
    pub monthly_projection: Option<Money>,
}

/// The month's utilization figures as the finance summary prints them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UtilizationFigures {
    pub capacity_card_hours: f64,
    /// Of the capacity, offered to workloads (not cordoned, allocatable).
    pub offered_card_hours: f64,
    pub not_offered_card_hours: f64,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub allocation_rate: Option<f64>,
    pub utilization: Option<f64>,
    pub effective_rate: Option<f64>,
}

impl From<&IdlePod> for IdleLine {
    fn from(p: &IdlePod) -> Self {
        IdleLine {
            cluster: p.cluster.clone(),
            team: p.team.clone(),
            namespace: p.namespace.clone(),
            pod: p.pod.clone(),
            gpu_model: p.gpu_model.clone(),
            cards_held: p.cards_held,
            hours_held: p.hours_held,
            average_utilization: p.average_utilization,
            rate: p.rate,
            idle_spend: p.idle_spend,
            monthly_projection: p.monthly_projection,
        }
    }
}

impl From<&Figures> for UtilizationFigures {
    fn from(f: &Figures) -> Self {
        UtilizationFigures {
            capacity_card_hours: f.capacity_card_hours,
            offered_card_hours: f.offered_card_hours,
            not_offered_card_hours: f.not_offered_card_hours,
            gpu_hours: f.gpu_hours,
            effective_gpu_hours: f.effective_gpu_hours,
            allocation_rate: f.allocation_rate,
            utilization: f.utilization,
            effective_rate: f.effective_rate,
        }
    }
}

/// An idle line for tests.
#[cfg(test)]
pub(crate) fn test_line(team: &str, pod: &str) -> IdleLine {
    IdleLine {
        cluster: "c".into(),
        team: team.into(),
        namespace: format!("{team}-ns"),
        pod: pod.into(),
        gpu_model: "A100-80GB".into(),
        cards_held: 1.0,
        hours_held: 24.0,
        average_utilization: 0.01,
        rate: None,
        idle_spend: Money::ZERO,
        monthly_projection: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_figures_read_back_and_an_unknown_field_is_ignored() {
        let frozen = FrozenExtras { idle: vec![test_line("nlp", "a")], ..Default::default() };
        let mut v = serde_json::to_value(&frozen).unwrap();
        v["idle"][0]["added_later"] = serde_json::json!(1);
        assert_eq!(serde_json::from_value::<FrozenExtras>(v).unwrap(), frozen);
    }
}
