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

/// The month's spend extrapolated: `spent / elapsed`, `elapsed` the part of the month gone (0–1].
pub fn forecast(spent: Money, elapsed: Decimal) -> Money {
    if elapsed <= Decimal::ZERO {
        return spent;
    }
    Money::round_fen(spent.as_decimal() / elapsed.min(Decimal::ONE))
}

/// Every (threshold, basis) that `spent` and its forecast have reached, thresholds as shares of `budget`.
pub fn crossings(budget: Money, thresholds: &[Decimal], spent: Money, elapsed: Decimal) -> Vec<(Decimal, Basis)> {
    let projected = forecast(spent, elapsed);
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
    fn forecast_at_the_run_rate() {
        // 300 yuan spent a third of the way through: 900 for the month
        assert_eq!(forecast(Money::round_fen(dec!(300)), dec!(0.3333333333)).to_string(), "900.00");
        assert_eq!(forecast(Money::round_fen(dec!(300)), dec!(1)).to_string(), "300.00");
        let budget = Money::round_fen(dec!(1000));
        let c = crossings(budget, &[dec!(0.8), dec!(1.0)], Money::round_fen(dec!(300)), dec!(0.3333333333));
        assert_eq!(c, vec![(dec!(0.8), Basis::Forecast)]);
        let c = crossings(budget, &[dec!(0.8), dec!(1.0)], Money::round_fen(dec!(800)), dec!(0.5));
        assert_eq!(c, vec![(dec!(0.8), Basis::Actual), (dec!(0.8), Basis::Forecast), (dec!(1.0), Basis::Forecast)]);
    }
}
