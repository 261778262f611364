//! Pricing: from a GPU model's total cost of ownership (TCO) to a rate in yuan per card-hour, the history of those
//! rates, the names DCGM gives the models, and the comparison with cloud rates (SPEC §5).
//!
//! Pure domain code: no I/O. Money is `Decimal` throughout; a rate is a [`RatePerCardHour`] (4 decimals) and an
//! amount a [`Money`] (the fen, half up).
//!
//! - [`tco`]: validated TCO inputs ([`TcoInputs::validate`] → [`Tco`]) and the yearly breakdown behind a rate.
//! - [`history`]: rate versions with an effective-from date; splitting a billing period where a rate changes.
//! - [`catalog`]: DCGM `modelName` → pricing key (`NVIDIA A100-SXM4-80GB` → `A100-80GB`).
//! - [`cloud`]: cloud reference rates and self-build vs rent, with the break-even allocation.
//!
//! # Fractions of a card (MIG, time-slicing, HAMi)
//!
//! A MIG instance or a shared card is priced by its card fraction `f`, and that fraction is **already in the
//! card-hours** metering stores (SPEC §3: a container holding `q` units holds `q·f` cards). A rate is therefore
//! always per *whole* card-hour and is applied to the stored card-hours as they are: there is no per-profile rate
//! and no second multiplication by `f` here — doing so would bill a 1g.10gb slice at 1/49 of a card.
//! [`priced_card_hours`] states the identity and [`amount`] is the one way an amount is made from a rate.

pub mod book;
pub mod catalog;
pub mod cloud;
pub mod history;
pub mod tco;

use rust_decimal::Decimal;

use crate::money::{Money, RatePerCardHour};

pub use book::RateBook;
pub use catalog::ModelCatalog;
/// A rate set by hand, yuan per card-hour (the same bound as a cloud rate: above it is a unit slip).
pub const RATE: crate::validate::DecimalRange = cloud::CLOUD_RATE;
pub use cloud::{CLOUD_RATE, CloudComparison, CloudRates, RentVsBuild, rent_vs_build};
pub use history::{RateHistory, RateSegment, RateSource, RateVersion, start_of_day};
pub use tco::{ExactBreakdown, HOURS_PER_YEAR, RateBreakdown, Tco, TcoInputs};

/// One refused input: the JSON field name as the API client sent it, and why, in words a user can act on (the
/// one field-error shape of every check, [`crate::validate::FieldError`]).
pub use crate::validate::FieldError;

/// Errors of this module. Every one carries the offending fields, so the API can answer 422 with all of them at
/// once instead of one per round trip.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    #[error("invalid input: {}", join(.0))]
    Invalid(Vec<FieldError>),
}

impl PricingError {
    /// The refused fields, in the order they were found.
    pub fn fields(&self) -> &[FieldError] {
        match self {
            PricingError::Invalid(v) => v,
        }
    }
}

fn join(errors: &[FieldError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// The card-hours a holding is priced at: `units × fraction × hours`, which is exactly what metering stores as
/// card-hours. Stated as a function so the identity is written down once and tested: a 1g.10gb MIG slice
/// (`fraction` = 1/7) held for 7 h is 1 card-hour and costs one card-hour at the model's rate.
pub fn priced_card_hours(units: Decimal, fraction: Decimal, hours: Decimal) -> Decimal {
    units * hours * fraction
}

/// The amount for stored card-hours (fraction already included) at `rate`, rounded half up to the fen — the
/// line-level rounding of SPEC §6.
pub fn amount(rate: RatePerCardHour, card_hours: Decimal) -> Money {
    rate.amount(card_hours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::card_hours_from_seconds;
    use rust_decimal_macros::dec;

    #[test]
    fn a_mig_1g_slice_for_7_hours_costs_one_card_hour() {
        let rate = RatePerCardHour::new(dec!(5.6893)).unwrap();
        let seventh = Decimal::ONE / dec!(7);
        let card_hours = priced_card_hours(Decimal::ONE, seventh, dec!(7));
        assert_eq!(amount(rate, card_hours), Money::round_fen(rate.as_decimal()));
        assert_eq!(amount(rate, card_hours).to_string(), "5.69");
        // The same through the stored path: metering keeps card-seconds, 7 h × 1/7 of a card = 3600 s.
        let stored = card_hours_from_seconds(7.0 * 3600.0 / 7.0);
        assert_eq!(stored, dec!(1));
        assert_eq!(amount(rate, stored), Money::round_fen(rate.as_decimal()));
    }

    #[test]
    fn a_3g_slice_is_three_sevenths_and_whole_cards_are_not_scaled() {
        let rate = RatePerCardHour::new(dec!(7)).unwrap();
        let card_hours = priced_card_hours(Decimal::ONE, dec!(3) / dec!(7), dec!(7));
        assert_eq!(amount(rate, card_hours).to_string(), "21.00");
        // 8 whole cards for 12 h = 96 card-hours (SPEC §3).
        assert_eq!(priced_card_hours(dec!(8), Decimal::ONE, dec!(12)), dec!(96));
    }

    #[test]
    fn errors_list_every_field() {
        let e = PricingError::Invalid(vec![FieldError::new("pue", "must be at least 1"), FieldError::new("x", "y")]);
        assert_eq!(e.to_string(), "invalid input: pue: must be at least 1; x: y");
        assert_eq!(e.fields().len(), 2);
    }
}
