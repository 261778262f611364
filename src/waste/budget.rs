//! Budgets (SPEC §7): the forecast at the current run rate, and which thresholds the forecast or the actual spend
//! has crossed. Pure.

use rust_decimal::Decimal;
use serde::Serialize;

use crate::money::Money;

/// What a threshold was crossed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The month-to-date spend.
    Actual,
    /// The spend extrapolated to the whole month at the current run rate.
    Forecast,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Actual => "actual",
            Basis::Forecast => "forecast",
        }
    }
}

/// The month's spend extrapolated: `fixed + (spent − fixed) / elapsed`, `elapsed` the part of the month gone
/// (0–1]; `fixed` the part of `spent` that does not grow with the month (restatements of earlier months, approved
/// adjustments: a ¥10,000 correction booked on day 3 is not a ¥100,000 month).
pub fn forecast(spent: Money, fixed: Money, elapsed: Decimal) -> Money {
    if elapsed <= Decimal::ZERO {
        return spent;
    }
    fixed + Money::round_fen((spent - fixed).as_decimal() / elapsed.min(Decimal::ONE))
}

/// How much of a month one cluster's stored data covers: hours with data, and hours of the month.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Covered {
    pub hours_covered: i64,
    pub hours_of_month: i64,
}

/// A month's spend extrapolated from the hours its data covers, per cluster (issue 33: a forecast from elapsed
/// clock hours fell by ¥426 in 7 minutes without any new data). `total` is what the spend is now, `restated` the
/// part of it that restates earlier months (a fixed amount, not extrapolated); the rest is split over the clusters
/// by `weights` (the priced usage of each, any unit) and each cluster's part scaled by its hours of the month over
/// its hours covered. A cluster with no hour covered cannot be extrapolated: its part stays as it is (it is 0, as
/// nothing of it is stored). Without weights (nothing priced) the total stays. Moves only when stored data does.
pub fn covered_forecast(
    total: Money,
    restated: Money,
    weights: &[(String, Decimal)],
    covered: &std::collections::BTreeMap<String, Covered>,
) -> Money {
    let base = total - restated;
    let sum: Decimal = weights.iter().map(|(_, w)| *w).filter(|w| *w > Decimal::ZERO).sum();
    if sum <= Decimal::ZERO {
        return total;
    }
    let mut scaled = Decimal::ZERO;
    for (cluster, w) in weights.iter().filter(|(_, w)| *w > Decimal::ZERO) {
        let part = base.as_decimal() * *w / sum;
        let factor = match covered.get(cluster) {
            Some(c) if c.hours_covered > 0 => {
                Decimal::from(c.hours_of_month.max(c.hours_covered)) / Decimal::from(c.hours_covered)
            }
            _ => Decimal::ONE,
        };
        scaled += part * factor;
    }
    Money::round_fen(scaled) + restated
}

/// Every (threshold, basis) that `spent` and its forecast have reached, thresholds as shares of `budget`.
pub fn crossings(
    budget: Money,
    thresholds: &[Decimal],
    (spent, fixed): (Money, Money),
    elapsed: Decimal,
) -> Vec<(Decimal, Basis)> {
    let projected = forecast(spent, fixed, elapsed);
    let mut out = Vec::new();
    for t in thresholds {
        let line = budget.as_decimal() * t;
        if spent.as_decimal() >= line {
            out.push((*t, Basis::Actual));
        }
        if projected.as_decimal() >= line {
            out.push((*t, Basis::Forecast));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn a_forecast_scales_each_cluster_by_its_covered_hours() {
        use std::collections::BTreeMap;
        let m = |d: Decimal| Money::round_fen(d);
        let covered = BTreeMap::from([
            ("a".to_string(), Covered { hours_covered: 72, hours_of_month: 720 }),
            ("b".to_string(), Covered { hours_covered: 720, hours_of_month: 720 }),
            ("dark".to_string(), Covered { hours_covered: 0, hours_of_month: 720 }),
        ]);
        // 1,000.00 spent now, 100.00 of it restating October; the other 900.00 is 2/3 cluster a (3 days of 30
        // covered: ×10), 1/3 cluster b (complete): 600.00 × 10 + 300.00 + 100.00 = 6,400.00
        let w = [("a".to_string(), dec!(2)), ("b".to_string(), dec!(1))];
        assert_eq!(covered_forecast(m(dec!(1000)), m(dec!(100)), &w, &covered), m(dec!(6400)));
        // a cluster with nothing covered is not extrapolated; nothing priced, nothing to scale
        let w = [("dark".to_string(), dec!(1))];
        assert_eq!(covered_forecast(m(dec!(50)), Money::ZERO, &w, &covered), m(dec!(50)));
        assert_eq!(covered_forecast(m(dec!(50)), Money::ZERO, &[], &covered), m(dec!(50)));
    }

    #[test]
    fn forecast_at_the_run_rate() {
        // 300 yuan spent a third of the way through: 900 for the month
        let zero = Money::ZERO;
        assert_eq!(forecast(Money::round_fen(dec!(300)), zero, dec!(0.3333333333)).to_string(), "900.00");
        assert_eq!(forecast(Money::round_fen(dec!(300)), zero, dec!(1)).to_string(), "300.00");
        // a fixed part (a correction, an adjustment) is not extrapolated: 100 of usage in a tenth, 1000 fixed
        assert_eq!(
            forecast(Money::round_fen(dec!(1100)), Money::round_fen(dec!(1000)), dec!(0.1)).to_string(),
            "2000.00"
        );
        let budget = Money::round_fen(dec!(1000));
        let c =
            crossings(budget, &[dec!(0.8), dec!(1.0)], (Money::round_fen(dec!(300)), Money::ZERO), dec!(0.3333333333));
        assert_eq!(c, vec![(dec!(0.8), Basis::Forecast)]);
        let c = crossings(budget, &[dec!(0.8), dec!(1.0)], (Money::round_fen(dec!(800)), Money::ZERO), dec!(0.5));
        assert_eq!(c, vec![(dec!(0.8), Basis::Actual), (dec!(0.8), Basis::Forecast), (dec!(1.0), Basis::Forecast)]);
    }
}
