//! What a close freezes besides the statement (SPEC §6 "What a close freezes"): the figures the PDF prints next to
//! the bills — the idle pods of the period's last week and the month's utilization — as data in the snapshot, so a
//! closed month's PDF never reads live data; from layout 5 on also each team's unit cost of inference per model,
//! which every face of the statement prints. Types of their own, not the API's `IdlePod` / `Figures` /
//! `UnitCostRow`: what is stored must keep reading when an API type gains, renames or drops a field.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::billing::Month;
use crate::billing::unit_cost::{PodHour, UnitCostRow, UnitGroup, unit_costs};
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
    /// Layout 5 on: each team's unit cost of inference of the month per model (teams without serving pods
    /// absent), as the unit-cost report gave it at the close.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_cost: Option<TeamUnitCosts>,
}

/// Each team's unit cost of inference of a month: team id → one line per model served (ordered by model, then
/// engine). A team without serving pods has no entry.
pub type TeamUnitCosts = BTreeMap<String, Vec<UnitCostLine>>;

/// One model's unit cost of inference in a month for one team (SPEC §9), with every figure the unit-cost report
/// grouped by model gives of it: ratios of sums, rounded as the report rounds them (¥ per million tokens and per
/// thousand requests to 4 decimals, money to the fen).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitCostLine {
    pub model: String,
    /// The engine serving it (`vllm`, `sglang`, `tgi`, `triton`).
    pub engine: String,
    /// Cost of the hours that served tokens or requests.
    pub serving_cost: Money,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub requests: i64,
    /// `None` without tokens (Triton counts none).
    pub cost_per_million_input_tokens: Option<Decimal>,
    pub cost_per_million_output_tokens: Option<Decimal>,
    pub cost_per_million_tokens: Option<Decimal>,
    /// `None` without requests.
    pub cost_per_thousand_requests: Option<Decimal>,
    pub tokens_per_gpu_hour: Option<Decimal>,
    /// Cost of serving hours without traffic: apart, never in the unit costs.
    pub idle_cost: Money,
    pub idle_gpu_hours: Decimal,
    /// Some hour held a GPU model without a rate: its cost counted as 0.
    pub unpriced: bool,
}

impl From<&UnitCostRow> for UnitCostLine {
    fn from(r: &UnitCostRow) -> Self {
        UnitCostLine {
            model: r.key.clone(),
            engine: r.engine.clone().unwrap_or_default(),
            serving_cost: r.serving_cost,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            total_tokens: r.total_tokens,
            requests: r.requests,
            cost_per_million_input_tokens: r.cost_per_million_input_tokens,
            cost_per_million_output_tokens: r.cost_per_million_output_tokens,
            cost_per_million_tokens: r.cost_per_million_tokens,
            cost_per_thousand_requests: r.cost_per_thousand_requests,
            tokens_per_gpu_hour: r.tokens_per_gpu_hour,
            idle_cost: r.idle_cost,
            idle_gpu_hours: r.idle_gpu_hours,
            unpriced: r.unpriced,
        }
    }
}

/// Each team's unit cost per model of a month's serving pod-hours (every team's): each team's pod-hours grouped
/// by model, as the unit-cost report grouped by model gives them to that team's lead (a pod-hour is one team's).
pub fn team_unit_costs(hours: &[PodHour]) -> TeamUnitCosts {
    let mut by_team: BTreeMap<&str, Vec<PodHour>> = BTreeMap::new();
    for h in hours {
        by_team.entry(h.team.as_str()).or_default().push(h.clone());
    }
    by_team
        .into_iter()
        .map(|(team, hours)| {
            (team.to_string(), unit_costs(&hours, UnitGroup::Model).0.iter().map(Into::into).collect())
        })
        .filter(|(_, lines): &(String, Vec<UnitCostLine>)| !lines.is_empty())
        .collect()
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

    fn pod_hour(team: &str, cost: Decimal, models: Vec<crate::billing::ModelHour>) -> PodHour {
        PodHour {
            team: team.into(),
            namespace: format!("{team}-ns"),
            pod: "p".into(),
            day: "2026-10-05".into(),
            month: "2026-10".into(),
            cost,
            unpriced: false,
            gpu_hours: Decimal::ONE,
            models,
        }
    }

    fn served(model: &str, engine: &str, tokens: Option<i64>, requests: i64) -> crate::billing::ModelHour {
        crate::billing::ModelHour {
            model: model.into(),
            engine: engine.into(),
            input_tokens: tokens,
            output_tokens: tokens.map(|_| 0),
            requests,
        }
    }

    #[test]
    fn each_team_gets_its_own_models_as_the_report_of_its_pods_alone() {
        use rust_decimal_macros::dec;
        let hours = vec![
            pod_hour("nlp", dec!(10), vec![served("m", "vllm", Some(1_000_000), 10)]),
            pod_hour("vision", dec!(30), vec![served("m", "vllm", Some(1_000_000), 10)]),
            pod_hour("vision", dec!(6), vec![served("r", "triton", None, 3_000)]),
        ];
        let teams = team_unit_costs(&hours);
        assert_eq!(teams.keys().collect::<Vec<_>>(), ["nlp", "vision"]);
        // the same model on two teams: each team's own cost and tokens, never the mean of both
        assert_eq!(teams["nlp"][0].cost_per_million_tokens, Some(dec!(10)));
        assert_eq!(teams["vision"][0].cost_per_million_tokens, Some(dec!(30)));
        let vision_alone: Vec<UnitCostLine> =
            unit_costs(&hours[1..], UnitGroup::Model).0.iter().map(Into::into).collect();
        assert_eq!(teams["vision"], vision_alone);
        assert_eq!((teams["vision"][1].model.as_str(), teams["vision"][1].engine.as_str()), ("r", "triton"));
        assert_eq!(teams["vision"][1].cost_per_thousand_requests, Some(dec!(2.0000)));
        assert!(team_unit_costs(&[]).is_empty());
    }

    #[test]
    fn unit_costs_are_stored_as_strings_that_keep_their_scale_and_absent_before_layout_5() {
        use rust_decimal_macros::dec;
        let hours = vec![pod_hour("nlp", dec!(40), vec![served("m", "vllm", Some(3_000_000), 4_000)])];
        let frozen = FrozenExtras { unit_cost: Some(team_unit_costs(&hours)), ..Default::default() };
        let v = serde_json::to_value(&frozen).unwrap();
        assert_eq!(v["unit_cost"]["nlp"][0]["cost_per_million_tokens"], "13.3333");
        assert_eq!(v["unit_cost"]["nlp"][0]["serving_cost"], "40.00");
        assert_eq!(serde_json::from_value::<FrozenExtras>(v).unwrap(), frozen);
        // a month frozen before layout 5 stores no key, and reads back without one
        let before = serde_json::to_value(FrozenExtras::default()).unwrap();
        assert!(before.get("unit_cost").is_none(), "{before}");
        assert_eq!(serde_json::from_value::<FrozenExtras>(before).unwrap().unit_cost, None);
    }
}
