//! Cloud reference rates and self-build vs rent (SPEC §5).
//!
//! A self-built card costs its annual TCO whether it is allocated or not, so the cost of one *allocated*
//! card-hour is `annual TCO / (8760 × allocation)`: it falls as allocation rises. A rented card-hour costs the cloud
//! rate. Building wins when the own allocated card-hour is cheaper; the **break-even allocation** is the allocation
//! at which both cost the same, `annual TCO / (8760 × cloud rate)` — above it building wins. When it would exceed
//! 100 % renting wins at any allocation and there is no break-even.
//!
//! The recovery utilization of the TCO plays no part here: it sets the internal price, not the cost.
//! Figures are exact `Decimal`s (for tests and further arithmetic); [`RentVsBuild::rounded`] gives display values.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use super::{FieldError, HOURS_PER_YEAR, PricingError, Tco};
use crate::validate::DecimalRange;

// A cloud card-hour above a million yuan is a unit slip; the bound also keeps `8760 × rate` far inside `Decimal`.
pub const CLOUD_RATE: DecimalRange = DecimalRange::closed(0, 1_000_000);

/// Cloud prices of the same card model in yuan per card-hour; any may be unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloudRates {
    #[serde(default, deserialize_with = "crate::validate::decimal::optional_decimal")]
    pub on_demand: Option<Decimal>,
    #[serde(default, deserialize_with = "crate::validate::decimal::optional_decimal")]
    pub spot: Option<Decimal>,
    #[serde(default, deserialize_with = "crate::validate::decimal::optional_decimal")]
    pub reserved: Option<Decimal>,
}

/// Own cost against one cloud rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CloudComparison {
    pub cloud_rate: Decimal,
    /// Cloud rate − own cost per allocated card-hour: positive when building is cheaper.
    pub saving_per_card_hour: Decimal,
    /// Building is strictly cheaper at the measured allocation (a tie is not a win).
    pub build_wins: bool,
    /// The allocation (0–1) at which own and cloud cost the same; `None` when it would exceed 1 (or the cloud is
    /// free): renting wins at every allocation.
    pub break_even_allocation: Option<Decimal>,
}

/// Self-build vs rent at a measured allocation rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RentVsBuild {
    pub allocation_rate: Decimal,
    /// `annual TCO / (8760 × allocation)`.
    pub own_cost_per_allocated_card_hour: Decimal,
    /// `annual TCO / 8760`: the own cost if every hour were allocated.
    pub own_cost_at_full_allocation: Decimal,
    pub on_demand: Option<CloudComparison>,
    pub spot: Option<CloudComparison>,
    pub reserved: Option<CloudComparison>,
}

impl RentVsBuild {
    /// Display values: costs and savings half up to 4 decimals (like a rate), allocations to 4 decimals
    /// (a hundredth of a percent).
    pub fn rounded(&self) -> RentVsBuild {
        let r4 = |d: Decimal| d.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero);
        let cmp = |c: &Option<CloudComparison>| {
            c.as_ref().map(|c| CloudComparison {
                cloud_rate: r4(c.cloud_rate),
                saving_per_card_hour: r4(c.saving_per_card_hour),
                build_wins: c.build_wins,
                break_even_allocation: c.break_even_allocation.map(r4),
            })
        };
        RentVsBuild {
            allocation_rate: r4(self.allocation_rate),
            own_cost_per_allocated_card_hour: r4(self.own_cost_per_allocated_card_hour),
            own_cost_at_full_allocation: r4(self.own_cost_at_full_allocation),
            on_demand: cmp(&self.on_demand),
            spot: cmp(&self.spot),
            reserved: cmp(&self.reserved),
        }
    }
}

/// Compares the own card-hour at `allocation_rate` (allocated cards / capacity, in (0, 1]) with each known cloud
/// rate. Refuses, all at once, an allocation outside (0, 1] and a negative or absurd cloud rate.
pub fn rent_vs_build(tco: &Tco, allocation_rate: Decimal, cloud: &CloudRates) -> Result<RentVsBuild, PricingError> {
    let mut errors = Vec::new();
    if allocation_rate <= Decimal::ZERO || allocation_rate > Decimal::ONE {
        errors.push(FieldError::new(
            "allocation_rate",
            format!("must be more than 0 and at most 1 (a share, not a percent), got {allocation_rate}"),
        ));
    }
    for (field, rate) in [("on_demand", cloud.on_demand), ("spot", cloud.spot), ("reserved", cloud.reserved)] {
        if let Some(r) = rate
            && !CLOUD_RATE.contains(r)
        {
            errors
                .push(FieldError::new(field, format!("must be {} yuan per card-hour, got {r}", CLOUD_RATE.describe())));
        }
    }
    let annual = tco.annual_tco();
    let own = match annual.checked_div(HOURS_PER_YEAR * allocation_rate) {
        Some(own) if errors.is_empty() => own,
        Some(_) => return Err(PricingError::Invalid(errors)),
        None if errors.is_empty() => {
            return Err(PricingError::Invalid(vec![FieldError::new(
                "allocation_rate",
                format!("is too small: the cost per card-hour would be out of range, got {allocation_rate}"),
            )]));
        }
        None => return Err(PricingError::Invalid(errors)),
    };
    let compare = |cloud_rate: Decimal| CloudComparison {
        cloud_rate,
        saving_per_card_hour: cloud_rate - own,
        build_wins: own < cloud_rate,
        break_even_allocation: annual
            .checked_div(HOURS_PER_YEAR * cloud_rate)
            .filter(|&allocation| allocation <= Decimal::ONE),
    };
    Ok(RentVsBuild {
        allocation_rate,
        own_cost_per_allocated_card_hour: own,
        own_cost_at_full_allocation: annual / HOURS_PER_YEAR,
        on_demand: cloud.on_demand.map(compare),
        spot: cloud.spot.map(compare),
        reserved: cloud.reserved.map(compare),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::TcoInputs;
    use crate::pricing::tco::tests::{a100, inputs};
    use proptest::prelude::*;
    use rust_decimal_macros::dec;

    #[test]
    fn a100_against_cloud_by_hand() {
        // annual TCO 34,886.72; at 60 % allocation: 34,886.72 / (8760 × 0.6) = 34,886.72 / 5,256 = 6.63750…
        // at full allocation: 34,886.72 / 8760 = 3.98250…
        // on-demand 12: build wins, saving 5.3625, break-even 34,886.72 / (8760 × 12) = 0.33187…
        // spot 3: below the full-allocation cost, renting always wins, no break-even.
        let tco = a100().validate().unwrap();
        let cloud = CloudRates { on_demand: Some(dec!(12)), spot: Some(dec!(3)), reserved: None };
        let r = rent_vs_build(&tco, dec!(0.6), &cloud).unwrap().rounded();
        assert_eq!(r.own_cost_per_allocated_card_hour, dec!(6.6375));
        assert_eq!(r.own_cost_at_full_allocation, dec!(3.9825));
        let od = r.on_demand.unwrap();
        assert!(od.build_wins);
        assert_eq!(od.saving_per_card_hour, dec!(5.3625));
        assert_eq!(od.break_even_allocation, Some(dec!(0.3319)));
        let spot = r.spot.unwrap();
        assert!(!spot.build_wins);
        assert_eq!(spot.saving_per_card_hour, dec!(-3.6375));
        assert_eq!(spot.break_even_allocation, None);
        assert!(r.reserved.is_none());
    }

    #[test]
    fn a_free_cloud_has_no_break_even_and_a_tie_is_not_a_win() {
        let tco = a100().validate().unwrap();
        let free = CloudRates { on_demand: Some(Decimal::ZERO), ..CloudRates::default() };
        let r = rent_vs_build(&tco, Decimal::ONE, &free).unwrap();
        assert_eq!(r.on_demand.unwrap().break_even_allocation, None);
        // 43,800 yuan a year = 5 yuan per card-hour at full allocation.
        let five = TcoInputs {
            card_price: dec!(43800),
            server_share_per_card: dec!(0),
            depreciation_years: dec!(1),
            electricity_price: dec!(0),
            datacenter_per_card_year: dec!(0),
            staff_per_card_year: dec!(0),
            ..a100()
        };
        let tco = five.validate().unwrap();
        let tie = CloudRates { reserved: Some(dec!(5)), ..CloudRates::default() };
        let r = rent_vs_build(&tco, Decimal::ONE, &tie).unwrap().reserved.unwrap();
        assert!(!r.build_wins);
        assert_eq!(r.break_even_allocation, Some(Decimal::ONE));
    }

    #[test]
    fn bad_allocation_and_cloud_rates_are_refused_together() {
        let tco = a100().validate().unwrap();
        let cloud = CloudRates { on_demand: Some(dec!(-1)), spot: Some(dec!(2)), reserved: Some(dec!(10_000_000)) };
        for allocation in [dec!(0), dec!(-0.5), dec!(1.01), dec!(60)] {
            let err = rent_vs_build(&tco, allocation, &cloud).unwrap_err();
            let fields: Vec<_> = err.fields().iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, ["allocation_rate", "on_demand", "reserved"]);
        }
        // Out of `Decimal`'s range: refused, not a panic.
        let dear = TcoInputs { card_price: dec!(1_000_000_000), ..a100() }.validate().unwrap();
        let err = rent_vs_build(&dear, dec!(0.0000000000000000000000000001), &CloudRates::default()).unwrap_err();
        assert_eq!(err.fields()[0].field, "allocation_rate");
    }

    proptest! {
        #[test]
        fn break_even_times_cloud_is_the_full_allocation_cost(
            i in inputs(),
            cloud_cents in 0i64..=10_000,
            allocation in 1i64..=100,
        ) {
            let tco = i.validate().unwrap();
            let cloud_rate = Decimal::new(cloud_cents, 2);
            let allocation = Decimal::new(allocation, 2);
            let r = rent_vs_build(&tco, allocation, &CloudRates { on_demand: Some(cloud_rate), ..CloudRates::default() })
                .unwrap();
            let c = r.on_demand.unwrap();
            let tolerance = dec!(0.00000000000000000001);
            prop_assert!((r.own_cost_per_allocated_card_hour * allocation - r.own_cost_at_full_allocation).abs() < tolerance);
            prop_assert_eq!(c.build_wins, c.saving_per_card_hour > Decimal::ZERO);
            match c.break_even_allocation {
                Some(be) => {
                    prop_assert!((be * cloud_rate - r.own_cost_at_full_allocation).abs() < tolerance);
                    prop_assert!(be <= Decimal::ONE);
                    // Above the break-even building wins, below it renting does.
                    if (allocation - be).abs() > tolerance {
                        prop_assert_eq!(c.build_wins, allocation > be);
                    }
                }
                None => prop_assert!(cloud_rate.is_zero() || r.own_cost_at_full_allocation > cloud_rate),
            }
        }
    }
}
