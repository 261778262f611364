//! Money and quantities that finance reads: yuan as `Decimal` (never floating point), rounded half up to the fen.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, Neg, Sub};

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

/// An amount of yuan, always a whole number of fen (0.01).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(transparent)]
#[schema(value_type = String, example = "1185.19")]
pub struct Money(Decimal);

impl Money {
    pub const ZERO: Money = Money(Decimal::ZERO);

    /// Rounds any exact amount to the fen, half up (四舍五入: 0.005 → 0.01, −0.005 → −0.01).
    pub fn round_fen(exact: Decimal) -> Money {
        let mut d = exact.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero);
        // always two decimals, so JSON, CSV and PDF all print "24000.00"
        d.rescale(2);
        Money(d)
    }

    /// An amount already in fen, e.g. parsed from a stored bill; more than two decimals are rounded half up.
    pub fn from_decimal(d: Decimal) -> Money {
        Self::round_fen(d)
    }

    pub fn as_decimal(self) -> Decimal {
        self.0
    }

    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2}", self.0)
    }
}

impl Add for Money {
    type Output = Money;
    fn add(self, o: Money) -> Money {
        Money(self.0 + o.0)
    }
}

impl Sub for Money {
    type Output = Money;
    fn sub(self, o: Money) -> Money {
        Money(self.0 - o.0)
    }
}

impl Neg for Money {
    type Output = Money;
    fn neg(self) -> Money {
        Money(-self.0)
    }
}

impl Sum for Money {
    fn sum<I: Iterator<Item = Money>>(iter: I) -> Money {
        iter.fold(Money::ZERO, Add::add)
    }
}

/// A rate in yuan per card-hour, kept to 4 decimals (the rate printed on a bill is the rate used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(transparent)]
#[schema(value_type = String, example = "12.3457")]
pub struct RatePerCardHour(Decimal);

impl RatePerCardHour {
    pub const DECIMALS: u32 = 4;

    /// Rounds an exact rate half up to 4 decimals; a negative rate is refused.
    pub fn new(exact: Decimal) -> Option<Self> {
        (exact >= Decimal::ZERO).then(|| {
            let mut d = exact.round_dp_with_strategy(Self::DECIMALS, RoundingStrategy::MidpointAwayFromZero);
            d.rescale(Self::DECIMALS);
            Self(d)
        })
    }

    pub fn as_decimal(self) -> Decimal {
        self.0
    }

    /// The amount for `card_hours` at this rate, rounded to the fen.
    pub fn amount(self, card_hours: Decimal) -> Money {
        Money::round_fen(self.0 * card_hours)
    }
}

impl fmt::Display for RatePerCardHour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.4}", self.0)
    }
}

/// Card-hours as a `Decimal` from stored card-seconds (`f64`): rounded to 6 decimals (3.6 ms of one card), so
/// the same stored seconds always give the same billed hours.
pub fn card_hours_from_seconds(seconds: f64) -> Decimal {
    Decimal::from_f64_retain(seconds / 3600.0)
        .unwrap_or_default()
        .round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero)
}

/// Digits with thousands separated by commas: `1234567` → `1,234,567` (the integer part of a figure as shown).
pub fn thousands(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn rounds_half_up_to_the_fen() {
        assert_eq!(Money::round_fen(dec!(1.005)).to_string(), "1.01");
        assert_eq!(Money::round_fen(dec!(1.004999)).to_string(), "1.00");
        assert_eq!(Money::round_fen(dec!(-1.005)).to_string(), "-1.01");
        assert_eq!(Money::round_fen(dec!(2)).to_string(), "2.00");
    }

    #[test]
    fn rates_and_amounts() {
        let r = RatePerCardHour::new(dec!(12.34565)).unwrap();
        assert_eq!(r.to_string(), "12.3457");
        assert_eq!(r.amount(dec!(96)).to_string(), "1185.19");
        assert!(RatePerCardHour::new(dec!(-1)).is_none());
        assert_eq!(card_hours_from_seconds(3600.0 * 96.0), dec!(96));
        assert_eq!(card_hours_from_seconds(3600.0 / 7.0), dec!(0.142857));
    }
}
