//! Unit economics of inference (SPEC §9): what a million tokens and a thousand requests cost, per team,
//! namespace, model, engine, day or month — always a ratio of sums (Σ cost ÷ Σ tokens), never an average of ratios.
//!
//! The caller hands in each serving pod-hour: its GPU cost, unrounded (its GPU-hours × rate, as bills price them),
//! and what each of its models served. A pod-hour's cost is split over its models in proportion to their tokens
//! (Triton's, which counts none, to their requests); a pod-hour that served nothing is **idle serving cost**, kept
//! apart (split evenly over the models it exposes, so each group shows its own) and never spread into a unit cost.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::money::Money;

/// What one model of one serving pod served in one hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelHour {
    pub model: String,
    pub engine: String,
    /// `None`: the engine counts no tokens (Triton).
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub requests: i64,
}

impl ModelHour {
    fn tokens(&self) -> Option<i64> {
        match (self.input_tokens, self.output_tokens) {
            (None, None) => None,
            (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
        }
    }
}

/// One serving pod in one hour: where it belongs, its GPU cost and GPU-hours, and what its models served.
#[derive(Debug, Clone, PartialEq)]
pub struct PodHour {
    pub team: String,
    pub namespace: String,
    pub pod: String,
    /// The billing day of the hour (`YYYY-MM-DD`) and its month (`YYYY-MM`).
    pub day: String,
    pub month: String,
    /// GPU cost of the pod in the hour, unrounded; `None` when a GPU model it held has no rate.
    pub cost: Decimal,
    pub unpriced: bool,
    pub gpu_hours: Decimal,
    pub models: Vec<ModelHour>,
}

/// What a unit-cost report groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnitGroup {
    Team,
    Namespace,
    #[default]
    Model,
    Engine,
    Day,
    Month,
}

impl UnitGroup {
    pub const ALL: [UnitGroup; 6] =
        [UnitGroup::Team, UnitGroup::Namespace, UnitGroup::Model, UnitGroup::Engine, UnitGroup::Day, UnitGroup::Month];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Team => "team",
            Self::Namespace => "namespace",
            Self::Model => "model",
            Self::Engine => "engine",
            Self::Day => "day",
            Self::Month => "month",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }
}

/// The sums behind one group's unit costs (exact; rounded only when printed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitSums {
    /// Cost of every hour that served something (tokens or requests).
    pub served_cost: Decimal,
    /// Cost of hours that served tokens (engines that count them).
    pub token_cost: Decimal,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// GPU-hours behind `token_cost`.
    pub token_gpu_hours: Decimal,
    /// Cost of hours that served requests (every engine).
    pub request_cost: Decimal,
    pub requests: i64,
    /// Cost and GPU-hours of serving hours that served nothing.
    pub idle_cost: Decimal,
    pub idle_gpu_hours: Decimal,
    /// Some hour of the group held a GPU model without a rate (its cost counted as 0).
    pub unpriced: bool,
}

/// One group's row: the sums and the unit costs they give (`None` where the divisor is 0).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct UnitCostRow {
    /// The group's value: a team id, namespace, model (its engine beside it), engine, day (`YYYY-MM-DD`) or month.
    pub key: String,
    /// For groups by model: the engine serving it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Cost of the hours that served tokens or requests, ¥ to the fen.
    #[schema(value_type = String)]
    pub serving_cost: Money,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub requests: i64,
    /// ¥ per million input tokens (serving cost ÷ input tokens × 10⁶), to 4 decimals; null without tokens.
    #[schema(value_type = Option<String>)]
    pub cost_per_million_input_tokens: Option<Decimal>,
    /// ¥ per million output tokens, to 4 decimals; null without tokens.
    #[schema(value_type = Option<String>)]
    pub cost_per_million_output_tokens: Option<Decimal>,
    /// ¥ per million tokens, input and output together, to 4 decimals; null without tokens (Triton counts none).
    #[schema(value_type = Option<String>)]
    pub cost_per_million_tokens: Option<Decimal>,
    /// ¥ per 1,000 successful requests, to 4 decimals.
    #[schema(value_type = Option<String>)]
    pub cost_per_thousand_requests: Option<Decimal>,
    /// Tokens served per GPU-hour of serving that served them, to 2 decimals.
    #[schema(value_type = Option<String>)]
    pub tokens_per_gpu_hour: Option<Decimal>,
    /// Cost of serving hours without traffic, ¥ to the fen: apart, never in the unit costs.
    #[schema(value_type = String)]
    pub idle_cost: Money,
    /// GPU-hours of serving without traffic.
    #[schema(value_type = String)]
    pub idle_gpu_hours: Decimal,
    /// Some hour of the group held a GPU model without a rate: its cost is counted as 0.
    pub unpriced: bool,
}

/// Decimals a unit cost is printed with (¥ per million tokens, per thousand requests).
pub const UNIT_COST_DP: u32 = 4;

fn ratio(num: Decimal, den: i64, scale: i64) -> Option<Decimal> {
    (den > 0).then(|| (num * Decimal::from(scale) / Decimal::from(den)).round_dp(UNIT_COST_DP))
}

impl UnitSums {
    fn add(&mut self, o: &UnitSums) {
        self.served_cost += o.served_cost;
        self.token_cost += o.token_cost;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.token_gpu_hours += o.token_gpu_hours;
        self.request_cost += o.request_cost;
        self.requests += o.requests;
        self.idle_cost += o.idle_cost;
        self.idle_gpu_hours += o.idle_gpu_hours;
        self.unpriced |= o.unpriced;
    }

    /// The row these sums print as.
    pub fn row(&self, key: String, engine: Option<String>) -> UnitCostRow {
        let total = self.input_tokens + self.output_tokens;
        UnitCostRow {
            key,
            engine,
            serving_cost: Money::round_fen(self.served_cost),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            total_tokens: total,
            requests: self.requests,
            cost_per_million_input_tokens: ratio(self.token_cost, self.input_tokens, 1_000_000),
            cost_per_million_output_tokens: ratio(self.token_cost, self.output_tokens, 1_000_000),
            cost_per_million_tokens: ratio(self.token_cost, total, 1_000_000),
            cost_per_thousand_requests: ratio(self.request_cost, self.requests, 1_000),
            tokens_per_gpu_hour: (!self.token_gpu_hours.is_zero())
                .then(|| (Decimal::from(total) / self.token_gpu_hours).round_dp(2)),
            idle_cost: Money::round_fen(self.idle_cost),
            idle_gpu_hours: self.idle_gpu_hours.round_dp(6),
            unpriced: self.unpriced,
        }
    }
}

/// Each model-hour's share of its pod-hour: (the model-hour, its part of the cost and GPU-hours, idle or not).
fn shares(h: &PodHour) -> Vec<(&ModelHour, Decimal, Decimal, bool)> {
    let weight = |m: &ModelHour| m.tokens().unwrap_or(m.requests).max(0);
    let total: i64 = h.models.iter().map(weight).sum();
    let n = Decimal::from(h.models.len().max(1));
    h.models
        .iter()
        .map(|m| {
            if total > 0 {
                let w = Decimal::from(weight(m)) / Decimal::from(total);
                (m, h.cost * w, h.gpu_hours * w, false)
            } else {
                (m, h.cost / n, h.gpu_hours / n, true)
            }
        })
        .collect()
}

/// The sums of one model-hour's share.
fn sums_of(m: &ModelHour, cost: Decimal, gpu_hours: Decimal, idle: bool, unpriced: bool) -> UnitSums {
    if idle {
        return UnitSums { idle_cost: cost, idle_gpu_hours: gpu_hours, unpriced, ..UnitSums::default() };
    }
    let mut s = UnitSums { served_cost: cost, requests: m.requests, unpriced, ..UnitSums::default() };
    if m.requests > 0 {
        s.request_cost = cost;
    }
    if let Some(t) = m.tokens() {
        s.input_tokens = m.input_tokens.unwrap_or(0);
        s.output_tokens = m.output_tokens.unwrap_or(0);
        if t > 0 {
            s.token_cost = cost;
            s.token_gpu_hours = gpu_hours;
        }
    }
    s
}

/// The report's rows, one per group (ordered by key), and the total over all of them.
pub fn unit_costs(hours: &[PodHour], group: UnitGroup) -> (Vec<UnitCostRow>, UnitCostRow) {
    let mut groups: BTreeMap<(String, Option<String>), UnitSums> = BTreeMap::new();
    let mut total = UnitSums::default();
    for h in hours {
        for (m, cost, gpu_hours, idle) in shares(h) {
            let s = sums_of(m, cost, gpu_hours, idle, h.unpriced);
            let key = match group {
                UnitGroup::Team => (h.team.clone(), None),
                UnitGroup::Namespace => (h.namespace.clone(), None),
                UnitGroup::Model => (m.model.clone(), Some(m.engine.clone())),
                UnitGroup::Engine => (m.engine.clone(), None),
                UnitGroup::Day => (h.day.clone(), None),
                UnitGroup::Month => (h.month.clone(), None),
            };
            groups.entry(key).or_default().add(&s);
            total.add(&s);
        }
    }
    let rows = groups.into_iter().map(|((key, engine), s)| s.row(key, engine)).collect();
    (rows, total.row("total".into(), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rust_decimal_macros::dec;

    fn model(model: &str, engine: &str, i: Option<i64>, o: Option<i64>, r: i64) -> ModelHour {
        ModelHour { model: model.into(), engine: engine.into(), input_tokens: i, output_tokens: o, requests: r }
    }

    fn hour(team: &str, day: &str, cost: Decimal, models: Vec<ModelHour>) -> PodHour {
        PodHour {
            team: team.into(),
            namespace: format!("{team}-ns"),
            pod: "p".into(),
            day: day.into(),
            month: day[..7].into(),
            cost,
            unpriced: false,
            gpu_hours: dec!(1),
            models,
        }
    }

    #[test]
    fn a_ratio_of_sums_with_idle_apart() {
        let hours = vec![
            // ¥10 for 1M tokens, ¥30 for 1M tokens: ¥40 / 2M = ¥20 per 1M (the mean of ratios would agree here,
            // but not below)
            hour("a", "2026-11-01", dec!(10), vec![model("m", "vllm", Some(600_000), Some(400_000), 100)]),
            hour("a", "2026-11-01", dec!(30), vec![model("m", "vllm", Some(1_500_000), Some(1_500_000), 300)]),
            // an idle hour: ¥7 apart
            hour("a", "2026-11-02", dec!(7), vec![model("m", "vllm", Some(0), Some(0), 0)]),
        ];
        let (rows, total) = unit_costs(&hours, UnitGroup::Model);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.total_tokens, 4_000_000);
        assert_eq!(r.cost_per_million_tokens, Some(dec!(10.0000)));
        assert_eq!(r.cost_per_million_input_tokens, Some(dec!(19.0476)));
        assert_eq!(r.cost_per_thousand_requests, Some(dec!(100.0000)));
        assert_eq!(r.idle_cost, Money::round_fen(dec!(7)));
        assert_eq!(r.serving_cost, Money::round_fen(dec!(40)));
        assert_eq!(total.cost_per_million_tokens, r.cost_per_million_tokens);
        // per day: the idle day has no unit cost, only idle cost
        let (days, _) = unit_costs(&hours, UnitGroup::Day);
        assert_eq!(days[1].cost_per_million_tokens, None);
        assert_eq!(days[1].idle_cost, Money::round_fen(dec!(7)));
    }

    #[test]
    fn two_models_split_by_tokens_and_triton_by_requests() {
        let hours = vec![
            hour(
                "a",
                "2026-11-01",
                dec!(12),
                vec![model("m1", "vllm", Some(100), Some(200), 3), model("m2", "vllm", Some(500), Some(100), 9)],
            ),
            hour("b", "2026-11-01", dec!(6), vec![model("r", "triton", None, None, 3_000)]),
        ];
        let (rows, _) = unit_costs(&hours, UnitGroup::Model);
        let by: BTreeMap<_, _> = rows.iter().map(|r| (r.key.as_str(), r)).collect();
        // m1: 300 of 900 tokens → ¥4; m2 ¥8
        assert_eq!(by["m1"].cost_per_million_tokens, Some(dec!(4) * dec!(1000000) / dec!(300)).map(|d| d.round_dp(4)));
        assert_eq!(by["m2"].serving_cost, Money::round_fen(dec!(8)));
        // Triton: ¥ per 1,000 requests only
        assert_eq!(by["r"].cost_per_thousand_requests, Some(dec!(2.0000)));
        assert_eq!(by["r"].cost_per_million_tokens, None);
    }

    proptest! {
        /// Whatever the grouping, the groups' sums add up to the total: cost is split, never lost or doubled.
        #[test]
        fn groups_add_up(costs in proptest::collection::vec((0u32..10_000, 0i64..5_000, 0i64..5_000, 0usize..3), 1..40)) {
            let hours: Vec<PodHour> = costs.iter().enumerate().map(|(k, (c, i, o, team))| {
                let mut models = vec![model("m", "sglang", Some(*i), Some(*o), i / 10)];
                if k % 3 == 0 { models.push(model("t", "triton", None, None, *o)); }
                hour(["a", "b", "c"][*team], ["2026-11-01", "2026-11-02"][k % 2], Decimal::from(*c) / dec!(100), models)
            }).collect();
            let all: Decimal = hours.iter().map(|h| h.cost).sum();
            for g in UnitGroup::ALL {
                let (rows, total) = unit_costs(&hours, g);
                let idle: Decimal = rows.iter().map(|r| r.idle_cost.as_decimal()).sum();
                prop_assert!(!rows.is_empty());
                prop_assert_eq!(rows.iter().map(|r| r.total_tokens).sum::<i64>(), total.total_tokens);
                prop_assert_eq!(rows.iter().map(|r| r.requests).sum::<i64>(), total.requests);
                // every yuan is either served or idle
                let exact = unit_sums(&hours, g);
                let spent: Decimal = exact.iter().map(|s| s.idle_cost + s.served_cost).sum();
                prop_assert!((spent - all).abs() < dec!(0.000001), "{} vs {}", spent, all);
                prop_assert!(idle >= Decimal::ZERO);
            }
        }
    }

    /// The groups' exact sums (the test's view of what `unit_costs` rounds).
    fn unit_sums(hours: &[PodHour], g: UnitGroup) -> Vec<UnitSums> {
        let mut groups: BTreeMap<String, UnitSums> = BTreeMap::new();
        for h in hours {
            for (m, cost, gh, idle) in shares(h) {
                let key = match g {
                    UnitGroup::Model => m.model.clone(),
                    _ => h.team.clone(),
                };
                groups.entry(key).or_default().add(&sums_of(m, cost, gh, idle, false));
            }
        }
        groups.into_values().collect()
    }
}
